"""Read an Nsight Systems SQLite export (``nsys export --type sqlite``) into a :class:`RankTrace`.

What the export gives, table by table (Nsight Systems 2022.2 and 2024.5 exports are tested):

* ``CUPTI_ACTIVITY_KIND_KERNEL``, ``…_MEMCPY``, ``…_MEMSET``: GPU activity with
  start and end (ns), device, stream and correlation id; kernel names through
  ``StringIds``.  They become the activities of the temporal breakdown and the
  categories, exactly as Kineto's ``kernel``/``gpu_memcpy``/``gpu_memset``.
* ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``: CUDA synchronisation records, Kineto's
  ``cuda_sync`` (``Event Sync``, ``Stream Wait Event``, ``Stream Sync``, ``Context Sync``).
* ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime calls, matched to the activity
  they launched by correlation id: the launch time of each activity, and the
  host time spent in launch and synchronisation calls (:mod:`tprimat.trace.runtime_calls`).
* ``TARGET_INFO_GPU``: the device name.
* ``NVTX_EVENTS``: the NVTX push/pop and start/end ranges (event types 59 and 60;
  the name in ``text`` or, through ``textId``, in ``StringIds``) of the process
  that ran the analysed GPU's kernels.  The outermost ranges whose name matches
  the step pattern become the trace's profiler steps, as ``ProfilerStep#N``
  annotations do in a Kineto trace: by default :data:`~tprimat.trace.reader.PROFILER_STEP`
  (``ProfilerStep#N``, written by ``torch.profiler`` under ``emit_nvtx``), or any
  regular expression (``--nvtx-step``; see :func:`nvtx_steps`).  Without a
  match the window is the whole profile, and :attr:`RankTrace.steps_note` names
  the most frequent ranges so that a pattern can be picked.

What it cannot give: PyTorch operators, their shapes and their nesting (NVTX
ranges are names and times, not operators with shapes).  Only the process's own
GPU: with several devices, the one that ran most kernels is analysed and the
others are counted in ``metadata``.

The database is opened read-only.  A gzip-compressed export is inflated (within
:func:`~tprimat.trace.limits.inflation_limit`) to a temporary file first.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tprimat.errors import TprimatError
from tprimat.trace.reader import (
    ACTIVITY_CODES,
    PROFILER_STEP,
    ProfilerStep,
    RankTrace,
    TraceFormatError,
)
from tprimat.trace.runtime_calls import add_runtime_call, new_summary, runtime_name
from tprimat.trace.sqlitefile import open_database

_KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
_SYNC_NAMES = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
#: NVTX_EVENTS event types that are ranges: NvtxPushPopRange and NvtxStartEndRange.
_NVTX_RANGES = (59, 60)
#: How many of the most frequent NVTX range names a trace without steps names.
NVTX_NAMES_SHOWN = 10
_NAME_CHARS = 60  # longest range name shown in full in a note
_STEP_NUMBER = re.compile(r"[0-9]{1,18}")


def _tables(con: sqlite3.Connection) -> dict[str, set[str]]:
    names = [row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: {row[1] for row in con.execute(f'PRAGMA table_info("{name}")')} for name in names}


def _meta(con: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[str, str]:
    """The export's own metadata (``EXPORT_META_DATA`` before schema 3, ``META_DATA_EXPORT`` since)."""
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= tables[table]:
            return {str(n): str(v) for n, v in con.execute(f"SELECT name, value FROM {table}")}
    return {}


def is_nsys_sqlite(path: Path) -> bool:
    """Whether ``path`` is an SQLite database with Nsight Systems' CUPTI tables (by content)."""
    try:
        with open_database(path) as con:
            return _KERNEL_TABLE in _tables(con) or "StringIds" in _tables(con)
    except (TraceFormatError, OSError, sqlite3.Error):
        return False


