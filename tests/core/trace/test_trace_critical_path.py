"""The critical path of one step: its graph, and agreement with HolisticTraceAnalysis.

``tests/fixtures/traces/hta_critical_path.json`` holds HTA 0.5.0's critical-path figures for
trace fixtures, produced by ``tools/hta_critical_path.py`` (its docstring says how).  HTA
names the path's time by ``bound_by``; tprimat's buckets map onto them as in :data:`AS_HTA`.

Agreement: HTA rounds every timestamp of a trace with fractional µs inward to whole µs
before it analyses anything; with that rounding applied (``hta_rounding=True``, which
changes nothing on traces of whole µs) the length and the span agree exactly, and each class
within :data:`TOLERANCE` of the length.  One fixture disagrees, by a difference of model
recorded in :data:`DISAGREE` (see docs/traces.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprimat.trace.critical_path import BUCKETS, critical_path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
REFERENCE = json.loads((FIXTURES / "hta_critical_path.json").read_text())
#: HTA's bound_by class of each tprimat bucket.
AS_HTA = {
    "cpu_launch": "cpu_bound",
    "cpu_runtime": "cpu_bound",
    "cpu_host": "cpu_bound",
    "gpu_compute": "gpu_compute_bound",
    "gpu_memory": "gpu_compute_bound",
    "gpu_communication": "gpu_communication_bound",
    "gpu_idle": "gpu_kernel_kernel_overhead",
    "launch_delay": "gpu_kernel_launch_overhead",
}
#: Share of the path length within which each class must agree (the MI300X trace's compute and
#: GPU-idle split differs by 7 µs in 19 ms).
TOLERANCE = 0.001
#: Fixtures where the two paths differ, and why.
DISAGREE = {
    "hta/trace_diff_control_control.json.gz": (
        "HTA draws a launch-delay edge only if no other launch reached the stream before the kernel "
        "started; otherwise a GPU-idle edge from the previous kernel, which ended long before. tprimat "
        "draws the launch edge whenever the stream was idle at the call (HTA's path is 47% longer)."
    ),
}
CASES = [c for c in REFERENCE["cases"] if c["fixture"] not in DISAGREE]


def _ours(case: dict, hta_rounding: bool = True):
    return critical_path(
        FIXTURES / case["fixture"],
        annotation=case["annotation"] or None,
        instance=case["instance"] or 0,
        hta_rounding=hta_rounding,
    )


def _as_hta(breakdown: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for bucket, value in breakdown.items():
        out[AS_HTA[bucket]] = out.get(AS_HTA[bucket], 0.0) + value
    return out


@pytest.mark.parametrize("case", CASES, ids=[Path(c["fixture"]).name[:40] for c in CASES])
def test_agrees_with_hta(case: dict) -> None:
    path = _ours(case)
    assert path.length_us == pytest.approx(case["length_us"], abs=1e-6)
    assert path.span_us == pytest.approx(case["span_us"], abs=1e-6)
    hta = {k: v for k, v in case["bound_by_us"].items() if k != "zero_weight"}
    ours = _as_hta(path.breakdown_us)
    for key in set(hta) | {k for k, v in ours.items() if v}:
        assert ours.get(key, 0.0) == pytest.approx(hta.get(key, 0.0), abs=TOLERANCE * case["length_us"]), key


def test_whole_microsecond_traces_need_no_rounding() -> None:
    """HTA's own critical-path fixtures record whole µs: the recorded times give HTA's figures exactly."""
    for case in REFERENCE["cases"][:4]:
        assert case["fixture"].startswith("hta/critical_path_")
        path = _ours(case, hta_rounding=False)
        assert (path.length_us, path.span_us) == (case["length_us"], case["span_us"])


def test_fractional_microseconds_move_the_path_by_little() -> None:
    """Without HTA's rounding, a trace of fractional µs gives a path within 0.5% of HTA's."""
    case = next(c for c in CASES if c["fixture"].startswith("hta/nccl_parser"))
    path = _ours(case, hta_rounding=False)
    assert path.length_us != case["length_us"]
    assert path.length_us == pytest.approx(case["length_us"], rel=0.005)


def test_reference_covers_the_disagreements() -> None:
    assert set(DISAGREE) <= {c["fixture"] for c in REFERENCE["cases"]}
    assert "HolisticTraceAnalysis 0.5.0" in REFERENCE["producer"]


def test_breakdown_adds_up_and_segments_follow_the_path() -> None:
    path = _ours(REFERENCE["cases"][0])
    assert set(path.breakdown_us) == set(BUCKETS)
    assert sum(path.breakdown_us.values()) == pytest.approx(path.length_us)
    assert sum(s["dur_us"] for s in path.segments) == pytest.approx(path.length_us)
    starts = [s["start_us"] for s in path.segments]
    assert starts == sorted(starts)
    top = path.top_segments(5)
    assert len(top) == 5 and [s["start_us"] for s in top] == sorted(s["start_us"] for s in top)
    assert min(s["dur_us"] for s in top) >= sorted((s["dur_us"] for s in path.segments), reverse=True)[4]


def test_on_path_queries() -> None:
    """A kernel on the path answers yes by its correlation id; an op off the window answers no."""
    path = _ours(REFERENCE["cases"][0])
    assert path.gpu_on_path
    assert all(path.kernel_on_path(c) for c in path.gpu_on_path)
    assert not path.kernel_on_path(-12345)
    gpu = [s for s in path.segments if s["bucket"] == "gpu_compute"]
    assert gpu and path.time_on_path_us(gpu[0]["name"]) >= gpu[0]["dur_us"]
    host = next(iter(path.host_on_path))
    assert path.op_on_path(*host)
    assert not path.op_on_path(host[0], host[1] - 1e9)


def test_default_window_is_the_last_complete_step() -> None:
    path = critical_path(FIXTURES / "hta" / "trace_diff_control_control.json.gz")
    assert path.window.label == "ProfilerStep#1013"  # #1014 is Kineto's last, cut short


def test_unknown_step_is_an_error_naming_the_steps() -> None:
    from tprimat.errors import TprimatError

    with pytest.raises(TprimatError, match="1009, 1010"):
        critical_path(FIXTURES / "hta" / "trace_diff_control_control.json.gz", step=7)


def test_command_prints_the_path_and_its_json() -> None:
    from click.testing import CliRunner

    from tprimat.cli import cli

    case = REFERENCE["cases"][0]
    trace = str(FIXTURES / case["fixture"])
    args = ["trace", "critical-path", trace, "--annotation", case["annotation"], "--instance", "1"]
    result = CliRunner().invoke(cli, [*args, "--json", "--top", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["length_us"] == case["length_us"] and len(data["top_segments"]) == 3
    assert data["unattributed_us"] == pytest.approx(case["span_us"] - case["length_us"])
    text = CliRunner().invoke(cli, args).output
    assert "GPU compute" in text and "35.834" in text and case["annotation"] in text


def test_command_errors_are_one_line_exit_2() -> None:
    from click.testing import CliRunner

    from tprimat.cli import cli

    trace = str(FIXTURES / "hta" / "trace_diff_control_control.json.gz")
    missing = CliRunner().invoke(cli, ["trace", "critical-path", trace, "--step", "7"])
    assert missing.exit_code == 2 and "no ProfilerStep#7" in missing.output and "Traceback" not in missing.output
    both = CliRunner().invoke(cli, ["trace", "critical-path", trace, "--step", "7", "--annotation", "x"])
    assert both.exit_code == 2


def test_a_trace_without_host_events_has_no_critical_path(tmp_path: Path) -> None:
    """The MI210 trace without its runtime calls (it has no CPU operators): nothing launched anything."""
    import gzip

    from tprimat.errors import TprimatError

    with gzip.open(FIXTURES / "tracelens" / "mi210_gpu_only_trace_gpu_only_trace.json.gz") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("cuda_runtime", "cpu_op")]
    gpu_only = tmp_path / "gpu_only.json"
    gpu_only.write_text(json.dumps(doc))
    with pytest.raises(TprimatError, match="needs the host side"):
        critical_path(gpu_only)


def test_amd_kineto_trace_launches_through_hip() -> None:
    """On ROCm, Kineto's runtime calls are hipLaunchKernel & co.: launches are found by correlation id."""
    path = critical_path(FIXTURES / "tracelens" / "mi300_resnet_act_checkpoint.json.gz", step=16)
    assert path.gpu_on_path and path.breakdown_us["gpu_compute"] > 0
    assert path.length_us <= path.span_us


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1 if cat in ("cpu_op", "cuda_runtime") else 0,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def test_a_hand_made_step_whose_path_is_known(tmp_path: Path) -> None:
    """An operator launches a 200 µs kernel, then the host waits for the stream.

    The path: 10 µs of the operator before the launch call, the 30 µs launch delay (the
    stream was idle at the call), the kernel; the host's own 100 µs lose, and the wait inside
    cudaStreamSynchronize is not host work (it ends on a zero-weight edge from the kernel).
    """
    events = [
        _x("user_annotation", "ProfilerStep#3", 0, 300),
        _x("cpu_op", "aten::mm", 0, 100),
        _x("cuda_runtime", "cudaLaunchKernel", 10, 10, correlation=1),
        _x("kernel", "ampere_sgemm_128x64_tn", 40, 200, tid=7, stream=7, correlation=1),
        _x("cuda_runtime", "cudaStreamSynchronize", 100, 145, correlation=2),
        _x("cuda_sync", "Stream Sync", 238, 2, tid=7, stream=7, correlation=2),
    ]
    trace = tmp_path / "step.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    path = critical_path(trace, step=3)
    assert (path.length_us, path.span_us) == (240.0, 240.0)
    expected = dict.fromkeys(BUCKETS, 0.0) | {"cpu_host": 10.0, "launch_delay": 30.0, "gpu_compute": 200.0}
    assert path.breakdown_us == expected
    assert path.kernel_on_path(1) and path.op_on_path("cudaLaunchKernel", 10)
    assert not path.op_on_path("cudaStreamSynchronize", 100)
    assert [s["bucket"] for s in path.segments] == ["cpu_host", "launch_delay", "gpu_compute"]


