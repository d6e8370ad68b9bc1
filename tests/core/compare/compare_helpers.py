"""Results for comparison tests, all built from real measurements.

* ``legacy_dir``: the earlier tool's seed results (tests/fixtures/legacy) converted by
  ``tprimat import-legacy`` (precision bf16 given on import, as the earlier scripts' config used).
* ``window_result``: a result assembled (``assemble_result``) from a window of a real run's
  recorded step times; two windows of one run stand in for two repeats of a system.
* ``tests/fixtures/compare/torch_cpu/``: run directories of ``tprimat run --backend torch`` on CPU
  (how they were made: its PROVENANCE.md); ``test_compare_torch_cpu_results`` uses them.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from tprimat.parse.legacy import LegacyOptions, convert_legacy
from tprimat.result.builder import assemble_result
from tprimat.result.resultjson import write_result
from tprimat.result.schema import Provenance, Result

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LEGACY = FIXTURES / "legacy"
CUDA = LEGACY / "output__benchmark_cuda_llama.627dfac.json"
AMD = LEGACY / "output_prev__train_amd_prim_llama.516b342.json"
NVD = LEGACY / "output_prev__train_nvd_nemo_llama.516b342.json"
TORCH_CPU = FIXTURES / "compare" / "torch_cpu"


def imported(path: Path) -> Result:
    return convert_legacy(path, LegacyOptions(precision="bf16"))


def write_legacy_results(out: Path) -> Path:
    for path in (CUDA, AMD, NVD):
        result = imported(path)
        write_result(result, out / f"{result.run.id}.json")
    return out


def legacy_file(legacy_dir: Path, source: Path) -> Path:
    return legacy_dir / f"legacy-{source.name[:-5]}.json"


def window_result(source: Result, first: int, last: int, run_id: str) -> Result:
    """``source`` restricted to iterations ``first``..``last``, all measured (no warm-up)."""
    records = [
        attrs.evolve(r, tokens=None, tokens_per_s_per_gpu=None)
        for r in source.iterations
        if first <= r.iteration <= last
    ]
    return assemble_result(
        run=attrs.evolve(source.run, id=run_id),
        config=source.config,
        records=records,
        hardware=source.hardware,
        software=source.software,
        provenance=Provenance(
            inputs=list(source.provenance.inputs),
            parser="test window",
            notes=[f"iterations {first}-{last} of {source.run.id}"],
        ),
        warmup_iterations=0,
    )
