"""Bench: one synthetic rocprofv3 profile in every format tprimat reads, analysed by ``tprimat trace analyze``.

The profile: ``--kernels`` N kernel dispatches on four HIP streams of one GPU, each launched
by a ``hipLaunchKernel`` call with the same correlation id, the kernel names those of the
real TraceLens MI350X run (tests/fixtures/traces/rocprofv3/tracelens-mi350x).  It is
written as rocprofv3 writes it in each output format:

* CSV: ``kernel_trace.csv`` and ``hip_api_trace.csv``, with the headers of the real
  ``sdk-docs-stream-id`` and ``sdk-docs-2024-07`` fixtures;
* JSON: the real file's document, its tables kept and its ``buffer_records`` replaced;
* Perfetto: the encoder of ``tests/core/trace/test_pftrace.py`` (generatePerfetto.cpp's
  slices as the Perfetto SDK encodes them);
* rocpd: a SQLite database made by the SDK's schema SQL (``rocpd-schema-3``), filled from the
  CSV files by the writer of ``tests/core/trace/test_rocpd.py``.

Each file is analysed in its own process (``tprimat trace analyze --json -j 1``); wall
time, CPU time and peak resident memory come from ``wait4``.  The analyses must agree
(kernel count, total kernel time, HIP calls) or the bench fails.  Prints a Markdown table
(for BENCHMARKS.md)::

    python bench/vendor_trace_bench.py --kernels 1000000

The files are written by a separate process (the peak RSS a child reports starts from its
parent's, which so stays small); ``--keep DIR --write-only`` writes them alone, and
``--keep DIR --written`` analyses them later.  Writing takes longer than reading: about
12 minutes for 1 000 000 dispatches on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "traces" / "rocprofv3"
REAL_JSON = FIXTURES / "tracelens-mi350x" / "908_results.json.gz"
KERNEL_HEADER = FIXTURES / "sdk-docs-stream-id" / "kernel_trace.csv"
API_HEADER = FIXTURES / "sdk-docs-2024-07" / "hip_runtime_trace.csv"
BASE_NS = 63_857_982_592_000  # the real run's first dispatch, ns
STREAMS = 4
AGENT = 2  # the GPU's node id in the CSV, rocpd and Perfetto files
PID = TID = 908


def _module(name: str, path: Path) -> ModuleType:
    """A test module imported by path, for its writer (one copy of each encoder)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile(n: int, real: dict) -> list[tuple[int, int, int, int, int, int, int]]:
    """(correlation id, kernel id, stream, launch start, launch end, kernel start, kernel end) ns of each dispatch.

    The host launches every 3 µs; the kernel of a stream starts when the launch is done and
    the stream's previous kernel ends, and runs 2 to 12 µs."""
    used = sorted({d["dispatch_info"]["kernel_id"] for d in real["buffer_records"]["kernel_dispatch"]})
    rows = []
    free = [BASE_NS] * STREAMS
    for i in range(n):
        launch = BASE_NS + 3_000 * i
        stream = i % STREAMS
        start = max(launch + 1_500, free[stream])
        end = start + 2_000 + (i * 7_919) % 10_000
        free[stream] = end
        rows.append((i + 1, used[(i * 31) % len(used)], stream, launch, launch + 1_200, start, end))
    return rows


