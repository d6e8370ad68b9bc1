"""Read rocprofv3's database (``--output-format rocpd``, its default since ROCm 7.0) into a :class:`RankTrace`.

rocprofv3 writes one SQLite database per process, ``<pid>_results.db``: tables named
``rocpd_<what>_<uuid>`` and, over them, views named ``rocpd_<what>`` (schema 3 of
rocprofiler-sdk's ``rocpd_tables.sql``).  They hold what its CSV files hold
(:mod:`tprimat.trace.rocprof`), and are read through the views:

* ``rocpd_kernel_dispatch``: every dispatch with ``start``/``end`` (ns), ``agent_id``
  (the GPU), ``stream_id`` (the HIP stream, 0 the default one) and ``kernel_id``, whose
  name is ``rocpd_info_kernel_symbol.display_name``: the temporal breakdown, the
  categories and the top kernels;
* ``rocpd_memory_copy``: the copies (``gpu_memcpy``), named by their direction
  (``MEMORY_COPY_HOST_TO_DEVICE`` in ``rocpd_string``), on their stream;
* ``rocpd_region``: the API calls that took time (``--hip-trace``), named in
  ``rocpd_string``, of the HIP categories (``HIP_RUNTIME_API``, ``HIP_COMPILER_API``
  and their ``_EXT`` forms) of their ``rocpd_event``: launch times and the host time in
  launch and synchronisation calls (:mod:`tprimat.trace.runtime_calls`);
* ``rocpd_info_agent``: the GPU's ``product_name`` (``AMD Instinct MI300X``), the
  device name the peak tables are looked up by.

Each record's ``rocpd_event`` carries its correlation id as ``stack_id`` (the CSV's
``Correlation_Id``; ``correlation_id`` there is the user's external id), which ties a
dispatch to the call that launched it.  Calls that took no measurable time are
stored as samples without their name and are not counted.

What the database cannot give: PyTorch operators, shapes and nesting, and
``ProfilerStep`` annotations (the window is the whole run).  With several GPUs, the
agent that ran most kernels is analysed and the others are counted in ``metadata``;
a database merged from several processes (``rocpd merge``) is read for the process
(``guid``) of that agent.  Times are kept in µs from the first activity
(``metadata["time_origin_ns"]``), as for the CSV files.

Rows are streamed, never held: a first pass counts each agent's dispatches and finds the
origin, a second reads the analysed agent's dispatches and the copies sorted by SQLite (ties in
time ordered by name, kind, stream and correlation) straight into the trace's arrays.

The database is opened read-only, a gzip-compressed one inflated to a temporary file
first (as an Nsight Systems export, :mod:`tprimat.trace.nsys`).
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tprimat.trace.reader import RankTrace, TraceFormatError, append_ns_activities
from tprimat.trace.runtime_calls import add_runtime_call, new_summary
from tprimat.trace.sqlitefile import open_database

#: The prefix of every table and view rocprofv3 writes to its database.
ROCPD_PREFIX = "rocpd_"
_KERNEL_TABLES = """
    FROM rocpd_kernel_dispatch K
    LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
    LEFT JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
"""
#: Every dispatch's agent and times (a first pass: the agents' counts and the origin).
_KERNEL_TIMES = 'SELECT K.guid, K.agent_id, K.start, K."end"' + _KERNEL_TABLES
_KERNELS = (
    'SELECT K.start, K."end", K.kernel_id, S.display_name, S.kernel_name, K.stream_id, E.stack_id'
    + _KERNEL_TABLES
    + 'WHERE K.guid IS ? AND K.agent_id IS ? ORDER BY K.start, K."end"'
)
_COPY_TABLES = """
    FROM rocpd_memory_copy C
    LEFT JOIN rocpd_string N ON N.id = C.name_id AND N.guid = C.guid
    LEFT JOIN rocpd_event E ON E.id = C.event_id AND E.guid = C.guid
    WHERE C.guid = ?
