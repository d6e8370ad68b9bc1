"""``tprimat parse`` and ``compare`` on published MLPerf result folders, side files included."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from tprimat.cli import cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mlperf"
MI355X_8B = FIXTURES / "v5.1" / "amd_mi355x"
PUBLISHED = FIXTURES / "v5.1_published"
DELL_SCRIPT = "config_X780x8B200-SXM-180G_1x8x1xtp1pp1cp1.sh"


def test_parse_a_folder_with_scaling_json_gives_both_scores():
    result = CliRunner().invoke(cli, ["parse", str(MI355X_8B), "--json"])
    assert result.exit_code == 0, result.output
    [amd] = json.loads(result.output)["systems"]
    assert round(amd["olympic_score_min"], 4) == 99.3101  # the olympic mean, as before
    assert amd["scaling_factor"] == 1.004011735824202
    assert amd["scaling_source"] == str(MI355X_8B / "scaling.json") and amd["scaling_problem"] is None
    assert round(amd["scaled_score_min"], 3) == 99.709  # MLCommons' published time to train (5.1-0018)
    assert amd["scaled_score_s"] == amd["scaled_score_min"] * 60


def test_result_files_named_one_by_one_take_their_folder_scaling():
    files = [str(p) for p in sorted(MI355X_8B.glob("result_*.txt"))]
    result = CliRunner().invoke(cli, ["parse", *files, "--json"])
    assert result.exit_code == 0, result.output
    [amd] = json.loads(result.output)["systems"]
    assert round(amd["olympic_score_min"], 4) == 99.3101 and round(amd["scaled_score_min"], 3) == 99.709


def test_parse_prints_the_factor_and_its_file():
    result = CliRunner().invoke(cli, ["parse", str(MI355X_8B)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "scaled score (min)" in result.output
    assert f"scaling factor 1.004011735824202 from {MI355X_8B / 'scaling.json'}" in result.output


def test_parse_a_published_tree_reports_files_it_does_not_read():
    result = CliRunner().invoke(cli, ["parse", str(PUBLISHED), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    scaled = {(s["benchmark"], s["platform"]): round(s["scaled_score_min"], 3) for s in data["systems"]}
    assert scaled == {
        ("llama31_8b", "MI350X"): 122.929,
        ("llama2_70b_lora", "1xMI355X"): 10.185,
        ("llama2_70b_lora", "1xXE9780x8B200-SXM-180GB"): 10.09,
    }
    [script] = data["other_files"]
    assert script["path"].endswith(DELL_SCRIPT) and script["kind"] == "unknown"
    printed = CliRunner().invoke(cli, ["parse", str(PUBLISHED)], env={"COLUMNS": "250"})
    assert printed.exit_code == 0 and "not read" in printed.output and DELL_SCRIPT in printed.output


def test_parse_a_folder_with_power_readings(tmp_path):
    folder = tmp_path / "llama31_8b"
    shutil.copytree(MI355X_8B, folder)
    shutil.copytree(FIXTURES / "v4.1_power" / "power", folder / "power")
    result = CliRunner().invoke(cli, ["parse", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert round(data["systems"][0]["scaled_score_min"], 3) == 99.709
    assert [o["kind"] for o in data["other_files"]] == ["power"]


def test_compare_a_published_tree(tmp_path):
    result = CliRunner().invoke(cli, ["compare", str(PUBLISHED), "-o", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "report.md").read_text()
    assert "| llama31_8b | AMD / MI350X | 10/10 | 122.44 | ×1.00401 | 122.93 |" in markdown
    assert "## Scaling factors" in markdown and "## Files not read" in markdown and DELL_SCRIPT in markdown
    report = json.loads((tmp_path / "report.json").read_text())
    assert len(report["systems"]) == 3 and len(report["other_files"]) == 1
