"""Comparing two trace sets: the per-step difference adds up and names the kernels behind it."""

from __future__ import annotations

import json

import pytest

from tprimat.errors import TprimatError
from tprimat.trace.compare import BUCKETS, TraceComparison, compare_traces, trace_files

H100 = "traces/tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = "traces/tracelens/mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


@pytest.fixture(scope="module")
def comparison(request) -> TraceComparison:
    from pathlib import Path

    root = Path(request.config.rootpath) / "tests" / "fixtures"
    return compare_traces([root / MI300], [root / H100], labels=("MI300X", "H100"))


def test_buckets_add_up_to_the_step_time_on_each_side(comparison):
    for side in (comparison.a, comparison.b):
        assert sum(side.buckets.values()) == pytest.approx(side.step_us, rel=1e-9)
    assert sum(comparison.deltas().values()) == pytest.approx(comparison.delta_us, rel=1e-9)


def test_same_model_on_two_vendors(comparison):
    a, b = comparison.a, comparison.b
    assert (a.vendor, b.vendor) == ("amd", "nvidia")
    assert a.steps == b.steps == (6,)  # the one profiled step of each trace
    # hipBLASLt on one side, cuBLAS on the other, both classified GEMM
    assert a.top_kernels["gemm"][0].short_name.startswith("Cijk_")
    assert b.top_kernels["gemm"][0].short_name.startswith("sm90_xmma_gemm")
    assert a.top_kernels["attention"][0].short_name == "attn_fwd"
    assert "flash_fwd_kernel" in b.top_kernels["attention"][0].short_name
    assert a.buckets["gemm"] > 0 and b.buckets["gemm"] > 0
    assert comparison.largest_differences()[0][0] in BUCKETS


def test_markdown_section(comparison):
    text = comparison.to_markdown(plot="trace_comparison.png")
    assert "| per step | MI300X | H100 | H100 − MI300X |" in text
    assert "| GEMM |" in text and "**step (host ProfilerStep)**" in text
    assert "| idle (no GPU activity) |" in text
    assert "Kernels behind the largest differences" in text and "`attn_fwd`" in text
    assert "![step breakdown](trace_comparison.png)" in text
    delta_ms = comparison.delta_us / 1000
    assert f"({delta_ms:+.2f} ms)" in text


def test_plot_writes_a_png(comparison, tmp_path):
    pytest.importorskip("matplotlib")
    path = comparison.plot(tmp_path / "out" / "bars.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_to_dict_is_json(comparison):
    data = json.loads(json.dumps(comparison.to_dict(), allow_nan=False))
    assert data["labels"] == ["MI300X", "H100"]
    assert set(data["deltas"]) == set(BUCKETS)


def test_same_trace_on_both_sides_has_no_difference(fixtures):
    path = fixtures / "traces/hta/trace_diff_control_control.json.gz"
    same = compare_traces([path], [path])
    assert same.delta_us == 0 and all(v == 0 for v in same.deltas().values())
    assert same.labels == ("A100-PG509-200 (A)", "A100-PG509-200 (B)")
    assert same.a.steps == (1009, 1010, 1011, 1012, 1013, 1014)
    assert same.a.buckets["communication"] > 0  # exposed NCCL time of this rank


def test_run_directory_and_trace_directory(tmp_path, fixtures):
    import shutil

    run = tmp_path / "runs" / "r1"
    (run / "traces").mkdir(parents=True)
    shutil.copy(fixtures / H100, run / "traces" / "rank0.pt.trace.json.gz")
    (run / "traces" / "notes.txt").write_text("not a trace")
    assert [p.name for p in trace_files(run)] == ["rank0.pt.trace.json.gz"]
    assert trace_files(run / "traces") == trace_files(run)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TprimatError, match="no traces in it"):
        trace_files(empty)
    with pytest.raises(TprimatError, match="no such trace"):
        trace_files(tmp_path / "missing.json")