def test_events_without_a_start_or_a_duration_are_left_out_of_the_graph(tmp_path: Path) -> None:
    """The hand-made step above, with a host operator, a launch call, a kernel and a sync record
    that lack ``ts`` or ``dur`` (or have them null): they are no part of the graph, so the path is
    the same."""
    events = [
        _x("user_annotation", "ProfilerStep#3", 0, 300),
        _x("cpu_op", "aten::mm", 0, 100),
        _x("cuda_runtime", "cudaLaunchKernel", 10, 10, correlation=1),
        _x("kernel", "ampere_sgemm_128x64_tn", 40, 200, tid=7, stream=7, correlation=1),
        _x("cuda_runtime", "cudaStreamSynchronize", 100, 145, correlation=2),
        _x("cuda_sync", "Stream Sync", 238, 2, tid=7, stream=7, correlation=2),
    ]
    untimed = [
        _x("cpu_op", "aten::add", 20, 0) | {"dur": None},
        _x("cuda_runtime", "cudaLaunchKernel", 30, 5, correlation=3) | {"ts": None},
        _x("kernel", "vectorized_elementwise_kernel", 250, 10, tid=7, stream=7, correlation=3) | {"dur": None},
        _x("kernel", "vectorized_elementwise_kernel", 260, 10, tid=7, stream=7, correlation=1),
        _x("cuda_sync", "Event Sync", 270, 1, tid=7, stream=7, correlation=2),
    ]
    del untimed[3]["dur"], untimed[4]["ts"]
    trace = tmp_path / "untimed.json"
    trace.write_text(json.dumps({"traceEvents": events + untimed}))
    path = critical_path(trace, step=3)
    assert (path.length_us, path.span_us) == (240.0, 240.0)
    expected = dict.fromkeys(BUCKETS, 0.0) | {"cpu_host": 10.0, "launch_delay": 30.0, "gpu_compute": 200.0}
    assert path.breakdown_us == expected
    assert [s["bucket"] for s in path.segments] == ["cpu_host", "launch_delay", "gpu_compute"]


