"""Read rocprofv3's CSV output (``rocprofv3 --kernel-trace --output-format csv``) into a :class:`RankTrace`.

rocprofv3 writes one CSV file per kind of record, named ``<prefix>kernel_trace.csv``,
``<prefix>memory_copy_trace.csv``, ``<prefix>hip_api_trace.csv`` (``--hip-trace``) or
``<prefix>hip_runtime_trace.csv`` (``--hip-runtime-trace``).  Given any of them, the
others with the same prefix in the same folder are read with it (one profiling run).

What they give:

* kernel trace: every dispatch with ``Start_Timestamp``/``End_Timestamp`` (ns),
  ``Agent_Id`` (the GPU), ``Queue_Id`` and, since ROCm 6.3, ``Stream_Id`` (the HIP
  stream; the HSA queue stands in before), ``Correlation_Id`` and ``Kernel_Name``:
  the temporal breakdown, the categories and the top kernels;
* memory copy trace: the copies (``gpu_memcpy``), without a stream;
* HIP API trace: every call with start and end, matched to the dispatch it
  launched by ``Correlation_Id``: launch times, and the host time in launch and
  synchronisation calls (:mod:`tprimat.trace.runtime_calls`).

What they cannot give: PyTorch operators, shapes and nesting, ``ProfilerStep``
annotations (the window is the whole run), collective arguments, and the device's
name (only an agent number).  With several GPUs in one file, the agent that ran
most kernels is analysed and the others are counted in ``metadata``.

Files are read line by line; what is kept are the compact arrays of the trace, with times in µs
from the first activity (``metadata["time_origin_ns"]``: µs since the epoch in a double would
lose the nanoseconds rocprofv3 records).
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tprimat.trace.reader import RankTrace, TraceFormatError, append_ns_activities, open_binary
from tprimat.trace.runtime_calls import add_runtime_call, new_summary

#: What a rocprofv3 CSV file holds, by the columns of its header.
KERNEL, MEMORY_COPY, API = "kernel_trace", "memory_copy_trace", "api_trace"
_SUFFIXES = {
    KERNEL: ("kernel_trace.csv",),
    MEMORY_COPY: ("memory_copy_trace.csv",),
    API: ("hip_api_trace.csv", "hip_runtime_trace.csv"),
}
#: The longest CSV field accepted (a kernel name is under a few kB).
MAX_FIELD_CHARS = 1 << 20


def csv_kind(header: list[str]) -> str | None:
    """Which rocprofv3 trace a CSV header is, or None."""
    columns = set(header)
    if not {"Start_Timestamp", "End_Timestamp", "Correlation_Id"} <= columns:
        return None
    if "Kernel_Name" in columns and "Kind" in columns:
        return KERNEL
    if "Direction" in columns and "Kind" in columns:
        return MEMORY_COPY
    if {"Domain", "Function"} <= columns:
        return API
    return None


def sniff_csv(head: bytes) -> str | None:
    """The kind of rocprofv3 CSV whose first bytes are ``head``, or None."""
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    if not first:
        return None
    try:
        return csv_kind(next(csv.reader([first])))
    except csv.Error:
        return None


@contextlib.contextmanager
def _rows(path: Path) -> Iterator[tuple[str, csv.DictReader]]:
    """The kind of the rocprofv3 CSV at ``path`` and its rows, read line by line."""
    csv.field_size_limit(MAX_FIELD_CHARS)
    with io.TextIOWrapper(open_binary(path), encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.DictReader(fh)
        try:
            kind = csv_kind(list(reader.fieldnames or []))
        except csv.Error as exc:
            raise TraceFormatError(f"{path}: malformed CSV: {exc}") from None
        if kind is None:
            raise TraceFormatError(f"{path}: not a rocprofv3 kernel, memory copy or HIP API trace (CSV)")
        try:
            yield kind, reader
        except csv.Error as exc:
            raise TraceFormatError(f"{path}: malformed CSV at line {reader.line_num}: {exc}") from None


def _siblings(path: Path, kind: str) -> dict[str, Path]:
    """The run's files: ``path`` and those with the same prefix beside it."""
    name = path.name
    stem = name[:-3] if name.endswith(".gz") else name
    prefix = next((stem[: -len(s)] for s in _SUFFIXES[kind] if stem.endswith(s)), None)
    found = {kind: path}
    if prefix is None:
        return found
    for other, suffixes in _SUFFIXES.items():
        if other == kind:
            continue
        for suffix in suffixes:
            candidate = path.with_name(prefix + suffix)
            if candidate.is_file():
                found[other] = candidate
                break
    return found


