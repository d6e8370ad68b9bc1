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

What it cannot give: PyTorch operators, their shapes and their nesting (an
``nsys`` profile has none unless the program emits NVTX ranges, which are not
read), and ``ProfilerStep`` annotations — so the window is always the whole
profile.  Only the process's own GPU: with several devices, the one that ran
most kernels is analysed and the others are counted in ``metadata``.

The database is opened read-only.  A gzip-compressed export is inflated (within
:func:`~tprimat.trace.limits.inflation_limit`) to a temporary file first.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tprimat.trace.reader import ACTIVITY_CODES, Inflated, RankTrace, TraceFormatError, open_binary
from tprimat.trace.runtime_calls import add_runtime_call, new_summary, runtime_name

#: The first bytes of every SQLite 3 database.
SQLITE_MAGIC = b"SQLite format 3\x00"
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


@contextlib.contextmanager
def _database(path: Path) -> Iterator[sqlite3.Connection]:
    """The export opened read-only (a gzip one inflated to a temporary file first)."""
    with open_binary(path) as fh:
        compressed = isinstance(fh, Inflated)
        head = fh.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise TraceFormatError(f"{path}: not an SQLite database")
    plain, tmp = path, None
    try:
        if compressed:
            with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as tmp, open_binary(path) as fh:
                shutil.copyfileobj(fh, tmp)
            plain = Path(tmp.name)
        try:
            con = sqlite3.connect(f"{plain.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise TraceFormatError(f"{path}: cannot open the SQLite export: {exc}") from None
        try:
            yield con
        finally:
            con.close()
    finally:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)


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
        with _database(path) as con:
            return _KERNEL_TABLE in _tables(con) or "StringIds" in _tables(con)
    except (TraceFormatError, OSError, sqlite3.Error):
        return False


def read_nsys(path: str | Path) -> RankTrace:
    """The GPU activity and launches of an Nsight Systems SQLite export, as one rank's trace."""
    path = Path(path)
    try:
        with _database(path) as con:
            return _read(con, path)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: cannot read the SQLite export: {exc}") from None


def _read(con: sqlite3.Connection, path: Path) -> RankTrace:
    tables = _tables(con)
    if any(name.startswith("rocpd_") for name in tables):
        raise TraceFormatError(
            f"{path}: a rocpd database (rocprofv3's default output), which is not read: convert it with "
            f"`rocpd convert -i {path} --output-format csv` and give rocpd-output-data/out_kernel_trace.csv"
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
    trace.device = _device_name(con, tables, device)
    trace.format = "nsys-sqlite"
    trace.runtime_api = runtime
    trace.metadata = {
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "export_schema": meta.get("EXPORT_SCHEMA_VERSION"),
        "other_devices_kernels": {str(d): n for d, n in device_kernels.items() if d != device},
    }
    return trace


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


__all__ = ["SQLITE_MAGIC", "is_nsys_sqlite", "read_nsys"]