def test_a_launch_into_a_busy_stream_is_no_launch_delay(tmp_path: Path) -> None:
    """The same step, but the stream still runs a kernel launched before the step: the kernel
    waited for the GPU, so the path is that backlog's end, not the host before the launch."""
    events = [
        _x("user_annotation", "ProfilerStep#3", 0, 300),
        _x("cpu_op", "aten::mm", 0, 100),
        _x("cuda_runtime", "cudaLaunchKernel", 10, 10, correlation=1),
        _x("kernel", "ampere_sgemm_128x64_tn", 60, 200, tid=7, stream=7, correlation=1),
        _x("kernel", "earlier_kernel", -50, 110, tid=7, stream=7, correlation=99),
    ]
    trace = tmp_path / "busy.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    path = critical_path(trace, step=3)
    assert path.breakdown_us["launch_delay"] == 0.0
    assert path.length_us == 200.0 and [s["bucket"] for s in path.segments] == ["gpu_compute"]


def test_malformed_events_are_skipped_not_a_traceback(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tprimat.cli import cli

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1e300, "dur": 1e308, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "b", "ts": 5, "dur": 1, "pid": [1], "tid": {"a": 1}},
    ]
    trace = tmp_path / "odd.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    result = CliRunner().invoke(cli, ["trace", "critical-path", str(trace)])
    assert result.exit_code == 2 and "no timed events" in result.output and "Traceback" not in result.output


