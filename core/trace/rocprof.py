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

Files are read line by line into typed arrays (about 50 bytes a row, not a tuple each), ordered
by sorting one integer per row (its start, end and index; rows of equal times by all their
fields), then kept as the compact arrays of the trace, with times in µs from the first activity
(``metadata["time_origin_ns"]``: µs since the epoch in a double would lose the nanoseconds
rocprofv3 records).
"""

from __future__ import annotations

import contextlib
import csv
import io
from array import array
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
#: The range of the integers kept (a signed 64-bit field, as rocprofv3's timestamps and ids).
_INT64 = range(-(1 << 63), 1 << 63)
_ACTIVITIES = ("gpu_memcpy", "kernel")  # in the order of their names
_COPY, _KERNEL = _ACTIVITIES.index("gpu_memcpy"), _ACTIVITIES.index("kernel")


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
        number = int(text)
        return number if number in _INT64 else None
    return None


class _Activities:
    """The activities of a run as read, one typed array per field (not a tuple per row): the
    kernel dispatches of every agent and the copies, names interned as read."""

    def __init__(self) -> None:
        self.start, self.end = array("q"), array("q")
        self.stream, self.corr, self.agent = array("q"), array("q"), array("q")
        self.name, self.kind = array("q"), array("b")  # index into names, into _ACTIVITIES
        self.names: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.start)

    def add(self, start: int, end: int, name: str, kind: int, stream: int, corr: int, agent: int) -> None:
        self.start.append(start)
        self.end.append(end)
        self.name.append(self.names.setdefault(name, len(self.names)))
        self.kind.append(kind)
        self.stream.append(stream)
        self.corr.append(corr)
        self.agent.append(agent)

    def row(self, index: int, names: list[str]) -> tuple[int, int, str, str, int, int, int]:
        """Activity ``index`` as ``(start, end, name, activity, stream, correlation, agent)``."""
        activity = _ACTIVITIES[self.kind[index]]
        return (
            self.start[index],
            self.end[index],
            names[self.name[index]],
            activity,
            self.stream[index],
            self.corr[index],
            self.agent[index],
        )

    def in_order(self) -> Iterator[tuple[int, int, str, str, int, int, int]]:
        """The activities ordered as their tuples ``(start, end, name, activity, stream, correlation,
        agent)`` would sort: by a sort of one integer per activity packing its start, end and index,
        each run of equal times then sorted by its whole tuples."""
        if not len(self):
            return
        names = list(self.names)
        first, last = min(self.start), min(self.end)
        index_bits = len(self).bit_length()
        end_bits = (max(self.end) - last).bit_length()
        keys = [
            (((start - first) << end_bits | (end - last)) << index_bits) | index
            for index, (start, end) in enumerate(zip(self.start, self.end, strict=True))
        ]
        keys.sort()
        mask = (1 << index_bits) - 1
        run: list[int] = []
        for key in keys:
            if run and key >> index_bits != run[0] >> index_bits:
                yield from self._run(run, mask, names)
                run.clear()
            run.append(key)
        yield from self._run(run, mask, names)

    def _run(self, run: list[int], mask: int, names: list[str]) -> Iterator[tuple[int, int, str, str, int, int, int]]:
        rows = [self.row(key & mask, names) for key in run]
        return iter(sorted(rows) if len(rows) > 1 else rows)


def read_rocprof_csv(path: str | Path) -> RankTrace:
    """The GPU activity and launches of one rocprofv3 run from its CSV files (see the module docstring)."""
    path = Path(path)
    with _rows(path) as (kind, _):
        pass
    files = _siblings(path, kind)
    trace = RankTrace(path=path, vendor="amd")
    rows = _Activities()
    bad = 0
    agents: dict[int, int] = {}
    if KERNEL in files:
        bad += _kernels(files[KERNEL], rows, agents)
    if MEMORY_COPY in files:
        bad += _copies(files[MEMORY_COPY], rows)
    agent = max(agents, key=agents.__getitem__) if agents else None
    # times are kept from the first activity on
    origin = min(rows.start) if len(rows) else 0
    kept = (row[:6] for row in rows.in_order() if row[3] != "kernel" or row[6] == agent)
    append_ns_activities(trace, kept, origin)
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


def _kernels(path: Path, rows: _Activities, agents: dict[int, int]) -> int:
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
            rows.add(start, end, name, _KERNEL, stream_id, -1 if corr is None else corr, agent)
            agents[agent] = agents.get(agent, 0) + 1
    return bad


def _copies(path: Path, rows: _Activities) -> int:
    bad = 0
    with _rows(path) as (_, reader):
        for row in reader:
            start, end = _int(row.get("Start_Timestamp")), _int(row.get("End_Timestamp"))
            if start is None or end is None or end < start:
                bad += 1
                continue
            direction = (row.get("Direction") or "").removeprefix("MEMORY_COPY_")
            corr = _int(row.get("Correlation_Id"))
            rows.add(start, end, f"Memcpy {direction}", _COPY, -1, -1 if corr is None else corr, -1)
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