def _int(value: Any) -> int | None:
    text = (value or "").strip()
    if text.lstrip("-").isdigit() and len(text) <= 19:
        return int(text)
    return None


def read_rocprof_csv(path: str | Path) -> RankTrace:
    """The GPU activity and launches of one rocprofv3 run from its CSV files (see the module docstring)."""
    path = Path(path)
    with _rows(path) as (kind, _):
        pass
    files = _siblings(path, kind)
    trace = RankTrace(path=path, vendor="amd")
    rows: list[tuple[int, int, str, str, int, int, int]] = []  # start, end, name, activity, stream, corr, agent
    bad = 0
    agents: dict[int, int] = {}
    if KERNEL in files:
        bad += _kernels(files[KERNEL], rows, agents)
    if MEMORY_COPY in files:
        bad += _copies(files[MEMORY_COPY], rows)
    agent = max(agents, key=agents.__getitem__) if agents else None
    rows.sort()
    # times are kept from the first activity on
    origin = rows[0][0] if rows else 0
    append_ns_activities(trace, (row[:6] for row in rows if row[3] != "kernel" or row[6] == agent), origin)
    trace.events = len(rows) + bad
    if bad:
        trace.malformed = trace.malformed_activities = bad
        trace.malformed_first = (-1, "a row without integer timestamps, or ending before it starts")
    runtime = _api(files[API], trace, origin) if API in files else None
    trace.format = "rocprofv3-csv"
    trace.runtime_api = runtime
    trace.metadata = {
        "files": sorted(p.name for p in files.values()),
        "agent": agent,
        "time_origin_ns": origin,
        "other_agents_kernels": {str(a): n for a, n in agents.items() if a != agent},
    }
    if not len(trace.ts) and bad:
        raise TraceFormatError(f"{path}: no usable GPU activity: all {bad} rows have malformed fields")
    return trace


def _kernels(path: Path, rows: list, agents: dict[int, int]) -> int:
    bad = 0
    with _rows(path) as (_, reader):
        stream_column = "Stream_Id" if "Stream_Id" in (reader.fieldnames or []) else "Queue_Id"
        for row in reader:
            if row.get("Kind") != "KERNEL_DISPATCH":
                continue
            start, end = _int(row.get("Start_Timestamp")), _int(row.get("End_Timestamp"))
            agent = _int(row.get("Agent_Id"))
            if start is None or end is None or end < start or agent is None:
                bad += 1
                continue
            stream = _int(row.get(stream_column))
            corr = _int(row.get("Correlation_Id"))
            name = row.get("Kernel_Name") or ""
            stream_id = -1 if stream is None else stream
            rows.append((start, end, name, "kernel", stream_id, -1 if corr is None else corr, agent))
            agents[agent] = agents.get(agent, 0) + 1
    return bad


def _copies(path: Path, rows: list) -> int:
    bad = 0
    with _rows(path) as (_, reader):
        for row in reader:
            start, end = _int(row.get("Start_Timestamp")), _int(row.get("End_Timestamp"))
            if start is None or end is None or end < start:
                bad += 1
                continue
            direction = (row.get("Direction") or "").removeprefix("MEMORY_COPY_")
            corr = _int(row.get("Correlation_Id"))
            rows.append((start, end, f"Memcpy {direction}", "gpu_memcpy", -1, -1 if corr is None else corr, -1))
    return bad


def _api(path: Path, trace: RankTrace, origin: int) -> dict[str, Any]:
    wanted = set(trace.correlation)
    summary = new_summary()
    with _rows(path) as (_, reader):
        for row in reader:
            start, end = _int(row.get("Start_Timestamp")), _int(row.get("End_Timestamp"))
            if start is None or end is None or end < start:
                continue
            add_runtime_call(summary, row.get("Function") or "", (end - start) / 1000.0)
            corr = _int(row.get("Correlation_Id"))
            if corr is not None and corr in wanted:
                trace.launch_correlation.append(corr)
                trace.launch_ts.append((start - origin) / 1000.0)
    return summary


__all__ = ["API", "KERNEL", "MEMORY_COPY", "csv_kind", "read_rocprof_csv", "sniff_csv"]