_EVENT = st.tuples(
    st.sampled_from(["cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "cuda_sync"]),
    st.sampled_from(["aten::mm", "cudaLaunchKernel", "cudaStreamSynchronize", "Stream Sync", "Context Sync", "k"]),
    st.integers(0, 400),
    st.integers(0, 120),
    st.integers(1, 3),  # thread or stream
    st.integers(1, 6),  # correlation
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_EVENT, max_size=25))
def test_any_step_gives_a_consistent_path_or_a_clear_error(tmp_path: Path, raw: list) -> None:
    """Whatever the events, the path's classes add up to it, and where no edge ran back in time
    (and was set to 0) the path is no longer than its span."""
    from tprimat.errors import TprimatError

    events = [_x("user_annotation", "ProfilerStep#1", 0, 500)]
    for cat, name, ts, dur, lane, corr in raw:
        args = {"correlation": corr} | ({"stream": lane} if cat in ("kernel", "gpu_memcpy", "cuda_sync") else {})
        events.append(_x(cat, name, ts, dur, tid=lane, **args))
    trace = tmp_path / "random.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    try:
        path = critical_path(trace, step=1)
    except TprimatError as exc:
        assert "host side" in str(exc) or "cycle" in str(exc)
        return
    assert path.length_us >= 0
    if not path.clamped_edges:  # an activity before its launch, a child after its parent: time runs back
        assert path.length_us <= path.span_us + 1e-9
    assert sum(path.breakdown_us.values()) == pytest.approx(path.length_us)


def test_an_operator_that_ends_after_the_blocking_call_it_starts_in_counts_as_time_running_back(tmp_path):
    """A host event that starts inside a blocking call and ends after it (broken nesting): the edge into
    the call's end runs back in time and is counted, so a path longer than its span is explained."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        _x("cpu_op", "cudaStreamSynchronize", 0, 2, tid=2, correlation=1),
        _x("cpu_op", "aten::mm", 1, 2, tid=2, correlation=1),
    ]
    trace = tmp_path / "overlap.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    path = critical_path(trace, step=1)
    assert path.clamped_edges == 1 and path.length_us > path.span_us


def test_a_sync_that_ends_before_the_kernel_it_waits_for_counts_as_time_running_back(tmp_path):
    """A Stream Sync record that ends (at 0 µs) before the kernel it waits for (0 to 2 µs): the
    synchronisation edge from the kernel's end to the call's end runs back in time and is counted,
    so a path longer than its span is explained."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        _x("cuda_runtime", "cudaLaunchKernel", 0, 1, correlation=1),
        _x("kernel", "k", 0, 2, stream=1, correlation=1),
        _x("cuda_sync", "Stream Sync", 0, 0, stream=1, correlation=1),
    ]
    trace = tmp_path / "early_sync.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    path = critical_path(trace, step=1)
    assert (path.length_us, path.span_us) == (2.0, 1.0)
    assert path.clamped_edges == 1


def test_vendor_profiles_have_no_critical_path() -> None:
    from tprimat.errors import TprimatError

    with pytest.raises(TprimatError, match="needs a Kineto"):
        critical_path(FIXTURES / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz")
