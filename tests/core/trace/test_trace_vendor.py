"""Vendor profilers' own output: Nsight Systems SQLite exports and rocprofv3 CSV traces.

The fixtures are real files from public repositories (tests/fixtures/traces/PROVENANCE.md).
Every expected figure is computed here from the raw file (sqlite3 / csv), independently of
the readers, and the readers' traces go through the same analysis as a Kineto trace.
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.trace.analyze import analyze_trace
from tprimat.trace.reader import TraceFormatError, load_trace
from tprimat.trace.rocprof import read_rocprof_csv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
NSYS = {
    # file: (nsys version, device)
    "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz": ("2022.2.1.31", "NVIDIA A100-SXM4-40GB"),
    "nsys/perlmutter-cloverleaf-cuda.sqlite.gz": ("2024.5.1.113", "NVIDIA A100-SXM4-80GB"),
}
ROCPROF = (
    "rocprofv3/sdk-docs-2024-08/kernel_trace.csv",
    "rocprofv3/sdk-docs-stream-id/kernel_trace.csv",
)


def _plain(name: str, tmp_path: Path) -> Path:
    out = tmp_path / Path(name).name.removesuffix(".gz")
    with gzip.open(FIXTURES / name) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _raw_nsys(path: Path) -> dict:
    """Kernel/copy/sync counts and the union of their time, straight from the database (synchronisation
    records count as GPU activity, as Kineto's ``cuda_sync`` events do)."""
    con = sqlite3.connect(path)
    spans = []
    counts = {}
    for table, key in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", "kernels"),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "sync"),
    ):
        rows = con.execute(f"SELECT start, end FROM {table}").fetchall()
        counts[key] = len(rows)
        spans += rows
    spans.sort()
    busy, (cur_start, cur_end) = 0, spans[0]
    for start, end in spans[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    counts["first_ns"] = min(s for s, _ in spans)
    counts["last_ns"] = max(e for _, e in spans)
    counts["busy_ns"] = busy
    counts["runtime_calls"] = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)"
    ).fetchone()[0]
    con.close()
    return counts


@pytest.mark.parametrize("name", sorted(NSYS))
def test_nsys_export_matches_its_tables(name: str, tmp_path: Path) -> None:
    raw = _raw_nsys(_plain(name, tmp_path))
    trace = load_trace(FIXTURES / name)
    version, device = NSYS[name]
    assert trace.format == "nsys-sqlite" and trace.vendor == "nvidia"
    assert trace.metadata["nsys_version"] == version and trace.device == device
    result = analyze_trace(trace)
    launches = result["launches"]
    assert (launches["kernels"], launches["memcpy"], launches["sync"]) == (raw["kernels"], raw["memcpy"], raw["sync"])
    t = result["temporal"]
    assert t["total_us"] == pytest.approx((raw["last_ns"] - raw["first_ns"]) / 1000, rel=1e-9)
    assert t["total_us"] - t["idle_us"] == pytest.approx(raw["busy_ns"] / 1000, rel=1e-9)
    assert trace.runtime_api["calls"] == raw["runtime_calls"]
    # every activity was launched by a runtime call the export recorded
    assert set(trace.launch_correlation) == set(trace.correlation)


def test_nsys_plain_and_gzip_read_the_same(tmp_path: Path) -> None:
    name = "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"
    plain, packed = load_trace(_plain(name, tmp_path)), load_trace(FIXTURES / name)
    assert list(plain.ts) == list(packed.ts) and plain.names == packed.names


def test_nsys_launch_overhead_from_the_runtime_table(tmp_path: Path) -> None:
    """cloverleaf: 1312 cudaLaunchKernel calls; their host time is the launch overhead."""
    name = "nsys/perlmutter-cloverleaf-cuda.sqlite.gz"
    con = sqlite3.connect(_plain(name, tmp_path))
    launch_ns, launches = con.execute(
        "SELECT sum(r.end - r.start), count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaLaunchKernel%'"
    ).fetchone()
    con.close()
    api = load_trace(FIXTURES / name).runtime_api
    assert api["launch_calls"] == launches == 1312
    assert api["launch_us"] == pytest.approx(launch_ns / 1000)
    assert api["sync_us"] > api["launch_us"]  # this run waits on the GPU after every kernel


@pytest.mark.parametrize("name", ROCPROF)
def test_rocprof_kernel_trace_matches_its_rows(name: str) -> None:
    with open(FIXTURES / name, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Kind"] == "KERNEL_DISPATCH"]
    trace = load_trace(FIXTURES / name)
    assert trace.format == "rocprofv3-csv" and trace.vendor == "amd"
    result = analyze_trace(trace)
    assert result["launches"]["kernels"] == len(rows)
    first = min(int(r["Start_Timestamp"]) for r in rows)
    last = max(int(r["End_Timestamp"]) for r in rows)
    assert result["temporal"]["total_us"] == pytest.approx((last - first) / 1000, abs=1e-9)
    kernel_us = sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows) / 1000
    assert sum(c["kernel_us"] for c in result["categories"].values()) == pytest.approx(kernel_us, abs=1e-9)
    assert trace.metadata["time_origin_ns"] == first
    stream_column = "Stream_Id" if "Stream_Id" in rows[0] else "Queue_Id"
    assert sorted(set(trace.stream)) == sorted({int(r[stream_column]) for r in rows})


