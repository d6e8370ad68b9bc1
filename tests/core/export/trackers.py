"""Real results to export, and the gate that needs each tracker's library.

The results are runs tprimat wrote (provenance in each fixture folder's PROVENANCE.md):
four torch runs on CPU, two configurations × two repeats, as a suite leaves them; one
H200 run with profiled iterations, energy, MFU and a manifest; and one H200 run that
ran out of memory (status failed; it has the run id of the first H200 run, so it is
exported on its own: read together, the loader would take it for a copy).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "tests" / "fixtures" / "compare" / "torch_cpu"
H200 = ROOT / "tests" / "fixtures" / "h200" / "llama3.1-8b_seq2048_gbs1"
H200_OOM = ROOT / "tests" / "fixtures" / "h200" / "llama3.1-8b_seq2048_gbs4_oom"

#: Set by CI's export stage (.ci/run), where the export extra is installed: a missing library fails.
REQUIRED = "TPRIMAT_REQUIRE_EXPORT"


def require(*modules: str) -> None:
    """Skip the calling test module where a tracker's library is missing (fail where it must be there)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    message = f"needs {', '.join(missing)} (pip install -e '.[export]')"
    if os.environ.get(REQUIRED):
        pytest.fail(f"{message}: {REQUIRED} is set", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def results() -> list[Path]:
    """The result files of the suite and of the completed H200 run."""
    return [*sorted(SUITE.glob("*/result.json")), H200 / "result.json"]
