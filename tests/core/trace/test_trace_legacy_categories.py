"""Traces from older profilers: capitalised event categories (``Kernel``, ``Memcpy``, ``Runtime``, …).

The fixture is a 2021 Kineto trace (Tesla V100) kept by the TensorBoard profiler plugin's tests;
its GPU activity is counted here from the raw JSON, independently of the reader.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.trace.analyze import analyze_trace
from tprimat.trace.categories import ACTIVITY_CATEGORIES, CATEGORY_ALIASES, canonical_category, classify
from tprimat.trace.compare import compare_traces
from tprimat.trace.reader import ACTIVITY_CODES, read_trace

OLD = "traces/kineto/tb_plugin_gpu_metrics_input.json"


@pytest.fixture(scope="module")
def old(request):
    from pathlib import Path

    return Path(request.config.rootpath) / "tests" / "fixtures" / OLD


def _raw_counts(path) -> tuple[Counter, int]:
    """(complete events per category as written, launches: ``Runtime`` events with a correlation)."""
    events = json.loads(path.read_text())["traceEvents"]
    cats = Counter(e.get("cat") for e in events if e.get("ph") == "X")
    launches = sum(1 for e in events if e.get("cat") == "Runtime" and "correlation" in e.get("args", {}))
    return cats, launches


def test_the_fixture_uses_only_the_old_spellings(old):
    cats, _ = _raw_counts(old)
    assert cats["Kernel"] == 30 and cats["Memcpy"] == 2 and cats["Runtime"] == 42
    assert not any(cat in cats for cat in (*ACTIVITY_CATEGORIES, "cuda_runtime", "cpu_op"))


def test_old_categories_are_read_as_gpu_activity_and_launches(old):
    cats, launches = _raw_counts(old)
    trace = read_trace(old)
    codes = Counter(ACTIVITY_CODES[code] for code in trace.code)
    assert codes == {"kernel": cats["Kernel"], "gpu_memcpy": cats["Memcpy"]}
    assert len(trace.launch_correlation) == launches
    assert [step.number for step in trace.steps] == [2]  # ProfilerStep#2, an "Operator" event
    assert trace.device == "Tesla V100-DGXS-32GB"  # from "computeProperties", the old key
    assert trace.vendor == "nvidia"


def test_analyze_finds_the_kernels_of_an_old_trace(old):
    cats, _ = _raw_counts(old)
    result = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(old)])
    assert result.exit_code == 0, result.output[-2000:]
    (rank,) = json.loads(result.stdout)["ranks"]
    assert rank["gpu_activity"] is True
    assert rank["activities_in_file"] == cats["Kernel"] + cats["Memcpy"]
    categories = rank["categories"]
    assert sum(c["count"] for name, c in categories.items() if name != "memory") == cats["Kernel"]
    assert categories["memory"]["count"] == cats["Memcpy"]
    assert rank["temporal"]["compute_us"] > 0
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(old)])
    assert text.exit_code == 0 and "no GPU activity" not in text.output


def test_compare_an_old_trace_against_itself(old):
    same = compare_traces([old], [old])
    assert same.delta_us == 0 and all(v == 0 for v in same.deltas().values())
    assert same.a.steps == (2,)
    result = CliRunner().invoke(cli, ["trace", "compare", str(old), str(old)])
    assert result.exit_code == 0, result.output[-2000:]


def test_every_alias_names_a_current_category():
    for old_name, current in CATEGORY_ALIASES.items():
        assert old_name == old_name.lower()
        assert canonical_category(old_name.capitalize()) == current
    assert canonical_category("Kernel") == canonical_category("KERNEL") == "kernel"
    assert canonical_category("Memset") == "gpu_memset" and canonical_category("Runtime") == "cuda_runtime"
    assert canonical_category("cuda_driver") == "cuda_driver" and canonical_category("python_function") == (
        "python_function"
    )
    assert canonical_category(None) is None and canonical_category(3) is None
    assert classify("Memset (Device)", "Memset") == classify("Memset (Device)", "gpu_memset") == "memory"


def _event(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_every_spelling_reads_the_same(tmp_path):
    """The same four activities, one launch each, written in the old, the current and an odd casing."""
    spellings = {
        "old": ("Kernel", "Memcpy", "Memset", "Runtime", "Operator", "User"),
        "current": ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cpu_op", "gpu_user_annotation"),
        "shouted": ("KERNEL", "GPU_MEMCPY", "MEMSET", "CUDA_Runtime", "OPERATOR", "USER"),
    }
    read = {}
    for label, (kernel, memcpy, memset, runtime, op, gpu_user) in spellings.items():
        events = [
            _event(op, "ProfilerStep#5", 0, 100),
            _event(gpu_user, "ProfilerStep#5", 10, 80, stream=7),  # the GPU-side copy: no host step
            _event(runtime, "cudaLaunchKernel", 1, 2, correlation=1),
            _event(runtime, "cudaMemcpyAsync", 3, 2, correlation=2),
            _event(runtime, "cudaMemsetAsync", 5, 2, correlation=3),
            _event(kernel, "void at::native::vectorized_elementwise_kernel<4>(int)", 10, 5, stream=7, correlation=1),
            _event(memcpy, "Memcpy HtoD (Pageable -> Device)", 20, 3, stream=7, correlation=2),
            _event(memset, "Memset (Device)", 30, 2, stream=7, correlation=3),
        ]
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps({"traceEvents": events}))
        trace = read_trace(path)
        read[label] = (
            [ACTIVITY_CODES[code] for code in trace.code],
            list(trace.launch_correlation),
            [(step.number, step.ts) for step in trace.steps],
            analyze_trace(trace)["categories"],
        )
    assert read["old"] == read["current"] == read["shouted"]
    codes, launches, steps, categories = read["old"]
    assert codes == ["kernel", "gpu_memcpy", "gpu_memset"]
    assert launches == [1, 2, 3] and steps == [(5, 0.0)]
    assert categories["memory"]["count"] == 2 and categories["elementwise"]["count"] == 1