def test_rocprof_api_trace_alone_has_no_gpu_time_but_its_calls() -> None:
    name = "rocprofv3/sdk-docs-2024-07/hip_runtime_trace.csv"
    with open(FIXTURES / name, newline="") as fh:
        rows = list(csv.DictReader(fh))
    result = analyze_trace(load_trace(FIXTURES / name))
    assert result["temporal"] is None and result["note"]
    api = result["runtime_api"]
    assert api["calls"] == len(rows)
    launch = [r for r in rows if r["Function"] == "hipLaunchKernel"]
    assert api["launch_calls"] == len(launch) == 1
    assert api["launch_us"] == pytest.approx(
        sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in launch) / 1000
    )


def test_rocprof_files_of_one_run_are_read_together(tmp_path: Path) -> None:
    """A kernel trace and the API trace with the same prefix: launches are matched by correlation id."""
    kernels = (FIXTURES / ROCPROF[1]).read_text().splitlines()
    header, rows = kernels[0], kernels[1:]
    (tmp_path / "7_kernel_trace.csv").write_text("\n".join([header, *rows]) + "\n")
    api = ['"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"']
    for row in csv.reader(rows):
        corr, start = int(row[8]), int(row[9])
        api.append(f'"HIP_RUNTIME_API","hipLaunchKernel",7,7,{corr},{start - 5000},{start - 1000}')
    (tmp_path / "7_hip_api_trace.csv").write_text("\n".join(api) + "\n")
    trace = read_rocprof_csv(tmp_path / "7_kernel_trace.csv")
    assert trace.metadata["files"] == ["7_hip_api_trace.csv", "7_kernel_trace.csv"]
    assert sorted(trace.launch_correlation) == sorted(trace.correlation)
    assert trace.runtime_api["launch_calls"] == len(rows)
    assert trace.runtime_api["launch_us"] == pytest.approx(4.0 * len(rows))


def test_format_is_told_by_content_not_name(tmp_path: Path) -> None:
    odd = tmp_path / "profile.json"
    shutil.copy(FIXTURES / ROCPROF[0], odd)
    assert load_trace(odd).format == "rocprofv3-csv"
    kineto = tmp_path / "kernel_trace.csv"
    shutil.copy(FIXTURES / "kineto" / "tb_plugin_gpu_metrics_input.json", kineto)
    assert load_trace(kineto).format == "kineto"


def test_unreadable_vendor_files_are_one_clear_error(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}}]}))
    with pytest.raises(TraceFormatError, match="without kernel dispatch, memory copy or HIP API records"):
        load_trace(results)
    rocpd = tmp_path / "1234_results.db"
    sqlite3.connect(rocpd).execute("CREATE TABLE rocpd_string_0000 (id, string)").connection.commit()
    with pytest.raises(TraceFormatError, match="without rocprofv3's kernel dispatch view"):
        load_trace(rocpd)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(TraceFormatError, match="nsys export --type sqlite"):
        load_trace(other)
    broken = tmp_path / "k_kernel_trace.csv"
    broken.write_text((FIXTURES / ROCPROF[0]).read_text().replace("8819330200067564", "soon"))
    trace = load_trace(broken)
    assert trace.malformed == 1 and len(trace.ts) == 6
    # past a signed 64-bit field: no rocprofv3 timestamp, and not kept
    broken.write_text((FIXTURES / ROCPROF[0]).read_text().replace("8819330200067564", "9" * 19))
    trace = load_trace(broken)
    assert trace.malformed == 1 and len(trace.ts) == 6


def test_analyze_command_reads_vendor_files() -> None:
    files = [str(FIXTURES / "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite.gz"), str(FIXTURES / ROCPROF[1])]
    result = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", *files])
    assert result.exit_code == 0, result.output
    ranks = json.loads(result.output)["ranks"]
    assert sorted(r["format"] for r in ranks) == ["nsys-sqlite", "rocprofv3-csv"]
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", files[0]]).output
    assert "nsys-sqlite" in text and "launch overhead" in text


def test_rocpd_convert_csv_layout_is_read(tmp_path: Path) -> None:
    """``rocpd convert --output-format csv`` writes ``out_kernel_trace.csv`` with a leading ``Guid`` column."""
    lines = (FIXTURES / ROCPROF[1]).read_text().splitlines()
    converted = ['"Guid",' + lines[0]] + [f'"00006400-0000-0000-0000-000000000000",{row}' for row in lines[1:]]
    (tmp_path / "out_kernel_trace.csv").write_text("\n".join(converted) + "\n")
    ours, original = load_trace(tmp_path / "out_kernel_trace.csv"), load_trace(FIXTURES / ROCPROF[1])
    assert list(ours.ts) == list(original.ts) and list(ours.stream) == list(original.stream)