def write_csv(folder: Path, rows: list, names: dict[int, str]) -> Path:
    """``kernel_trace.csv`` and ``hip_api_trace.csv`` as rocprofv3 writes them."""
    folder.mkdir()
    with open(KERNEL_HEADER, newline="") as fh:
        kernel_header = next(csv.reader(fh))
    with open(API_HEADER, newline="") as fh:
        api_header = next(csv.reader(fh))
    kernels = folder / "kernel_trace.csv"
    with open(kernels, "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(kernel_header)
        for corr, kernel, stream, _, _, start, end in rows:
            values = {
                "Kind": "KERNEL_DISPATCH", "Agent_Id": AGENT, "Queue_Id": stream + 1, "Stream_Id": stream + 1,
                "Thread_Id": TID, "Dispatch_Id": corr, "Kernel_Id": kernel, "Kernel_Name": names[kernel],
                "Correlation_Id": corr, "Start_Timestamp": start, "End_Timestamp": end,
            }  # fmt: skip
            out.writerow([values.get(column, 0 if "Segment" in column else 1) for column in kernel_header])
    with open(folder / "hip_api_trace.csv", "w", newline="") as fh:
        out = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        out.writerow(api_header)
        for corr, _, _, launch, done, _, _ in rows:
            out.writerow(["HIP_RUNTIME_API", "hipLaunchKernel", PID, TID, corr, launch, done])
    return kernels


def write_json(path: Path, rows: list, real: dict) -> Path:
    """The real document with these dispatches and HIP calls as its records, written record by record."""
    gpu = real["buffer_records"]["kernel_dispatch"][0]["dispatch_info"]["agent_id"]["handle"]
    kinds = real["strings"]["buffer_records"]
    kind = next(i for i, k in enumerate(kinds) if k["kind"] == "HIP_RUNTIME_API")
    operation = kinds[kind]["operations"].index("hipLaunchKernel")
    tables = {key: value for key, value in real.items() if key != "buffer_records"}
    head = json.dumps({"rocprofiler-sdk-tool": [tables]})[:-3]  # without the closing "}]}"
    dispatch = (
        '{{"size": 184, "kind": 11, "operation": 2, "thread_id": {tid}, "correlation_id": {{"internal": {corr}, '
        '"external": 0}}, "start_timestamp": {start}, "end_timestamp": {end}, "dispatch_info": {{"size": 72, '
        '"agent_id": {{"handle": {gpu}}}, "queue_id": {{"handle": {queue}}}, "kernel_id": {kernel}, "dispatch_id": '
        '{corr}, "private_segment_size": 0, "group_segment_size": 0, "workgroup_size": {{"x": 256, "y": 1, "z": 1}}, '
        '"grid_size": {{"x": 1024, "y": 1, "z": 1}}}}, "stream_id": {{"handle": {stream}}}}}'
    )
    call = (
        '{{"size": 40, "kind": {kind}, "operation": {operation}, "correlation_id": {{"internal": {corr}, '
        '"external": 0}}, "start_timestamp": {start}, "end_timestamp": {end}, "thread_id": {tid}}}'
    )
    with open(path, "w") as fh:
        fh.write(head + ', "buffer_records": {"kernel_dispatch": [')
        fh.write(
            ", ".join(
                dispatch.format(tid=TID, corr=c, start=s, end=e, gpu=gpu, queue=16 + st, kernel=k, stream=st + 1)
                for c, k, st, _, _, s, e in rows
            )
        )
        fh.write('], "hip_api": [')
        fh.write(
            ", ".join(
                call.format(kind=kind, operation=operation, corr=c, start=a, end=b, tid=TID)
                for c, _, _, a, b, _, _ in rows
            )
        )
        fh.write("]}}]}")
    return path


def write_pftrace(path: Path, rows: list, names: dict[int, str]) -> Path:
    """The slices rocprofv3 (generatePerfetto.cpp, ``STREAM`` tracks) writes, by the test's encoder."""
    enc = _module("_pftrace_encoder", ROOT / "tests" / "core" / "trace" / "test_pftrace.py")
    seq = enc._Sequence(2, TID, incremental=False)
    seq.start(BASE_NS - 1_000)
    for stream in range(STREAMS):
        seq.track(0x5000 + stream, f'STREAM [" {stream + 1} "] ')
    for corr, kernel, stream, launch, done, start, end in rows:
        times = [("begin_ns", launch), ("end_ns", done), ("delta_ns", done - launch)]
        args = [*times, ("tid", TID), ("kind", 3), ("operation", 51), ("corr_id", corr)]
        seq.slice("hip_api", "hipLaunchKernel", launch, done, None, args)
        times = [("begin_ns", start), ("end_ns", end), ("delta_ns", end - start)]
        args = [*times, ("kind", 12), ("agent", f"Agent-{AGENT}"), ("agent_type", "GPU"), ("corr_id", corr)]
        args += [("queue", 16 + stream), ("tid", TID), ("kernel_id", kernel)]
        seq.slice("kernel_dispatch", names[kernel], start, end, 0x5000 + stream, args)
    with open(path, "wb") as fh:
        for packet in seq.packets:
            fh.write(enc._b(1, packet))
    return path


def write_rocpd(path: Path, kernels_csv: Path) -> Path:
    """A rocpd database of the SDK's schema holding the CSV files' records, by the test's writer."""
    rocpd = _module("_rocpd_writer", ROOT / "tests" / "core" / "trace" / "test_rocpd.py")
    db = rocpd._Rocpd(path, {AGENT: "AMD Instinct MI350X"})
    db.kernels(kernels_csv).calls(kernels_csv.with_name("hip_api_trace.csv"))
    db.close()
    return path


def analyze(path: Path) -> tuple[dict, float, float, float]:
    """``tprimat trace analyze --json`` of one file in a fresh process: (its rank, wall s, CPU s, peak RSS MiB)."""
    command = [sys.executable, "-m", "tprimat.cli", "trace", "analyze", "--json", "-j", "1", str(path)]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"tprimat trace analyze {path} failed ({proc.returncode}):\n{text[-2000:]}")
    (rank,) = json.loads(text)["ranks"]
    return rank, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def write_all(n: int, folder: Path) -> None:
    """Write the profile of ``n`` dispatches in every format under ``folder``."""
    with gzip.open(REAL_JSON) as fh:
        (real,) = json.load(fh)["rocprofiler-sdk-tool"]
    names = {s["kernel_id"]: s.get("formatted_kernel_name") or s["kernel_name"] for s in real["kernel_symbols"]}
    rows = profile(n, real)
    kernels_csv = write_csv(folder / "csv", rows, names)
    write_json(folder / f"{PID}_results.json", rows, real)
    write_pftrace(folder / f"{PID}_results.pftrace", rows, names)
    write_rocpd(folder / f"{PID}_results.db", kernels_csv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kernels", type=int, default=1_000_000, help="kernel dispatches (and HIP calls)")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them (default: a temporary folder)")
    parser.add_argument("--write-only", action="store_true", help="only write the files (into --keep)")
    parser.add_argument("--written", action="store_true", help="analyse the files a --write-only run left in --keep")
    args = parser.parse_args()
    if (args.write_only or args.written) and args.keep is None:
        parser.error("--write-only and --written need --keep")
    if args.write_only:
        args.keep.mkdir(parents=True, exist_ok=True)
        write_all(args.kernels, args.keep)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if not args.written:
            started = time.perf_counter()
            # written by another process: a child's peak RSS starts from its parent's, which stays small
            command = [sys.executable, __file__, "--kernels", str(args.kernels), "--keep", str(folder), "--write-only"]
            subprocess.run(command, check=True)
            print(f"wrote the files in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        files = {
            "CSV": folder / "csv" / "kernel_trace.csv",
            "JSON": folder / f"{PID}_results.json",
            "Perfetto": folder / f"{PID}_results.pftrace",
            "rocpd": folder / f"{PID}_results.db",
        }
        print("| format | file MB | wall s | CPU s | peak RSS MiB | kernels/s | kernels | kernel time µs | HIP calls |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
        seen = set()
        for label, path in files.items():
            size = sum(p.stat().st_size for p in path.parent.iterdir()) if label == "CSV" else path.stat().st_size
            rank, wall, cpu, rss = analyze(path)
            kernels = rank["launches"]["kernels"]
            kernel_us = sum(c["kernel_us"] for c in rank["categories"].values())
            calls = (rank["runtime_api"] or {}).get("calls", 0)
            seen.add((kernels, round(kernel_us, 3), calls))
            print(
                f"| {label} ({rank['format']}) | {size / 1e6:.0f} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | "
                f"{kernels / wall:,.0f} | {kernels:,} | {kernel_us:,.0f} | {calls:,} |",
                flush=True,
            )
    if len(seen) != 1:
        raise SystemExit(f"the formats disagree (kernels, kernel time µs, HIP calls): {sorted(seen)}")


if __name__ == "__main__":
    main()
