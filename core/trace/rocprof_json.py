"""Read rocprofv3's JSON output (``rocprofv3 --kernel-trace --output-format json``) into a :class:`RankTrace`.

rocprofv3 writes one ``<pid>_results.json`` per profiled process: a document
``{"rocprofiler-sdk-tool": [{...}]}`` with one object per process, holding

* ``agents``: the CPUs and GPUs with their ``id.handle``, ``type`` (2: GPU),
  ``name`` (the ISA, ``gfx950``) and ``product_name`` (``AMD Instinct MI350X``);
* ``kernel_symbols``: ``kernel_id`` -> ``formatted_kernel_name`` (demangled);
* ``strings.buffer_records``: for each record ``kind`` (its index), the kind's
  name and its ``operations`` by number (``hipLaunchKernel``, ``MEMORY_COPY_HOST_TO_DEVICE``);
* ``buffer_records``: one array per kind of record, of which are read
  ``kernel_dispatch`` (``--kernel-trace``: ``start_timestamp``/``end_timestamp`` in ns,
  ``correlation_id.internal``, ``dispatch_info.agent_id``/``queue_id``/``kernel_id`` and,
  in newer versions, ``stream_id``: the HIP stream, the HSA queue standing in before),
  ``memory_copy`` (``--memory-copy-trace``: the copies, with source and destination
  agents) and ``hip_api`` (``--hip-trace``/``--hip-runtime-trace``: every call, matched to
  the dispatch it launched by correlation id: launch times, and the host time in launch
  and synchronisation calls, :mod:`tprimat.trace.runtime_calls`).

Beside what the CSV files give (:mod:`tprimat.trace.rocprof`), the JSON carries the
device's product name: it becomes the trace's device, so the roofline and the peaks know
the GPU.  What it cannot give: PyTorch operators, shapes and nesting, ``ProfilerStep``
annotations (the window is the whole run), collective arguments.  With several GPUs, the
agent that ran most kernels is analysed (the copies to or from it with it) and the others
are counted in ``metadata``; with several processes in one document, the one with most
kernel dispatches.

The document is decoded in one pass, not element by element: its records are spread over
several arrays and tables that refer to each other (dispatches name kernels and agents by
id), and it is one line of text.  Its text is not read into memory: the file is mapped
(``mmap``; a gzip file is first inflated, within
:func:`~tprimat.trace.limits.inflation_limit`, to a temporary file), and msgspec decodes it
into small typed structs that keep only the fields read, the others skipped by the C
decoder.  So the text is never copied into the process: memory grows with the records kept
(about 0.7 kB a dispatch with its share of the symbol tables: 30 MB for the 37 MB test
file).  Times are kept in µs from the first activity (``metadata["time_origin_ns"]``).
A record whose timestamps or agent are not integers is skipped and counted
(:attr:`RankTrace.malformed`); a document that is not JSON, or not of this shape, is one
:class:`TraceFormatError` naming the file.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from tprimat.trace.limits import BrokenTrace
from tprimat.trace.reader import (
    MAX_DEVICE_CHARS,
    Inflated,
    RankTrace,
    TraceFormatError,
    append_ns_activities,
    open_binary,
)
from tprimat.trace.runtime_calls import add_runtime_call, new_summary

_COPY_BYTES = 16 * 1024 * 1024
_UINT64 = 2**64


# The fields read, and nothing else; leaves are checked where used, so one odd record is
# skipped and counted rather than failing the document.
class _Handle(msgspec.Struct, gc=False):
    handle: Any = None


class _Correlation(msgspec.Struct, gc=False):
    internal: Any = None


class _DispatchInfo(msgspec.Struct, gc=False):
    agent_id: _Handle | None = None
    queue_id: _Handle | None = None
    kernel_id: Any = None


class _Dispatch(msgspec.Struct, gc=False):
    start_timestamp: Any = None
    end_timestamp: Any = None
    correlation_id: _Correlation | None = None
    dispatch_info: _DispatchInfo | None = None
    stream_id: _Handle | None = None


class _Copy(msgspec.Struct, gc=False):
    kind: Any = None
    operation: Any = None
    start_timestamp: Any = None
    end_timestamp: Any = None
    correlation_id: _Correlation | None = None
    src_agent_id: _Handle | None = None
    dst_agent_id: _Handle | None = None
    stream_id: _Handle | None = None


class _Call(msgspec.Struct, gc=False):
    kind: Any = None
    operation: Any = None
    start_timestamp: Any = None
    end_timestamp: Any = None
    correlation_id: _Correlation | None = None


class _Records(msgspec.Struct, gc=False):
    kernel_dispatch: list[_Dispatch] = []
    memory_copy: list[_Copy] = []
    hip_api: list[_Call] = []


class _Symbol(msgspec.Struct, gc=False):
    kernel_id: Any = None
    formatted_kernel_name: Any = None
    demangled_kernel_name: Any = None
    kernel_name: Any = None


class _Agent(msgspec.Struct, gc=False):
    id: _Handle | None = None
    type: Any = None
    name: Any = None
    product_name: Any = None
    marketing_name: Any = None


class _KindNames(msgspec.Struct, gc=False):
    operations: Any = None


class _Strings(msgspec.Struct, gc=False):
    buffer_records: list[_KindNames] = []


class _Metadata(msgspec.Struct, gc=False):
    pid: Any = None


class _Process(msgspec.Struct, gc=False):
    metadata: _Metadata | None = None
    agents: list[_Agent] = []
    strings: _Strings | None = None
    kernel_symbols: list[_Symbol] = []
    buffer_records: _Records | None = None


class _Document(msgspec.Struct, gc=False):
    processes: list[_Process] = msgspec.field(name="rocprofiler-sdk-tool")


def _int(value: Any) -> int | None:
    """``value`` if it is a 64-bit unsigned integer (rocprofv3's timestamps, ids and handles)."""
    return value if type(value) is int and 0 <= value < _UINT64 else None


def _handle(value: _Handle | None) -> int | None:
    return None if value is None else _int(value.handle)


def _correlation(value: _Correlation | None) -> int:
    corr = None if value is None else _int(value.internal)
    return -1 if corr is None or corr >= 2**63 else corr


def _stream(value: int | None) -> int:
    return -1 if value is None or value >= 2**63 else value


def _decode(path: Path) -> _Document:
    """The document at ``path``, decoded from its mapped text (a gzip one inflated to a temporary file)."""
    try:
        with open_binary(path) as fh, contextlib.ExitStack() as stack:
            plain: Any = fh
            if isinstance(fh, Inflated):
                plain = stack.enter_context(tempfile.TemporaryFile(prefix="tprimat-rocprofv3-"))
                shutil.copyfileobj(fh, plain, _COPY_BYTES)
                plain.flush()
            if not os.fstat(plain.fileno()).st_size:
                raise TraceFormatError(f"{path}: an empty file, not rocprofv3 JSON output")
            text = stack.enter_context(mmap.mmap(plain.fileno(), 0, access=mmap.ACCESS_READ))
            return msgspec.json.decode(text, type=_Document)
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"{path}: not rocprofv3 JSON output of the expected shape: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not readable JSON (truncated or malformed?): {exc}") from None
    except BrokenTrace as exc:
        raise TraceFormatError(f"{path}: {exc}") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror or exc}") from None


