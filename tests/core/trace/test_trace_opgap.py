"""The step-time gap of two traces decomposed by operator: the parts add up to the measured gap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.trace.compare import compare_traces
from tprimat.trace.host_steps import host_step_breakdown
from tprimat.trace.opgap import exclusive_by_group, operator_breakdown
from tprimat.trace.opread import activity_operators, read_ops
from tprimat.trace.roofline import device_ceilings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MI300 = FIXTURES / "tracelens" / "mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
H100 = FIXTURES / "tracelens" / "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
RESNET = FIXTURES / "tracelens" / "mi300_resnet_act_checkpoint.json.gz"
HTA_DIFF = FIXTURES / "hta" / "trace_diff_control_control.json.gz"


@pytest.fixture(autouse=True)
def _no_microbench(tmp_path, monkeypatch):
    monkeypatch.setenv("TPRIMAT_MICROBENCH_DIR", str(tmp_path / "no-microbench"))


@pytest.mark.parametrize("path", [MI300, H100, RESNET, HTA_DIFF], ids=lambda p: p.name[:30])
def test_operator_split_adds_up_to_the_host_steps(path):
    ops = read_ops(path)
    numbers = sorted({s.number for s in ops.trace.steps})
    split = operator_breakdown(ops, numbers, device_ceilings(ops.trace.device))
    categories = host_step_breakdown(ops.trace, numbers)
    assert split["host_us"] == pytest.approx(categories["host_us"])
    assert split["busy_us"] == pytest.approx(categories["busy_us"], rel=1e-9)
    groups = sum(row["exclusive_us"] for row in split["groups"].values())
    assert groups + split["no_operator_us"] + split["idle_us"] == pytest.approx(split["host_us"], rel=1e-9)


def test_overlapping_kernels_share_an_instant():
    ops = read_ops(RESNET)  # RCCL kernels overlap compute in this trace
    operators = activity_operators(ops)
    step = ops.trace.steps[1]
    exclusive, no_op, busy = exclusive_by_group(ops, operators, [(step.ts, step.ts + step.dur)])
    assert sum(v for v, _ in exclusive.values()) + no_op == pytest.approx(busy, rel=1e-9)


@pytest.mark.parametrize(
    "a, b",
    [(MI300, H100), (H100, MI300), (RESNET, HTA_DIFF)],
    ids=["qwen mi300x vs h100", "qwen h100 vs mi300x", "different models"],
)
def test_gap_decomposition_sums_to_the_measured_step_difference(a, b):
    comparison = compare_traces([a], [b], workers=1)
    gap = comparison.operator_gap()
    measured = comparison.b.step_us - comparison.a.step_us  # the host ProfilerStep, as the category table has it
    parts = gap.components()
    assert abs(sum(parts.values()) - measured) <= 0.01 * abs(measured)
    assert gap.delta_us == pytest.approx(measured, rel=1e-9)
    rows = gap.matched()
    assert sum(r["delta_us"] for r in rows) == pytest.approx(parts["matched_us"])


def test_qwen_pair_matches_every_operator_and_says_how_far_from_the_roof():
    comparison = compare_traces([MI300], [H100], workers=1)
    gap = comparison.operator_gap()
    assert gap.unmatched("a") == [] and gap.unmatched("b") == []  # same model, same shapes on both vendors
    linear = next(r for r in gap.matched() if r["name"] == "aten::linear" and "2816x1024 (bf16)" in r["shapes"])
    assert 0 < linear["a_roofline_fraction"] < linear["b_roofline_fraction"] < 1
    lines = comparison.operator_lines(limit=10)
    assert any(
        line.startswith("aten::linear")
        and "on MI300X VF this GEMM reaches" in line
        and "of its roofline, on H100" in line
        for line in lines
    )
    document = comparison.to_dict()
    assert document["operators"]["components"] == pytest.approx(gap.components())
    json.dumps(document, allow_nan=False)
    markdown = comparison.to_markdown()
    assert "Operators behind the difference" in markdown and "roofline MI300X VF" in markdown


def test_without_operators_the_comparison_is_as_before():
    with_ops = compare_traces([MI300], [H100], workers=1)
    without = compare_traces([MI300], [H100], workers=1, operators=False)
    assert without.operator_gap() is None and without.to_dict()["operators"] is None
    assert with_ops.rows() == without.rows()


def test_cli_compare_prints_the_operator_split(tmp_path):
    out = CliRunner().invoke(cli, ["trace", "compare", str(MI300), str(H100), "-j", "1", "-o", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "Operators behind the difference" in out.output and "= matched" in out.output
    assert "of its roofline" in out.output
    written = json.loads((tmp_path / "trace_comparison.json").read_text())
    assert written["operators"]["matched_groups"] > 20
    quick = CliRunner().invoke(cli, ["trace", "compare", str(MI300), str(H100), "-j", "1", "--no-operators"])
    assert quick.exit_code == 0 and "Operators behind" not in quick.output


def test_critical_path_share_per_group_is_opt_in():
    comparison = compare_traces([MI300], [H100], workers=1, critical_path=True)
    gap = comparison.operator_gap()
    assert gap.has_critical_path
    rows = gap.matched()
    assert all(
        0.0 <= r["a_on_path"] <= 1.0 and 0.0 <= r["b_on_path"] <= 1.0 for r in rows if r["a_on_path"] is not None
    )
    linear = next(r for r in rows if r["name"] == "aten::linear")
    assert linear["a_on_path"] > 0 and linear["b_on_path"] > 0  # GPU-bound step: its GEMMs set its length
    assert "on critical path MI300X VF" in comparison.to_markdown()
    assert not compare_traces([MI300], [H100], workers=1).operator_gap().has_critical_path
