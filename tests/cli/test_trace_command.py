"""``tprimat trace analyze`` and ``tprimat trace compare``."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from tprimat.cli import cli

NCCL = "traces/hta/nccl_parser_config_nccl_data.json.gz"
H100 = "traces/tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = "traces/tracelens/mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_analyze_json_has_temporal_categories_and_top_kernels(fixtures):
    result = invoke("trace", "analyze", fixtures / NCCL, "--json", "--top", "3")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (rank,) = data["ranks"]
    assert set(rank["temporal"]) >= {"total_us", "idle_us", "compute_us", "communication_us", "memory_us"}
    assert rank["rank"] == 0 and len(rank["top_kernels"]) == 3
    assert "gemm" in rank["categories"] and "communication" in rank["categories"]
    assert rank["window"]["steps"] == [4, 5]


def test_analyze_several_ranks_in_rank_order(fixtures):
    result = invoke(
        "trace",
        "analyze",
        fixtures / "traces/hta/trace_diff_control_control.json.gz",
        fixtures / NCCL,
        "--json",
        "--steps",
        "1010:1011",
    )
    # the NCCL trace has no steps 1010..1011: a one-line error, exit code 2
    assert result.exit_code == 2 and "no ProfilerStep in 1010:1011" in result.output
    result = invoke(
        "trace", "analyze", fixtures / "traces/hta/trace_diff_control_control.json.gz", fixtures / NCCL, "--json"
    )
    assert [r["rank"] for r in json.loads(result.output)["ranks"]] == [0, 3]


def test_analyze_steps_window(fixtures):
    result = invoke("trace", "analyze", fixtures / NCCL, "--json", "--steps", "5")
    rank = json.loads(result.output)["ranks"][0]
    assert rank["window"] == {"mode": "steps", "steps": [5]} and [s["step"] for s in rank["steps"]] == [5]


def test_analyze_table_output(fixtures):
    result = invoke("trace", "analyze", fixtures / NCCL)
    assert result.exit_code == 0, result.output
    for text in (
        "temporal",
        "communication (exposed)",
        "categories",
        "top 10 kernels",
        "per profiler step",
        "launches:",
    ):
        assert text in result.output


def test_truncated_trace_is_a_one_line_error(fixtures, tmp_path):
    data = (fixtures / NCCL).read_bytes()
    bad = tmp_path / "rank0.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    result = invoke("trace", "analyze", bad)
    assert result.exit_code == 2
    assert "truncated or malformed trace" in result.output and "Traceback" not in result.output


def test_compare_writes_markdown_json_and_png(fixtures, tmp_path):
    out = tmp_path / "cmp"
    result = invoke(
        "trace", "compare", fixtures / MI300, fixtures / H100, "-o", out, "--label-a", "MI300X", "--label-b", "H100"
    )
    assert result.exit_code == 0, result.output
    assert "Time per step: MI300X vs H100" in result.output
    assert "H100 step" in result.output
    markdown = (out / "trace_comparison.md").read_text()
    assert markdown.startswith("## Where one step's time goes: MI300X vs H100")
    assert "| **step (host ProfilerStep)** |" in markdown
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the plot extra is not installed: Markdown and JSON still written
        assert not (out / "trace_comparison.png").exists() and "no PNG written" in result.output
    else:
        assert (out / "trace_comparison.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads((out / "trace_comparison.json").read_text())
    assert data["labels"] == ["MI300X", "H100"]


def test_compare_json(fixtures):
    result = invoke("trace", "compare", fixtures / MI300, fixtures / H100, "--json")
    data = json.loads(result.output)
    assert data["labels"] == ["MI300X VF", "H100 80GB HBM3"]
    assert abs(sum(data["deltas"].values()) - data["delta_us"]) < 1e-6


def test_trace_help_does_not_import_heavy_modules():
    code = (
        "import sys; from click.testing import CliRunner; from tprimat.cli import cli; "
        "r = CliRunner().invoke(cli, ['trace', '--help']); assert r.exit_code == 0, r.output; "
        "heavy = [m for m in ('matplotlib', 'numpy', 'pandas', 'torch', 'ijson') if m in sys.modules]; "
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_analyze_hta_rounding_reproduces_hta(fixtures):
    # HTA 0.5.0 on this trace: idle 338781, compute 75169 (tests/core/trace/test_trace_hta_agreement.py)
    result = invoke("trace", "analyze", fixtures / NCCL, "--json", "--hta-rounding")
    rank = json.loads(result.output)["ranks"][0]
    assert rank["hta_rounding"] is True
    assert (rank["temporal"]["idle_us"], rank["temporal"]["compute_us"]) == (338781, 75169)


def test_analyze_several_ranks_prints_a_rank_summary(fixtures):
    result = invoke("trace", "analyze", fixtures / NCCL, fixtures / "traces/hta/trace_diff_control_control.json.gz")
    assert result.exit_code == 0, result.output
    assert "ranks (ms;" in result.output
