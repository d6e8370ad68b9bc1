"""``tprimat compare``: which runs are repeats of one system, and what an interval from few runs is called.

Real results only: ``torch_cpu_mbs`` holds two runs of one machine launched with micro-batch 2 and 4
(two setups, not two repeats); ``torch_cpu`` holds two repeats each of 1 and 2 processes (see the
PROVENANCE.md files of both).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tprimat.cli import cli

COMPARE = Path(__file__).resolve().parents[1] / "fixtures" / "compare"
MBS = COMPARE / "torch_cpu_mbs"
REPEATS = COMPARE / "torch_cpu"


def compare(tmp_path: Path, *args: str):
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["compare", *args, "-o", str(out), "--format", "md,json"])
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    return result, report, markdown


def test_runs_launched_with_different_micro_batches_are_different_systems(tmp_path):
    result, report, markdown = compare(tmp_path, str(MBS))
    assert result.exit_code == 0, result.output
    labels = [s["label"] for s in report["systems"]]
    assert labels == ["1× AMD EPYC · pytorch · micro_batch_size=2", "1× AMD EPYC · pytorch · micro_batch_size=4"]
    assert [s["run_keys"] for s in report["systems"]] == [["R1"], ["R2"]]
    # each is one run: no interval pretends to come from repeats
    assert all(s["tokens_per_s_per_gpu"]["n"] == 1 for s in report["systems"])
    assert report["within_system"] == {}
    assert "| 1× AMD EPYC · pytorch · micro_batch_size=2 | R1 |" in markdown
    assert "1× AMD EPYC · pytorch · micro_batch_size=4: " in markdown  # the summary's ratio line names it


def test_group_by_pools_as_asked_and_the_report_names_what_differs_inside(tmp_path):
    result, report, markdown = compare(tmp_path, str(MBS), "--group-by", "platform,device")
    assert result.exit_code == 0, result.output
    [system] = report["systems"]
    assert system["label"] == "platform=cpu · device=AMD EPYC" and system["run_keys"] == ["R1", "R2"]
    differing = {row["key"]: row["values_by_run"] for row in report["within_system"][system["label"]]}
    assert differing["settings.training.micro_batch_size"] == {"R1": 2, "R2": 4}
    assert "Settings that differ inside platform=cpu · device=AMD EPYC" in markdown
    assert "launched different settings (config.micro_batch_size" in result.output  # the terminal warns too
    # an interval from two runs is their range, and is called so
    agg = system["tokens_per_s_per_gpu"]
    assert agg["interval"] == "range of 2 runs"
    assert (agg["ci_low"], agg["ci_high"]) == (agg["min"], agg["max"])
    assert "(range of 2 runs)" in markdown and "95% CI" not in markdown.split("## Throughput")[1].split("##")[0]


def test_repeats_of_one_setup_stay_one_system_and_two_runs_are_a_range_not_a_ci(tmp_path):
    result, report, markdown = compare(tmp_path, str(REPEATS))
    assert result.exit_code == 0, result.output
    assert [s["run_keys"] for s in report["systems"]] == [["R1", "R2"], ["R3", "R4"]]
    for system in report["systems"]:
        assert system["tokens_per_s_per_gpu"]["interval"] == "range of 2 runs"
    other = report["systems"][1]
    assert other["ratio"]["interval"].startswith("range of the runs' ratios (2 vs 2 runs)")
    throughput = markdown.split("## Throughput")[1].split("##")[0]
    assert "95% CI" not in throughput and "range of 2 runs" in throughput
    assert "interval over runs" in result.output and "95% CI" not in result.output


def test_an_unknown_group_by_key_is_one_line_and_exit_code_2(tmp_path):
    result, _, _ = compare(tmp_path, str(MBS), "--group-by", "platform,colour")
    assert result.exit_code == 2
    assert "--group-by 'colour' names no recorded setting" in result.output and "Traceback" not in result.output
    result, report, _ = compare(tmp_path, str(MBS), "--group-by", "training.micro_batch_size")
    assert result.exit_code == 0, result.output
    assert [s["label"] for s in report["systems"]] == ["micro_batch_size=2", "micro_batch_size=4"]