def _operation_names(process: _Process) -> list[list[str]]:
    """Operation names by record kind and operation number (``strings.buffer_records``)."""
    tables = process.strings.buffer_records if process.strings is not None else []
    names = []
    for table in tables:
        ops = table.operations if isinstance(table.operations, list) else []
        names.append([op if isinstance(op, str) else "" for op in ops])
    return names


def _operation(names: list[list[str]], kind: Any, operation: Any) -> str | None:
    if type(kind) is int and type(operation) is int and 0 <= kind < len(names) and 0 <= operation < len(names[kind]):
        return names[kind][operation] or None
    return None


def _kernel_names(process: _Process) -> dict[int, str]:
    names = {}
    for symbol in process.kernel_symbols:
        kernel_id = _int(symbol.kernel_id)
        if kernel_id is None:
            continue
        for name in (symbol.formatted_kernel_name, symbol.demangled_kernel_name, symbol.kernel_name):
            if isinstance(name, str) and name:
                names[kernel_id] = name
                break
    return names


def _device_name(process: _Process, agent: int | None) -> str | None:
    """The product name of GPU ``agent`` (its ISA name where no product name is given), or None."""
    for entry in process.agents:
        if agent is None or _handle(entry.id) != agent:
            continue
        for name in (entry.product_name, entry.marketing_name, entry.name):
            if isinstance(name, str) and name.strip():
                name = name.strip()
                return name if len(name) <= MAX_DEVICE_CHARS else name[: MAX_DEVICE_CHARS - 1] + "…"
    return None


