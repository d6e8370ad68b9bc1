"""``tprimat import-legacy`` end to end on the real seed results."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.result.schema import load_result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"


def test_import_legacy_writes_valid_results(tmp_path):
    files = sorted(str(p) for p in FIXTURES.glob("*.json"))
    out = tmp_path / "imported"
    result = CliRunner().invoke(cli, ["import-legacy", *files, "-o", str(out), "--precision", "bf16", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["imported"]
    assert len(rows) == 3
    for row in rows:
        loaded = load_result(row["result"])
        assert loaded.config.precision == "bf16"
        assert loaded.provenance.parser == "tprimat import-legacy"
        assert loaded.provenance.inputs == [row["input"]]
    by_name = {Path(r["input"]).name: r for r in rows}
    cuda = by_name["output__benchmark_cuda_llama.627dfac.json"]
    assert abs(cuda["tokens_per_s_per_gpu_median"] - (8192 / 1.544 + 8192 / 1.547) / 2) < 1e-9


def test_import_legacy_table_and_warmup_option(tmp_path):
    path = str(FIXTURES / "output__benchmark_cuda_llama.627dfac.json")
    result = CliRunner().invoke(cli, ["import-legacy", path, "-o", str(tmp_path), "--warmup-iterations", "1"])
    assert result.exit_code == 0, result.output
    assert "Imported legacy results" in result.output
    loaded = load_result(next(tmp_path.glob("*.json")))
    assert loaded.summary.warmup_iterations == 1 and loaded.summary.measured_iterations == 9


def test_import_legacy_refuses_a_non_legacy_file(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    result = CliRunner().invoke(cli, ["import-legacy", str(bad), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "not a result of the earlier tprimat scripts" in result.output


def test_import_legacy_refuses_two_inputs_with_one_output_name(tmp_path):
    source = FIXTURES / "output__benchmark_cuda_llama.627dfac.json"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / source.name).write_bytes(source.read_bytes())
    result = CliRunner().invoke(
        cli,
        [
            "import-legacy",
            str(tmp_path / "a" / source.name),
            str(tmp_path / "b" / source.name),
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 2 and "would both be written to" in result.output