def nvtx_step_pattern(regex: str | None) -> re.Pattern[str]:
    """The pattern whose NVTX ranges are profiler steps: ``regex`` compiled, or
    :data:`~tprimat.trace.reader.PROFILER_STEP` when None.  A regex that does not compile is a
    :class:`~tprimat.errors.TprimatError` (bad input)."""
    if regex is None:
        return PROFILER_STEP
    try:
        return re.compile(regex)
    except re.error as exc:
        raise TprimatError(f"--nvtx-step {regex!r} is not a regular expression: {exc}") from None


def read_nsys(path: str | Path, nvtx_step: str | None = None) -> RankTrace:
    """The GPU activity, launches and profiler steps of an Nsight Systems SQLite export, as one rank's trace.

    ``nvtx_step``: the regular expression of the NVTX ranges that are steps (default:
    ``ProfilerStep#N``), see :func:`nvtx_steps`.
    """
    path = Path(path)
    pattern = nvtx_step_pattern(nvtx_step)
    try:
        with open_database(path) as con:
            return _read(con, path, pattern)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: cannot read the SQLite export: {exc}") from None


def _read(con: sqlite3.Connection, path: Path, pattern: re.Pattern[str]) -> RankTrace:
    tables = _tables(con)
    if any(name.startswith("rocpd_") for name in tables):
        raise TraceFormatError(
            f"{path}: a rocpd database (rocprofv3's default output), not an Nsight Systems export: "
            "read it with tprimat.trace.rocpd.read_rocpd (load_trace and `tprimat trace analyze` do)"
        )
    if "StringIds" not in tables or _KERNEL_TABLE not in tables and "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        raise TraceFormatError(
            f"{path}: an SQLite database without Nsight Systems' CUPTI tables "
            "(export the report with `nsys export --type sqlite`)"
        )
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    meta = _meta(con, tables)
    device_kernels: dict[int, int] = dict(
        con.execute(f"SELECT deviceId, count(*) FROM {_KERNEL_TABLE} GROUP BY deviceId")
        if _KERNEL_TABLE in tables
        else []
    )
    device = max(device_kernels, key=device_kernels.__getitem__) if device_kernels else None
    rows = _activities(con, tables, strings, device)
    rows.sort()
    trace = RankTrace(path=path, vendor="nvidia")
    names: dict[str, int] = {}
    codes = {code: i for i, code in enumerate(ACTIVITY_CODES)}
    for start, end, name, activity, stream, corr in rows:
        if start is None or end is None or end < start:
            trace.malformed += 1
            trace.malformed_activities += 1
            continue
        nid = names.setdefault(name, len(names))
        trace.ts.append(start / 1000.0)
        trace.dur.append((end - start) / 1000.0)
        trace.name_id.append(nid)
        trace.code.append(codes[activity])
        trace.stream.append(stream if isinstance(stream, int) else -1)
        trace.correlation.append(corr if isinstance(corr, int) else -1)
    trace.names.extend(names)
    trace.events = len(rows)
    if trace.malformed:
        trace.malformed_first = (-1, "a GPU activity without a start or an end, or ending before it starts")
    runtime = _runtime(con, tables, strings, trace)
    ranges = _nvtx_ranges(con, tables, strings, _device_processes(con, tables, device))
    trace.steps = nvtx_steps(ranges, pattern)
    names = Counter(name for _, _, name in ranges)
    if not trace.steps and (names or pattern is not PROFILER_STEP):
        trace.steps_note = _no_steps_note(pattern, names)
    trace.device = _device_name(con, tables, device)
    trace.format = "nsys-sqlite"
    trace.runtime_api = runtime
    trace.metadata = {
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "export_schema": meta.get("EXPORT_SCHEMA_VERSION"),
        "other_devices_kernels": {str(d): n for d, n in device_kernels.items() if d != device},
        "nvtx_step": pattern.pattern,
        "nvtx_ranges": dict(names.most_common(NVTX_NAMES_SHOWN)),
    }
    return trace