def read_rocprof_json(path: str | Path) -> RankTrace:
    """The GPU activity and launches of one rocprofv3 JSON output (see the module docstring)."""
    path = Path(path)
    document = _decode(path)
    if not document.processes:
        raise TraceFormatError(f"{path}: rocprofv3 JSON output with no process in it")
    sizes = [len(p.buffer_records.kernel_dispatch) if p.buffer_records else 0 for p in document.processes]
    process = document.processes[sizes.index(max(sizes))]
    records = process.buffer_records or _Records()
    if not (records.kernel_dispatch or records.memory_copy or records.hip_api):
        raise TraceFormatError(
            f"{path}: rocprofv3 JSON output without kernel dispatch, memory copy or HIP API records: profile "
            "with `rocprofv3 --kernel-trace --memory-copy-trace --hip-runtime-trace --output-format json`"
        )
    trace = RankTrace(path=path, vendor="amd")
    rows: list[tuple[int, int, str, str, int, int]] = []  # start, end, name, activity, stream, correlation
    agents: dict[int, int] = {}
    bad: list[tuple[int, str]] = []
    kernels = _kernels(records.kernel_dispatch, _kernel_names(process), bad)
    for kernel in kernels:
        agents[kernel[6]] = agents.get(kernel[6], 0) + 1
    agent = max(agents, key=agents.__getitem__) if agents else None
    rows += [kernel[:6] for kernel in kernels if kernel[6] == agent]
    operations = _operation_names(process)
    rows += _copies(records.memory_copy, operations, agent, bad)
    rows.sort()
    calls = _calls(records.hip_api, operations)
    # times are kept from the first activity on
    origin = rows[0][0] if rows else min((call[0] for call in calls), default=0)
    append_ns_activities(trace, rows, origin)
    trace.events = len(records.kernel_dispatch) + len(records.memory_copy)
    if bad:
        trace.malformed = trace.malformed_activities = len(bad)
        trace.malformed_first = bad[0]
    trace.runtime_api = _runtime(calls, trace, origin) if records.hip_api else None
    trace.format = "rocprofv3-json"
    trace.device = _device_name(process, agent)
    pid = process.metadata.pid if process.metadata is not None else None
    trace.metadata = {
        "pid": _int(pid),
        "agent": agent,
        "time_origin_ns": origin,
        "other_agents_kernels": {str(a): n for a, n in agents.items() if a != agent},
        "other_processes": len(document.processes) - 1,
    }
    if not len(trace.ts) and bad:
        raise TraceFormatError(
            f"{path}: no usable GPU activity: all {len(bad)} records have malformed fields "
            f"(first: record #{bad[0][0]}: {bad[0][1]})"
        )
    return trace


def _span(record: Any) -> tuple[int, int] | None:
    start, end = _int(record.start_timestamp), _int(record.end_timestamp)
    if start is None or end is None or end < start:
        return None
    return start, end


def _kernels(
    dispatches: list[_Dispatch], kernel_names: dict[int, str], bad: list[tuple[int, str]]
) -> list[tuple[int, int, str, str, int, int, int]]:
    """(start, end, name, "kernel", stream, correlation, agent) of each well-formed dispatch."""
    out = []
    for index, record in enumerate(dispatches):
        span = _span(record)
        info = record.dispatch_info
        agent = None if info is None else _handle(info.agent_id)
        if span is None or agent is None:
            bad.append((index, "kernel_dispatch: timestamps or agent_id not integers, or the end before the start"))
            continue
        kernel_id = None if info is None else _int(info.kernel_id)
        name = kernel_names.get(kernel_id, f"kernel {kernel_id}") if kernel_id is not None else "kernel ?"
        stream = _handle(record.stream_id) if record.stream_id is not None else _handle(info.queue_id if info else None)
        out.append((*span, name, "kernel", _stream(stream), _correlation(record.correlation_id), agent))
    return out


def _copies(
    copies: list[_Copy], operations: list[list[str]], agent: int | None, bad: list[tuple[int, str]]
) -> list[tuple[int, int, str, str, int, int]]:
    """The copies to or from GPU ``agent`` (all copies where no kernel names one)."""
    out = []
    for index, record in enumerate(copies):
        span = _span(record)
        if span is None:
            bad.append((index, "memory_copy: timestamps not integers, or the end before the start"))
            continue
        ends = {_handle(record.src_agent_id), _handle(record.dst_agent_id)}
        if agent is not None and ends != {None} and agent not in ends:
            continue
        direction = (_operation(operations, record.kind, record.operation) or "?").removeprefix("MEMORY_COPY_")
        stream = _stream(_handle(record.stream_id))
        out.append((*span, f"Memcpy {direction}", "gpu_memcpy", stream, _correlation(record.correlation_id)))
    return out


def _calls(calls: list[_Call], operations: list[list[str]]) -> list[tuple[int, int, str, int]]:
    """(start, end, function, correlation) of each well-formed HIP API call."""
    out = []
    for record in calls:
        span = _span(record)
        if span is None:
            continue
        name = _operation(operations, record.kind, record.operation) or ""
        out.append((*span, name, _correlation(record.correlation_id)))
    return out


def _runtime(calls: list[tuple[int, int, str, int]], trace: RankTrace, origin: int) -> dict[str, Any]:
    """The calls' summary; the launch time of each activity whose correlation id a call carries."""
    wanted = set(trace.correlation)
    wanted.discard(-1)
    summary = new_summary()
    for start, end, name, corr in calls:
        add_runtime_call(summary, name, (end - start) / 1000.0)
        if corr in wanted:
            trace.launch_correlation.append(corr)
            trace.launch_ts.append((start - origin) / 1000.0)
    return summary


__all__ = ["read_rocprof_json"]
