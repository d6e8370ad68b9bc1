"""The breakdown on small traces whose answers are known by hand, and on real traces."""

from __future__ import annotations

import json

import pytest

from tprimat.errors import TprimatError
from tprimat.trace.analyze import analyze_trace, parse_steps, shorten_kernel_name
from tprimat.trace.categories import own_name
from tprimat.trace.reader import read_trace

GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_TNT"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


def write_trace(path, kernels, steps=(), extra=()):
    """kernels: (name, ts, dur, stream, launch_ts or None[, cat]); steps: (number, ts, dur)."""
    events = []
    for corr, kernel in enumerate(kernels, start=1):
        name, ts, dur, stream, launched, *rest = kernel
        cat = rest[0] if rest else "kernel"
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts,
                "dur": dur,
                "args": {"stream": stream, "correlation": corr, "device": 0},
            }
        )
        if launched is not None:
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": launched,
                    "dur": 1,
                    "args": {"correlation": corr},
                }
            )
    for number, ts, dur in steps:
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{number}",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": f"ProfilerStep#{number}",
                "pid": 0,
                "tid": 7,
                "ts": ts + 1,
                "dur": dur,
                "args": {},
            }
        )
    events.extend(extra)
    path.write_text(json.dumps({"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": events}))
    return path


def test_overlapped_and_exposed_communication(tmp_path):
    # gemm 0-100 on stream 7; all-reduce 50-150 on stream 20: 50 hidden, 50 exposed; idle 150-200; add 200-210
    path = write_trace(
        tmp_path / "t.json", [(GEMM, 0, 100, 7, None), (NCCL, 50, 100, 20, None), (ADD, 200, 10, 7, None)]
    )
    r = analyze_trace(read_trace(path))
    t = r["temporal"]
    assert t == {
        "total_us": 210,
        "idle_us": 50,
        "compute_us": 110,
        "communication_us": 50,
        "memory_us": 0,
        "other_us": 0,
    }
    assert r["communication"]["total_us"] == 100
    assert r["communication"]["overlapped_us"] == 50 and r["communication"]["exposed_us"] == 50
    assert r["communication"]["by_collective"] == {"all-reduce": {"count": 1, "kernel_us": 100}}
    cats = r["categories"]
    assert cats["gemm"]["exclusive_us"] == 100 and cats["communication"]["kernel_us"] == 100
    assert cats["elementwise"]["exclusive_us"] == 10
    assert [k["category"] for k in r["top_kernels"]] == ["gemm", "communication", "elementwise"]
    assert r["launches"] == {"kernels": 3, "memcpy": 0, "memset": 0, "sync": 0}
    assert r["rank"] == 1 and r["window"]["mode"] == "all"


def test_memcpy_hidden_under_compute_is_not_memory_time(tmp_path):
    path = write_trace(
        tmp_path / "t.json",
        [
            (GEMM, 0, 100, 7, None),
            ("Memcpy HtoD (Pinned -> Device)", 10, 20, 8, None, "gpu_memcpy"),
            ("Memset (Device)", 100, 5, 8, None, "gpu_memset"),
        ],
    )
    t = analyze_trace(read_trace(path))["temporal"]
    assert t["compute_us"] == 100 and t["memory_us"] == 5 and t["idle_us"] == 0 and t["total_us"] == 105


def test_default_window_drops_the_last_step_and_steps_select_by_launch(tmp_path):
    # step 1: host 0-100, launches at 10 and 20; step 2: host 100-200, launch at 110; step 3: host 200-300
    kernels = [(GEMM, 50, 30, 7, 10), (ADD, 90, 20, 7, 20), (GEMM, 150, 40, 7, 110), (ADD, 260, 10, 7, 210)]
    path = write_trace(tmp_path / "t.json", kernels, steps=[(1, 0, 100), (2, 100, 100), (3, 200, 100)])
    trace = read_trace(path)
    r = analyze_trace(trace)
    assert r["window"] == {"mode": "before-last-step", "steps": [1, 2], "dropped_last_step": 3}
    assert r["temporal"]["total_us"] == 190 - 50 and r["activities"] == 3
    assert [s["step"] for s in r["steps"]] == [1, 2]
    assert r["steps"][0]["temporal"]["total_us"] == 60  # 50..110, launched in step 1
    assert r["steps"][0]["host_us"] == 100
    only2 = analyze_trace(trace, steps=parse_steps("2:2"))
    assert only2["temporal"]["total_us"] == 40 and only2["window"]["steps"] == [2]
    last = analyze_trace(trace, steps=parse_steps("3:"))
    assert last["temporal"]["total_us"] == 10
    with pytest.raises(TprimatError, match="no ProfilerStep in 7:9"):
        analyze_trace(trace, steps=parse_steps("7:9"))


@pytest.mark.parametrize(
    "text,expected", [("3:5", (3, 5)), ("3:", (3, None)), (":5", (None, 5)), ("4", (4, 4)), (None, None)]
)
def test_parse_steps(text, expected):
    assert parse_steps(text) == expected


