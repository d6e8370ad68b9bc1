"""The host-step split: GPU activity clipped to the host steps, idle is the rest, the parts add up."""

from __future__ import annotations

import json

import pytest

from tprimat.trace.host_steps import host_step_breakdown
from tprimat.trace.reader import read_trace


def _trace(tmp_path, steps, kernels):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur} for n, ts, dur in steps
    ]
    for i, (name, ts, dur) in enumerate(kernels):
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "ts": ts,
                "dur": dur,
                "args": {"stream": 7, "correlation": i + 1},
            }
        )
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return read_trace(path)


def test_activity_is_clipped_to_the_steps_and_the_rest_is_idle(tmp_path):
    trace = _trace(
        tmp_path,
        steps=[(1, 0, 100), (2, 100, 100)],
        kernels=[
            ("nvjet_tst_64x64", -50, 80),  # queued before step 1: its last 30 µs fall in step 1
            ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 40),  # 20..60, half under the GEMM
            ("vectorized_elementwise_kernel", 90, 40),  # runs across the step boundary
            ("nvjet_tst_64x64", 250, 10),  # after the last step: not in any step
        ],
    )
    both = host_step_breakdown(trace, [1, 2])
    assert both["host_us"] == 200
    assert both["exclusive_us"] == {"gemm": 30, "communication": 30, "elementwise": 40}
    assert both["busy_us"] == 100 and both["idle_us"] == 100
    second = host_step_breakdown(trace, [2])
    assert second["host_us"] == 100 and second["exclusive_us"] == {"elementwise": 30}
    assert second["idle_us"] == 70
    assert host_step_breakdown(trace, [7]) is None


def test_real_trace_parts_add_up_to_the_host_steps(fixtures):
    trace = read_trace(fixtures / "traces/hta/nccl_parser_config_nccl_data.json.gz")
    split = host_step_breakdown(trace, [4, 5, 6])
    assert split["steps"] == [4, 5, 6]
    assert split["host_us"] == pytest.approx(sum(s.dur for s in trace.steps if s.number in (4, 5, 6)))
    assert sum(split["exclusive_us"].values()) + split["idle_us"] == pytest.approx(split["host_us"])
    assert split["idle_us"] / split["host_us"] > 0.7  # a host-bound step