"""
_COPY_TIMES = 'SELECT C.start, C."end"' + _COPY_TABLES
_COPIES = 'SELECT C.start, C."end", N.string, C.stream_id, E.stack_id' + _COPY_TABLES + 'ORDER BY C.start, C."end"'
_CALLS = """
    SELECT R.start, R."end", N.string, G.string, E.stack_id
    FROM rocpd_region R
    LEFT JOIN rocpd_string N ON N.id = R.name_id AND N.guid = R.guid
    LEFT JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
    LEFT JOIN rocpd_string G ON G.id = E.category_id AND G.guid = E.guid
    WHERE R.guid = ?
"""


def _names(con: sqlite3.Connection) -> dict[str, set[str]]:
    """The tables and views of the database, with their columns."""
    names = [row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {name: {row[1] for row in con.execute(f'PRAGMA table_info("{name}")')} for name in names}


def is_rocpd(path: Path) -> bool:
    """Whether ``path`` is an SQLite database with rocprofv3's ``rocpd_`` tables (by content)."""
    try:
        with open_database(path) as con:
            return any(
                name.startswith(ROCPD_PREFIX)
                for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
            )
    except (TraceFormatError, OSError, sqlite3.Error):
        return False


def read_rocpd(path: str | Path) -> RankTrace:
    """The GPU activity and launches of one rocprofv3 database (see the module docstring)."""
    path = Path(path)
    try:
        with open_database(path) as con:
            return _read(con, path)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: cannot read the rocpd database: {exc}") from None


def _read(con: sqlite3.Connection, path: Path) -> RankTrace:
    names = _names(con)
    dispatches = names.get("rocpd_kernel_dispatch")
    if dispatches is None or not {"start", "end", "agent_id", "kernel_id"} <= dispatches:
        version = _schema_version(con, names)
        raise TraceFormatError(
            f"{path}: a rocpd database (schema {version or 'unknown'}) without rocprofv3's kernel dispatch "
            "view (rocpd_kernel_dispatch with start, end, agent_id, kernel_id); profile with `rocprofv3 "
            "--kernel-trace --output-format csv` and give the *_kernel_trace.csv file"
        )
    # first pass: the valid dispatches of each agent, the malformed records and the first start
    counts: dict[tuple[Any, Any], int] = {}
    bad = valid = 0
    origin: int | None = None
    for guid, agent, start, end in con.execute(_KERNEL_TIMES):
        if not _timed(start, end):
            bad += 1
            continue
        counts[(guid, agent)] = counts.get((guid, agent), 0) + 1
        valid += 1
        origin = start if origin is None or start < origin else origin
    guid, agent = max(counts, key=counts.__getitem__) if counts else (_only_guid(con), None)
    copies = guid is not None and "rocpd_memory_copy" in names
    if copies:
        for start, end in con.execute(_COPY_TIMES, (guid,)):
            if not _timed(start, end):
                bad += 1
                continue
            valid += 1
            origin = start if origin is None or start < origin else origin
    # times are kept from the first activity on (any agent's, as the CSV reader)
    origin = origin or 0
    trace = RankTrace(path=path, vendor="amd")
    # second pass: the analysed agent's dispatches and the copies, each sorted by SQLite, merged
    streams = [_ties_sorted(_kernels(con, guid, agent))] if counts else []
    if copies:
        streams.append(_ties_sorted(_copies(con, guid)))
    append_ns_activities(trace, streams[0] if len(streams) == 1 else heapq.merge(*streams), origin)
    trace.events = valid + bad
    if bad:
        trace.malformed = trace.malformed_activities = bad
        trace.malformed_first = (-1, "a record without integer timestamps, or ending before it starts")
    if not len(trace.ts) and bad:
        raise TraceFormatError(f"{path}: no usable GPU activity: all {bad} records have malformed fields")
    trace.runtime_api = _calls(con, names, guid, trace, origin)
    trace.device = _device_name(con, names, guid, agent)
    trace.format = "rocprofv3-rocpd"
    trace.metadata = {
        "schema_version": _schema_version(con, names),
        "guid": guid,
        "agent": agent,
        "time_origin_ns": origin,
        "other_agents_kernels": {f"{g}/{a}": n for (g, a), n in counts.items() if (g, a) != (guid, agent)},
    }
    return trace


