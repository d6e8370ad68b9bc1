"""`trace compare` and the directory search with Nsight Systems exports and rocprofv3 traces.

These formats carry the GPU activity (the category breakdown) but no profiler steps and no
PyTorch operators: the whole profile window is one span, and the operator split and critical
path are refused with a note.  Real fixtures: tests/fixtures/traces/PROVENANCE.md.
"""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.compare.traces import trace_files as run_trace_files
from tprimat.trace.compare import compare_traces, trace_files
from tprimat.trace.reader import traces_in

NSYS = "traces/nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"
CLOVERLEAF = "traces/nsys/perlmutter-cloverleaf-cuda.sqlite.gz"
KINETO = "traces/hta/trace_diff_control_control.json.gz"  # an A100 with profiler steps and operators
ROCPROF = "traces/rocprofv3/sdk-docs-stream-id/kernel_trace.csv"
HIP_API_ONLY = "traces/rocprofv3/sdk-docs-2024-07/hip_runtime_trace.csv"


@pytest.fixture(scope="module")
def nsys_vs_kineto(request):
    from pathlib import Path

    root = Path(request.config.rootpath) / "tests" / "fixtures"
    return compare_traces([root / NSYS], [root / KINETO], critical_path=True)


def test_an_nsys_export_compares_with_a_kineto_trace_by_category(nsys_vs_kineto):
    a, b = nsys_vs_kineto.a, nsys_vs_kineto.b
    assert (a.device, b.device) == ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PG509-200")
    assert (a.step_basis, b.step_basis) == ("gpu span", "host")
    assert a.steps == () and b.steps
    for side in (a, b):
        assert sum(side.buckets.values()) == pytest.approx(side.step_us, rel=1e-9)
    assert a.top_kernels["other"][0].short_name == "saxpy" and a.buckets["memory"] > 0
    assert sum(nsys_vs_kineto.deltas().values()) == pytest.approx(nsys_vs_kineto.delta_us, rel=1e-9)
    assert nsys_vs_kineto.step_label == "step (host ProfilerStep on one side, GPU span on the other)"


def test_the_nsys_side_says_it_has_no_steps_and_refuses_operators_and_critical_path(nsys_vs_kineto):
    notes = " ".join(nsys_vs_kineto.a.notes)
    assert "(Nsight Systems export): no profiler steps in it: the whole profile window is one span" in notes
    assert "no operator split and no critical path: the format has no PyTorch operators or shapes" in notes
    assert nsys_vs_kineto.b.operators is not None  # the Kineto side was split …
    assert nsys_vs_kineto.operator_gap() is None  # … but there is nothing to match it with
    text = nsys_vs_kineto.to_markdown()
    assert "Operators behind the difference" not in text and "no operator split" in text
    data = nsys_vs_kineto.to_dict()
    assert data["operators"] is None and data["a"]["step_basis"] == "gpu span"


def test_without_operators_asked_for_nothing_is_refused(fixtures):
    side = compare_traces([fixtures / ROCPROF], [fixtures / NSYS], operators=False).a
    assert side.vendor == "amd" and side.step_basis == "gpu span"
    assert any("(rocprofv3 trace): no profiler steps in it" in n for n in side.notes)
    assert not any("no operator split" in n for n in side.notes)


def test_a_directory_search_finds_each_format_by_content(tmp_path, fixtures):
    found = tmp_path / "traces"
    (found / "rocprof").mkdir(parents=True)
    shutil.copy(fixtures / NSYS, found / "rank0.sqlite.gz")
    shutil.copy(fixtures / ROCPROF, found / "rocprof" / "run_kernel_trace.csv")
    shutil.copy(fixtures / HIP_API_ONLY, found / "rocprof" / "run_hip_runtime_trace.csv")  # read with the kernels
    shutil.copy(fixtures / KINETO, found / "rank1.json.gz")
    (found / "notes.csv").write_text("a,b\n1,2\n")  # a CSV that is no rocprofv3 trace
    (found / "empty.sqlite").write_bytes(b"")  # named as an export, not a database
    assert [p.relative_to(found).as_posix() for p in traces_in(found)] == [
        "rank0.sqlite.gz",
        "rank1.json.gz",
        "rocprof/run_kernel_trace.csv",
    ]
    assert trace_files(tmp_path) == traces_in(found)  # a run directory: its traces/ folder
    assert run_trace_files(str(tmp_path / "result.json")) == traces_in(found)  # the comparison report's search


def test_a_directory_of_api_calls_only_has_no_trace(tmp_path, fixtures):
    from tprimat.errors import TprimatError

    with pytest.raises(TprimatError, match="no traces in it.*Nsight Systems.*rocprofv3"):
        trace_files((fixtures / HIP_API_ONLY).parent)


def test_cli_compares_an_nsys_export_with_a_kineto_trace(fixtures):
    done = CliRunner().invoke(cli, ["trace", "compare", str(fixtures / NSYS), str(fixtures / KINETO), "--jobs", "1"])
    assert done.exit_code == 0, done.output
    assert "step (host ProfilerStep on one side, GPU span on the other)" in done.output
    assert "note: saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz (Nsight Systems export): no operator split" in done.output
    assert "Operators behind the difference" not in done.output


def test_cli_compares_two_directories_of_vendor_profiles(fixtures):
    done = CliRunner().invoke(
        cli, ["trace", "compare", str(fixtures / CLOVERLEAF), str((fixtures / ROCPROF).parent), "--json", "--jobs", "1"]
    )
    assert done.exit_code == 0, done.output
    import json

    data = json.loads(done.output)
    assert data["a"]["step_basis"] == data["b"]["step_basis"] == "gpu span"
    assert data["a"]["vendor"] == "nvidia" and data["b"]["vendor"] == "amd"
    assert data["operators"] is None


def test_trace_analyze_reads_a_directory_of_vendor_profiles(fixtures):
    import json

    done = CliRunner().invoke(cli, ["trace", "analyze", str((fixtures / NSYS).parent), "--json", "--jobs", "1"])
    assert done.exit_code == 0, done.output
    ranks = json.loads(done.output)["ranks"]
    assert sorted((r["format"], r["device"]) for r in ranks) == [
        ("nsys-sqlite", "NVIDIA A100-SXM4-40GB"),
        ("nsys-sqlite", "NVIDIA A100-SXM4-80GB"),
    ]
