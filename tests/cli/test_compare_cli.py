"""``tprimat compare`` end to end on results imported from the real seed results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported")
    result = CliRunner().invoke(
        cli,
        ["import-legacy", *map(str, sorted(LEGACY.glob("*.json"))), "-o", str(out), "--precision", "bf16", "--json"],
    )
    assert result.exit_code == 0, result.output
    return out


def test_mismatched_results_are_refused_with_the_differing_fields(imported, tmp_path):
    result = CliRunner().invoke(cli, ["compare", str(imported), "-o", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "seq_length" in result.output and "global_batch_size" in result.output
    assert "8192" in result.output and "2048" in result.output
    assert "--allow-mismatch" in result.output
    assert not (tmp_path / "r").exists()


def test_allow_mismatch_and_formats(imported, tmp_path):
    out = tmp_path / "r"
    result = CliRunner().invoke(
        cli, ["compare", str(imported), "-o", str(out), "--allow-mismatch", "--format", "md,csv"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "report.md").is_file() and (out / "results.csv").is_file()
    assert not (out / "report.html").exists() and not (out / "report.json").exists()
    assert "report written to" in result.output


def test_matching_pair_with_baseline_price_override_and_json(imported, tmp_path):
    files = [str(p) for p in sorted(imported.glob("*train_*.json"))]
    out = tmp_path / "r"
    result = CliRunner().invoke(
        cli,
        [
            "compare",
            *files,
            "-o",
            str(out),
            "--baseline",
            "nvidia",
            "--format",
            "json",
            "--set",
            'cost.gpu_hour_prices={ "MI300X" = 1.0, "H100-SXM" = 2.0 }',
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["baseline"] == "8× H100-SXM · NeMo"
    report = json.loads((out / "report.json").read_text())
    prices = {s["device"]: s["cost"]["price_per_gpu_hour"] for s in report["systems"]}
    assert prices == {"MI300X": 1.0, "H100-SXM": 2.0}


def test_bad_format_is_an_error(imported, tmp_path):
    result = CliRunner().invoke(cli, ["compare", str(imported), "--format", "pdf", "-o", str(tmp_path)])
    assert result.exit_code == 2 and "choose from md, html, csv, json" in result.output


def test_help_does_not_import_plotting():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom tprimat.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\nassert 'compare' in r.output\n"
        "assert 'import-legacy' in r.output\n"
        "r = CliRunner().invoke(cli, ['compare', '--help'])\nassert r.exit_code == 0\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_allow_mismatch_terminal_table_marks_ratios_across_configurations(imported, tmp_path):
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["compare", str(imported), "-o", str(tmp_path / "r"), "--allow-mismatch", "--format", "md"]
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if " · " in line]
    assert len(rows) == 3 and "baseline" in rows[0], result.output
    assert all("× (configurations differ)" in line for line in rows[1:]), result.output
    assert "warning: configurations differ between groups" in result.output