def _device_processes(con: sqlite3.Connection, tables: dict[str, set[str]], device: int | None) -> set[int] | None:
    """The processes (``globalPid``) that ran kernels on ``device``; None where the export does not say."""
    if device is None or "globalPid" not in tables.get(_KERNEL_TABLE, ()):
        return None
    rows = con.execute(f"SELECT DISTINCT globalPid FROM {_KERNEL_TABLE} WHERE deviceId = ?", (device,))
    processes = {pid >> 24 for (pid,) in rows if isinstance(pid, int)}
    return processes or None


def _nvtx_ranges(
    con: sqlite3.Connection, tables: dict[str, set[str]], strings: dict[int, Any], processes: set[int] | None
) -> list[tuple[int, int | None, str]]:
    """(start ns, end ns or None, name) of every NVTX range of ``processes`` (all where None).

    nsys writes a thread as ``globalTid`` = the process's ``globalPid`` plus the thread id
    (below 2^24), so a range's process is ``globalTid >> 24``.
    """
    columns = tables.get("NVTX_EVENTS", set())
    if not {"start", "eventType"} <= columns:
        return []
    picked = ", ".join(c if c in columns else "NULL" for c in ("start", "end", "text", "textId", "globalTid"))
    types = ", ".join(map(str, _NVTX_RANGES))
    ranges = []
    for start, end, text, text_id, tid in con.execute(f"SELECT {picked} FROM NVTX_EVENTS WHERE eventType IN ({types})"):
        if processes is not None and isinstance(tid, int) and tid >> 24 not in processes:
            continue
        name = text if text is not None else strings.get(text_id)
        if isinstance(start, int) and name is not None:
            ranges.append((start, end if isinstance(end, int) else None, str(name)))
    return ranges


def nvtx_steps(ranges: Iterable[tuple[int, int | None, str]], pattern: re.Pattern[str]) -> list[ProfilerStep]:
    """The profiler steps that the NVTX ``ranges`` (start ns, end ns, name) mark, in time order.

    A step is a complete range whose name ``pattern`` finds (:meth:`re.Pattern.search`) and that
    lies inside no other such range (nested matches are parts of a step, not steps).  Its
    number is the pattern's first group, which must then be a whole number; a pattern without
    a group numbers the steps 0, 1, … in time order.  Times are µs, as a Kineto trace's.
    """
    matched = []
    for start, end, name in ranges:
        if end is None or end < start:
            continue  # still open when the profile ended: no step length
        found = pattern.search(name)
        if found is not None:
            matched.append((start, end, name, found))
    matched.sort(key=lambda r: (r[0], -r[1]))
    steps: list[ProfilerStep] = []
    reach = None  # the latest end of the ranges so far: a range ending before it is nested
    for start, end, name, found in matched:
        if reach is not None and end <= reach:
            continue
        reach = end
        steps.append(
            ProfilerStep(_step_number(pattern, found, name, len(steps)), start / 1000.0, (end - start) / 1000.0)
        )
    return steps


def _step_number(pattern: re.Pattern[str], found: re.Match[str], name: str, order: int) -> int:
    """The step number of the range ``name``: the pattern's first group, else ``order``."""
    if not pattern.groups:
        return order
    number = found.group(1)
    if number is None or not _STEP_NUMBER.fullmatch(number):
        raise TprimatError(
            f"--nvtx-step {pattern.pattern!r}: its first group found {number!r} in the NVTX range {name[:200]!r}, "
            "not a step number: make the group match the number alone (e.g. 'iteration([0-9]+)'), or drop the "
            "group or make it non-capturing ('(?:a|b)') to number the ranges 0, 1, … in time order"
        )
    return int(number)


def _no_steps_note(pattern: re.Pattern[str], names: Counter[str]) -> str:
    """Why a trace has no profiler steps, with the NVTX ranges it does have."""
    wanted = "ProfilerStep#N" if pattern is PROFILER_STEP else repr(pattern.pattern)
    if not names:
        return f"no NVTX ranges in this export (so no {wanted} steps): the window is the whole profile"
    shown = ", ".join(f"{_shown(name)!r} ×{count}" for name, count in names.most_common(NVTX_NAMES_SHOWN))
    more = f" (of {len(names)} names)" if len(names) > NVTX_NAMES_SHOWN else ""
    return (
        f"no NVTX range matches {wanted}: no profiler steps, the window is the whole profile; "
        f"the most frequent NVTX ranges{more}: {shown}; name the steps' ranges with --nvtx-step REGEX"
    )


