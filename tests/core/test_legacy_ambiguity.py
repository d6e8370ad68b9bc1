"""A legacy result whose stored throughput disagrees with itself by an exact factor.

The earlier log extractor defaulted ``--sequence-length`` to 2048 while Primus's MI300X
Llama 3.1 8B config runs 8192 (``tests/fixtures/primus_configs``): a stored tokens/s/GPU
taken from the Primus log is then exactly 4× the recomputation from the recorded inputs.
The documents here are the real seed result with only that stored figure changed, as the
extractor wrote it when it kept Primus's own tokens/s/GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from tprimat.cli import cli
from tprimat.compare.load import load_runs
from tprimat.parse.legacy import LegacyOptions, convert_legacy, integer_factor
from tprimat.result.resultjson import write_result
from tprimat.result.schema import load_result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
AMD = FIXTURES / "output_prev__train_amd_prim_llama.516b342.json"
NVD = FIXTURES / "output_prev__train_nvd_nemo_llama.516b342.json"


def _with_stored_factor(factor: float, *, total_too: bool = True) -> dict:
    data = json.loads(AMD.read_text())
    data["performance_metrics"]["tokens_per_second_per_gpu"] *= factor
    if total_too:
        data["performance_metrics"]["tokens_per_second"] *= factor
    return data


def test_real_files_are_not_ambiguous():
    for path in (AMD, NVD):
        assert convert_legacy(path).caveats is None


def test_exact_factor_marks_the_result_ambiguous_with_both_candidates_and_figures():
    result = convert_legacy(AMD, data=_with_stored_factor(4))
    caveats = result.caveats
    assert caveats is not None and caveats.ambiguous
    assert "exactly 4× the recomputation" in caveats.ambiguous
    assert caveats.candidates == [
        "sequence_length 8192 with global_batch_size 64 (the file records sequence_length 2048)",
        "global_batch_size 256 with sequence_length 2048 (the file records global_batch_size 64)",
    ]
    stored, recomputed = caveats.figures.values()
    # 64 x 2048 / 2.4298 s (the legacy mean of steps 2..500) / 8 GPUs
    assert recomputed == pytest.approx(6742.94, abs=0.01)
    assert stored == pytest.approx(4 * 6742.94459)
    assert any(n.startswith("AMBIGUOUS:") and "--sequence-length" in n for n in result.provenance.notes)
    assert caveats.resolved_by is None


def test_stating_the_true_value_resolves_it_and_keeps_both_figures():
    result = convert_legacy(AMD, LegacyOptions(sequence_length=8192), data=_with_stored_factor(4))
    caveats = result.caveats
    assert caveats is not None and caveats.ambiguous is None
    assert caveats.resolved_by == "--sequence-length 8192"
    assert len(caveats.figures) == 3
    assert result.config.seq_length == 8192
    assert result.config.settings["legacy"]["training_config"]["sequence_length"] == 2048
    plain = convert_legacy(AMD)
    assert result.summary.tokens_per_s_per_gpu.median == pytest.approx(4 * plain.summary.tokens_per_s_per_gpu.median)
    assert "the legacy file records 2048" in "\n".join(result.provenance.notes)


def test_factor_on_the_per_gpu_figure_only_points_at_the_gpu_count():
    result = convert_legacy(AMD, data=_with_stored_factor(8, total_too=False))
    assert result.caveats.candidates == ["num_gpus 1 (the file records 8)"]


def test_a_non_integer_disagreement_is_not_ambiguous():
    assert convert_legacy(AMD, data=_with_stored_factor(1.37)).caveats is None


@given(st.integers(2, 64), st.floats(1.0, 1e6))
def test_integer_factor_both_ways(k, value):
    assert integer_factor(value * k, value) == k
    assert integer_factor(value, value * k) == -k
    assert integer_factor(value * (k + 0.5), value) is None


def test_ambiguous_result_is_left_out_of_comparisons(tmp_path):
    doubtful = tmp_path / "in.json"
    doubtful.write_text(json.dumps(_with_stored_factor(4)))
    written = write_result(convert_legacy(AMD, data=_with_stored_factor(4)), tmp_path / "r" / "a.json")
    write_result(convert_legacy(NVD), tmp_path / "r" / "b.json")
    assert load_result(written).caveats.ambiguous  # survives the JSON round trip
    loaded = load_runs([tmp_path / "r"])
    assert [r.path.name for r in loaded.runs] == ["b.json"]
    (skipped,) = loaded.skipped
    assert skipped.path.name == "a.json"
    assert "ambiguous" in skipped.reason and "sequence_length 8192" in skipped.reason


def test_import_legacy_cli_flag_resolves(tmp_path):
    source = tmp_path / "train_amd_prim_llama.json"
    source.write_text(json.dumps(_with_stored_factor(4)))
    runner = CliRunner()
    out = runner.invoke(cli, ["import-legacy", str(source), "-o", str(tmp_path / "a")])
    assert out.exit_code == 0, out.output
    assert "AMBIGUOUS" in out.output
    out = runner.invoke(cli, ["import-legacy", str(source), "-o", str(tmp_path / "b"), "--sequence-length", "8192"])
    assert out.exit_code == 0, out.output
    (written,) = (tmp_path / "b").glob("*.json")
    result = load_result(written)
    assert result.caveats.resolved_by == "--sequence-length 8192"
    assert load_runs([tmp_path / "b"]).runs


def test_source_named_by_the_legacy_file_gives_backend_and_framework(tmp_path):
    renamed = tmp_path / "renamed.json"  # no file name to go by: gpu_info.software_stack "nemo"
    renamed.write_text(NVD.read_text())
    result = convert_legacy(renamed)
    assert (result.run.backend, result.run.framework) == ("nvd_nemo", "NeMo")
    primus = convert_legacy(AMD)  # a Primus extraction is framework Primus
    assert (primus.run.backend, primus.run.framework) == ("amd_primus", "Primus")