def _kernels(con: sqlite3.Connection, guid: Any, agent: Any) -> Iterator[tuple[int, int, str, str, int, int]]:
    """The agent's valid dispatches, ``(start, end, name, "kernel", stream, correlation)``, in order."""
    rows = con.execute(_KERNELS, (guid, agent))
    for start, end, kernel_id, display, symbol, stream, corr in rows:
        if _timed(start, end):
            name = display or symbol or f"kernel {kernel_id}"
            yield start, end, str(name), "kernel", _int_or(stream), _int_or(corr)


def _copies(con: sqlite3.Connection, guid: Any) -> Iterator[tuple[int, int, str, str, int, int]]:
    """The process's valid copies, ``(start, end, name, "gpu_memcpy", stream, correlation)``, in order."""
    for start, end, direction, stream, corr in con.execute(_COPIES, (guid,)):
        if _timed(start, end):
            name = f"Memcpy {str(direction or '').removeprefix('MEMORY_COPY_')}"
            yield start, end, name, "gpu_memcpy", _int_or(stream), _int_or(corr)


def _ties_sorted(rows: Iterator[tuple[int, int, str, str, int, int]]) -> Iterator[tuple[int, int, str, str, int, int]]:
    """``rows`` ordered by (start, end), each run of equal times sorted by its other fields too:
    the activities in the order of their whole tuples, as the CSV reader orders them."""
    run: list[tuple[int, int, str, str, int, int]] = []  # rows of equal times
    for row in rows:
        if run and (row[0] != run[0][0] or row[1] != run[0][1]):
            if len(run) > 1:
                run.sort()
            yield from run
            run.clear()
        run.append(row)
    run.sort()
    yield from run


def _timed(start: Any, end: Any) -> bool:
    """Whether a record's times are integers (as SQLite gives its integers), ``end`` not before ``start``."""
    return type(start) is int and type(end) is int and end >= start


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any) -> int:
    """``value`` when an integer, else -1 (not recorded)."""
    return value if _is_int(value) else -1


def _only_guid(con: sqlite3.Connection) -> str | None:
    """The process of a database without kernels: its one ``guid``, if it has one."""
    guids = [row[0] for row in con.execute("SELECT DISTINCT guid FROM rocpd_info_process LIMIT 2")]
    return guids[0] if len(guids) == 1 else None


def _calls(
    con: sqlite3.Connection, names: dict[str, set[str]], guid: str | None, trace: RankTrace, origin: int
) -> dict[str, Any] | None:
    """Each activity's launch (correlation -> call start), and the host time in HIP API calls."""
    if guid is None or "rocpd_region" not in names:
        return None
    wanted = set(trace.correlation)
    summary = new_summary()
    for start, end, name, category, corr in con.execute(_CALLS, (guid,)):
        if not _timed(start, end):
            continue
        if not (isinstance(category, str) and category.startswith("HIP_") and "_API" in category):
            continue
        add_runtime_call(summary, str(name or ""), (end - start) / 1000.0)
        if corr in wanted:
            trace.launch_correlation.append(corr)
            trace.launch_ts.append((start - origin) / 1000.0)
    return summary if summary["calls"] else None


def _device_name(con: sqlite3.Connection, names: dict[str, set[str]], guid: str | None, agent: Any) -> str | None:
    """The analysed agent's product name (``AMD Instinct MI300X``), else its name (``gfx942``)."""
    columns = names.get("rocpd_info_agent", set())
    if agent is None or not {"id", "guid", "product_name", "name"} <= columns:
        return None
    row = con.execute(
        "SELECT product_name, name FROM rocpd_info_agent WHERE id = ? AND guid = ?", (agent, guid)
    ).fetchone()
    if row is None:
        return None
    return next((str(v).strip() for v in row if isinstance(v, str) and v.strip()), None)


def _schema_version(con: sqlite3.Connection, names: dict[str, set[str]]) -> str | None:
    if not {"tag", "value"} <= names.get("rocpd_metadata", set()):
        return None
    row = con.execute("SELECT value FROM rocpd_metadata WHERE tag = 'schema_version' LIMIT 1").fetchone()
    return str(row[0]) if row else None


__all__ = ["ROCPD_PREFIX", "is_rocpd", "read_rocpd"]
