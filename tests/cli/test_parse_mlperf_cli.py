"""``tprimat parse`` on a directory of MLPerf result files: per-system olympic scores."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tprimat.cli import cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mlperf" / "v5.1"


def test_parse_reads_mllog_directories_and_scores_each_system(tmp_path):
    out = tmp_path / "mlperf.json"
    result = CliRunner().invoke(cli, ["parse", str(FIXTURES), "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert json.loads(out.read_text()) == data
    systems = {s["org"]: s for s in data["systems"]}
    assert set(systems) == {"AMD", "Dell"}
    amd = systems["AMD"]
    assert amd["benchmark"] == "llama31_8b" and amd["platform"] == "MI355X"
    assert amd["runs"] == amd["converged"] == 10 and len(amd["olympic_dropped"]) == 2
    # Olympic mean of the eight middle runs, in minutes (MLPerf's summarizer gives the same).
    assert round(amd["olympic_score_min"], 4) == 99.3101
    assert amd["time_to_train_s"]["ci_low"] <= amd["time_to_train_s"]["median"] <= amd["time_to_train_s"]["ci_high"]
    assert any("global_batch_size differs" in line for line in data["not_equivalent"])


def test_parse_prints_the_mlperf_table():
    result = CliRunner().invoke(cli, ["parse", str(FIXTURES / "amd_mi355x")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "olympic score (min)" in result.output
    row = next(line for line in result.output.splitlines() if "MI355X" in line)
    # The comparison report's row: runs converged, olympic score, the folder's scaling factor
    # (its scaling.json), the scaled score, median, interval (minutes).
    cells = [cell.strip() for cell in row.strip("│ ").split("│")][2:8]
    assert cells == ["10/10", "99.31", "×1.00401", "99.71", "99.32", "95.90 – 102.69"]
    assert "not of equivalent work" not in result.output


def test_compare_puts_published_systems_side_by_side(tmp_path):
    result = CliRunner().invoke(cli, ["compare", str(FIXTURES), "-o", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.output)["files"]) == {"report.md", "report.html", "report.json"}
    markdown = (tmp_path / "report.md").read_text()
    assert "| llama31_8b | AMD / MI355X | 10/10 | 99.31 |" in markdown
    assert "| llama31_8b | Dell / 1xXE9680Lx8B200-SXM-180GB | 10/10 | 85.03 |" in markdown
    assert "## Not equivalent" in markdown and "global_batch_size differs" in markdown
    assert "lowest_numerical_precision_in_linear is not in these logs" in markdown