@pytest.mark.parametrize("text", ["a:b", "5:3", "1:2:3"])
def test_parse_steps_rejects(text):
    with pytest.raises(TprimatError):
        parse_steps(text)


def test_real_amd_training_trace_with_rccl(fixtures):
    r = analyze_trace(read_trace(fixtures / "traces/tracelens/mi300_resnet_act_checkpoint.json.gz"))
    assert r["vendor"] == "amd" and r["rank"] == 0 and r["world_size"] == 8
    assert r["window"]["steps"] == [15, 16]
    comm = r["communication"]
    # golden values of this fixture (µs), computed by this analysis and checked by hand against the
    # RCCL kernel durations: every ncclDevKernel_Generic is classified communication
    assert comm["by_collective"]["generic"]["count"] == sum(
        1 for k in r["top_kernels"] if "ncclDevKernel_Generic" in k["name"] for _ in range(k["count"])
    )
    t = r["temporal"]
    parts = t["idle_us"] + t["compute_us"] + t["communication_us"] + t["memory_us"] + t["other_us"]
    assert parts == pytest.approx(t["total_us"])
    assert comm["overlapped_us"] + comm["exposed_us"] == pytest.approx(comm["total_us"])
    assert len(r["steps"]) == 2 and all(s["launches"]["kernels"] > 100 for s in r["steps"])


def test_gpu_only_trace_without_launches_is_analysed_whole(fixtures):
    r = analyze_trace(read_trace(fixtures / "traces/tracelens/mi210_gpu_only_trace_gpu_only_trace.json.gz"))
    assert r["window"]["mode"] == "all" and r["activities"] == 562 and r["steps"] == []
    assert r["categories"]["norm"]["count"] > 0 and r["categories"]["gemm"]["count"] > 0


def test_shortened_names():
    assert shorten_kernel_name(ADD) == "vectorized_elementwise_kernel[CUDAFunctor_add]"
    assert shorten_kernel_name(NCCL) == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    assert shorten_kernel_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert (
        shorten_kernel_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(x::Params)")
        == "cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4"
    )
    assert len(shorten_kernel_name("Cijk_" + "A" * 300)) == 72


def test_table_names_are_the_names_the_categories_read(fixtures):
    """A mangled Composable Kernel name (TraceLens's MI300 ResNet trace) reads as its own name in tables too."""
    trace = read_trace(fixtures / "traces/tracelens/mi300_resnet_act_checkpoint.json.gz")
    mangled = next(n for n in trace.names if n.startswith("_ZN2ck16tensor_operation6device37kernel_batched_gemm"))
    assert shorten_kernel_name(mangled) == own_name(mangled) == "kernel_batched_gemm_xdlops_bwd_weight"


_KERNELS = [GEMM, NCCL, ADD, "Memcpy DtoD (Device -> Device)"]


def _covered(intervals):
    return {t for start, dur in intervals for t in range(start, start + dur)}


def test_property_breakdown_matches_brute_force(tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    kernel = st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(1, 60), st.integers(0, 3))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(kernels=st.lists(kernel, min_size=1, max_size=25))
    def check(kernels):
        rows = [
            (_KERNELS[k], ts, dur, stream, None, "gpu_memcpy" if k == 3 else "kernel") for k, ts, dur, stream in kernels
        ]
        t = analyze_trace(read_trace(write_trace(tmp_path / "p.json", rows)))
        temporal, comm = t["temporal"], t["communication"]
        # brute force on the integer microsecond grid
        compute = _covered([(ts, d) for k, ts, d, _ in kernels if k in (0, 2)])
        nccl = _covered([(ts, d) for k, ts, d, _ in kernels if k == 1])
        memory = _covered([(ts, d) for k, ts, d, _ in kernels if k == 3])
        busy = compute | nccl | memory
        start = min(ts for _, ts, _, _ in kernels)
        end = max(ts + d for _, ts, d, _ in kernels)
        assert temporal["total_us"] == end - start
        assert temporal["idle_us"] == (end - start) - len(busy)
        assert temporal["compute_us"] == len(compute)
        assert temporal["communication_us"] == len(nccl - compute)
        assert temporal["memory_us"] == len(memory - compute - nccl)
        assert comm["total_us"] == len(nccl) and comm["overlapped_us"] == len(nccl & compute)
        exclusive = sum(v["exclusive_us"] for v in t["categories"].values())
        assert exclusive + temporal["idle_us"] == temporal["total_us"]

    check()


def test_ranks_read_on_two_processes_give_the_analyses_of_one(fixtures):
    from tprimat.trace.analyze import analyze_paths

    paths = [
        str(fixtures / "traces/tracelens/mi300_resnet_act_checkpoint.json.gz"),
        str(fixtures / "traces/tracelens/mi210_gpu_only_trace_gpu_only_trace.json.gz"),
        str(fixtures / "traces/hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    ]
    serial = analyze_paths(paths, workers=1, hta_rounding=True)
    parallel = analyze_paths(paths, workers=2, hta_rounding=True)
    assert json.dumps(parallel, sort_keys=True) == json.dumps(serial, sort_keys=True)