def _shown(name: str) -> str:
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def _activities(
    con: sqlite3.Connection, tables: dict[str, set[str]], strings: dict[int, Any], device: int | None
) -> list[tuple[Any, Any, str, str, Any, Any]]:
    """(start ns, end ns, name, Kineto activity, stream, correlation) of the kernels, copies,
    memsets and synchronisations of ``device``."""
    rows: list[tuple[Any, Any, str, str, Any, Any]] = []
    if _KERNEL_TABLE in tables:
        name_col = "demangledName" if "demangledName" in tables[_KERNEL_TABLE] else "shortName"
        for start, end, name_id, stream, corr, dev in con.execute(
            f"SELECT start, end, {name_col}, streamId, correlationId, deviceId FROM {_KERNEL_TABLE}"
        ):
            if dev == device:
                rows.append((start, end, str(strings.get(name_id, name_id)), "kernel", stream, corr))
    copies = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if copies in tables:
        for start, end, kind, stream, corr, dev in con.execute(
            f"SELECT start, end, copyKind, streamId, correlationId, deviceId FROM {copies}"
        ):
            if device is None or dev == device:
                rows.append((start, end, f"Memcpy {_COPY_KINDS.get(kind, kind)}", "gpu_memcpy", stream, corr))
    sets = "CUPTI_ACTIVITY_KIND_MEMSET"
    if sets in tables:
        for start, end, stream, corr, dev in con.execute(
            f"SELECT start, end, streamId, correlationId, deviceId FROM {sets}"
        ):
            if device is None or dev == device:
                rows.append((start, end, "Memset (Device)", "gpu_memset", stream, corr))
    syncs = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if syncs in tables:
        for start, end, kind, stream, corr in con.execute(
            f"SELECT start, end, syncType, streamId, correlationId FROM {syncs}"
        ):
            rows.append((start, end, _SYNC_NAMES.get(kind, "Unknown Sync"), "cuda_sync", stream, corr))
    return rows


def _runtime(
    con: sqlite3.Connection, tables: dict[str, set[str]], strings: dict[int, Any], trace: RankTrace
) -> dict[str, Any] | None:
    """Each activity's launch (correlation -> call start), and the host time in runtime calls."""
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in tables:
        return None
    wanted = set(trace.correlation)
    summary = new_summary()
    # eventClass 0 and 1 are CUDA runtime and driver calls; nsys 2022 also writes each call again
    # as a backtrace record (class 67), which is not a call
    where = " WHERE eventClass IN (0, 1)" if "eventClass" in tables[table] else ""
    for start, end, corr, name_id in con.execute(f"SELECT start, end, correlationId, nameId FROM {table}{where}"):
        name = runtime_name(str(strings.get(name_id, "")))
        if start is None or end is None:
            continue
        add_runtime_call(summary, name, (end - start) / 1000.0)
        if corr in wanted:
            trace.launch_correlation.append(corr)
            trace.launch_ts.append(start / 1000.0)
    return summary


def _device_name(con: sqlite3.Connection, tables: dict[str, set[str]], device: int | None) -> str | None:
    info = tables.get("TARGET_INFO_GPU")
    if not info or "name" not in info:
        return None
    key = "cuDevice" if "cuDevice" in info else "id" if "id" in info else None
    rows = list(con.execute(f"SELECT name{', ' + key if key else ''} FROM TARGET_INFO_GPU"))
    for row in rows:
        if key and device is not None and row[1] == device:
            return str(row[0])
    return str(rows[0][0]) if rows else None


__all__ = ["is_nsys_sqlite", "nvtx_step_pattern", "nvtx_steps", "read_nsys"]