def _one_gemm_per_rank(directory, durations):
    directory.mkdir()
    for rank, dur in enumerate(durations):
        event = {
            "ph": "X",
            "cat": "kernel",
            "name": "nvjet_tst_64x64",
            "ts": 10,
            "dur": dur,
            "args": {"stream": 7, "correlation": 1},
        }
        (directory / f"rank{rank}.json").write_text(
            json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": [event]})
        )
    return directory


def _host_steps(path):
    from tprimat.trace.reader import read_trace

    return {s.number: s.dur for s in read_trace(path).steps}


def test_the_step_is_the_host_profiler_step_not_the_gpu_span(comparison, fixtures):
    # ProfilerStep#6 lasts 42.74 ms (MI300X) and 47.15 ms (H100) on the host; the GPU
    # activity launched in it spans only 33.13 ms and 34.89 ms.
    mi300 = _host_steps(fixtures / MI300)[6]
    h100 = _host_steps(fixtures / H100)[6]
    assert comparison.a.step_us == pytest.approx(mi300) and comparison.b.step_us == pytest.approx(h100)
    assert comparison.delta_us == pytest.approx(h100 - mi300)
    assert comparison.a.step_basis == comparison.b.step_basis == "host"
    for side in (comparison.a, comparison.b):
        assert 0 < side.buckets["idle"] < side.step_us
        assert side.idle_share == pytest.approx(side.buckets["idle"] / side.step_us)


def test_a_host_bound_step_shows_as_idle_in_table_headline_and_figure(fixtures, tmp_path):
    # HTA's NCCL fixture: three host steps of about 222 ms in which the GPU is busy about 52 ms.
    busy = fixtures / "traces/hta/nccl_parser_config_nccl_data.json.gz"
    control = fixtures / "traces/hta/trace_diff_control_control.json.gz"
    comparison = compare_traces([control], [busy], labels=("control", "nccl"))
    steps = _host_steps(busy)
    assert comparison.b.steps == (4, 5, 6)
    assert comparison.b.step_us == pytest.approx(sum(steps.values()) / 3)
    assert comparison.b.idle_share > 0.7
    assert comparison.largest_differences()[0][0] == "idle"
    line = comparison.summary_line()
    assert line.startswith(f"nccl step {comparison.b.step_us / 1000:.2f} ms vs control")
    assert ": idle (no GPU activity) +" in line and "76% on nccl" in line
    rows = {label: (va, vb) for label, va, vb, _ in comparison.rows()}
    assert rows["idle (no GPU activity)"][1] == pytest.approx(comparison.b.buckets["idle"])
    pytest.importorskip("matplotlib")
    import matplotlib.image

    png = comparison.plot(tmp_path / "bars.png")
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 100  # the figure is drawn; the idle segment is hatched (checked by eye)


def test_a_trace_without_profiler_steps_is_measured_by_its_gpu_span(fixtures):
    path = fixtures / "traces/hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
    comparison = compare_traces([path], [path])
    assert comparison.a.step_basis == "gpu span"
    assert comparison.step_label == "step (GPU span, no profiler steps)"
    assert any("span of its GPU activity" in note for note in comparison.a.notes)


def test_several_ranks_per_side_are_averaged(tmp_path):
    a_dir = _one_gemm_per_rank(tmp_path / "a", [100, 140])
    b_dir = _one_gemm_per_rank(tmp_path / "b", [60, 60])
    comparison = compare_traces([a_dir], [b_dir], labels=("slow", "fast"))
    assert comparison.a.ranks == (0, 1)
    assert comparison.a.step_us_by_rank == (100.0, 140.0)
    assert comparison.a.step_us == 120.0 and comparison.b.step_us == 60.0
    assert comparison.deltas()["gemm"] == pytest.approx(-60.0)


def test_the_files_read_on_two_processes_compare_the_same(request):
    from pathlib import Path

    root = Path(request.config.rootpath) / "tests" / "fixtures"
    serial = compare_traces([root / MI300], [root / H100], labels=("MI300X", "H100"), workers=1)
    parallel = compare_traces([root / MI300], [root / H100], labels=("MI300X", "H100"), workers=2)
    assert json.dumps(parallel.to_dict(), sort_keys=True) == json.dumps(serial.to_dict(), sort_keys=True)
