"""Stream a Kineto (PyTorch profiler) Chrome-trace JSON file into compact per-rank arrays.

A trace is read once, event by event (``ijson`` with its C backend), and only
what the analysis needs is kept, in typed arrays rather than dicts:

* GPU-timeline activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``,
  ``cuda_sync``): start, duration, interned name, category, stream and
  correlation id;
* host-side launches (``cuda_runtime``/``cuda_driver`` events that carry a
  ``correlation``): correlation id and start, to place each kernel in the
  profiler step that launched it;
* ``ProfilerStep#N`` annotations of the host timeline.

Everything else (cpu ops, python functions, flows, args) is dropped as it is
read, so memory grows with the number of GPU activities and launches, not with
the file.  Plain and gzip files are recognised by their first bytes, not by
their names.  Top-level metadata (``distributedInfo``, ``deviceProperties``,
the runtime versions) is read from the part of the file before
``traceEvents``, where Kineto writes it.
"""

from __future__ import annotations

import gzip
import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs

from tprimat.errors import TprimatError
from tprimat.trace.categories import ACTIVITY_CATEGORIES

_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)")
#: A rank in a trace file's name: ``rank-3``, ``rank_3``, ``rank3``, Primus's ``rank[3]``.
_RANK_IN_NAME = re.compile(r"rank[-_\[]?(\d+)", re.IGNORECASE)
_TAIL = 1 << 18  # bytes of the document end kept to read metadata written after the events

#: Kineto categories of GPU-timeline activity, in a fixed order (index = stored code).
ACTIVITY_CODES: tuple[str, ...] = tuple(ACTIVITY_CATEGORIES)
_ACTIVITY_INDEX = {cat: i for i, cat in enumerate(ACTIVITY_CODES)}
_LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})


class TraceFormatError(TprimatError):
    """A trace file that cannot be read: not JSON, truncated, not gzip, or not a Chrome trace."""


@attrs.define
class ProfilerStep:
    number: int
    ts: float  # µs, host clock
    dur: float


@attrs.define
class RankTrace:
    """What one trace file holds, compactly: one rank's GPU activity, launches and steps."""

    path: Path
    rank: int | None = None
    world_size: int | None = None
    vendor: str | None = None  # "nvidia" | "amd" | None
    device: str | None = None
    metadata: dict[str, Any] = attrs.Factory(dict)
    names: list[str] = attrs.Factory(list)
    # GPU activity, one entry per event
    ts: array = attrs.Factory(lambda: array("d"))
    dur: array = attrs.Factory(lambda: array("d"))
    name_id: array = attrs.Factory(lambda: array("l"))
    code: array = attrs.Factory(lambda: array("b"))  # index into ACTIVITY_CODES
    stream: array = attrs.Factory(lambda: array("q"))
    correlation: array = attrs.Factory(lambda: array("q"))
    # host launches
    launch_correlation: array = attrs.Factory(lambda: array("q"))
    launch_ts: array = attrs.Factory(lambda: array("d"))
    steps: list[ProfilerStep] = attrs.Factory(list)
    events: int = 0  # events read in traceEvents

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else self.path.name


def open_binary(path: Path) -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently gunzipping it when it starts with the gzip magic."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot open trace: {exc.strerror or exc}") from None
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _json_errors() -> tuple[type[BaseException], ...]:
    import ijson

    return (ijson.JSONError, ijson.IncompleteJSONError, EOFError, gzip.BadGzipFile, OSError, ValueError)


def _read_head(path: Path) -> tuple[str, dict[str, Any]]:
    """Top-level metadata written before the event array, and the prefix of that array's items."""
    import ijson

    metadata: dict[str, Any] = {}
    with open_binary(path) as fh:
        parser = ijson.parse(fh, use_float=True)
        builder: Any = None
        key: str | None = None
        try:
            for prefix, event, value in parser:
                if builder is not None:
                    if prefix == key and event in ("end_map", "end_array"):
                        builder.event(event, value)
                        metadata[key] = builder.value
                        builder, key = None, None
                    else:
                        builder.event(event, value)
                    continue
                if prefix == "" and event == "start_array":
                    return "item", metadata  # a bare array of events
                if prefix == "" and event in ("start_map", "map_key", "end_map"):
                    continue
                if prefix == "traceEvents" and event == "start_array":
                    return "traceEvents.item", metadata
                if "." in prefix:
                    continue
                if event in ("start_map", "start_array"):
                    builder = ijson.ObjectBuilder()
                    builder.event(event, value)
                    key = prefix
                elif event not in ("map_key",):
                    metadata[prefix] = value
        except _json_errors() as exc:
            raise TraceFormatError(f"{path}: not a readable JSON trace ({_reason(exc)})") from None
    raise TraceFormatError(f"{path}: no traceEvents array: not a Chrome/Kineto trace")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


class _TailKeeper:
    """A read-through wrapper that remembers the last bytes read (the metadata after the events)."""

    def __init__(self, fh: IO[bytes], keep: int = _TAIL) -> None:
        self._fh = fh
        self._keep = keep
        self.tail = b""

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        if data:
            self.tail = (self.tail + data)[-self._keep :]
        return data


def iter_events(
    path: Path, prefix: str = "traceEvents.item", tail: list[bytes] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the trace's events one by one; a truncated or malformed file raises :class:`TraceFormatError`.

    When ``tail`` is a list, the last bytes of the document are appended to it at the end.
    """
    import ijson

    count = 0
    with open_binary(path) as fh:
        keeper = _TailKeeper(fh)
        try:
            for event in ijson.items(keeper, prefix, use_float=True):
                count += 1
                yield event
            keeper.read()  # the rest of the document after the events
        except _json_errors() as exc:
            raise TraceFormatError(
                f"{path}: truncated or malformed trace after {count} events ({_reason(exc)})"
            ) from None
    if tail is not None:
        tail.append(keeper.tail)


_AFTER_ARRAY = re.compile(rb"\]\s*,\s*\"")


def _metadata_after_events(tail: bytes) -> dict[str, Any]:
    """Parse the top-level keys that follow the event array (``], "key": ... }``) from the file's tail."""
    import json

    for match in _AFTER_ARRAY.finditer(tail):
        candidate = b"{" + tail[match.end() - 1 :]
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def read_trace(path: str | Path, workers: int = 1) -> RankTrace:
    """Read one rank's trace file (plain or gzip JSON), streaming.

    Events are decoded in large typed batches (:mod:`tprimat.trace.fastread`); a file that
    reader cannot take (truncated, malformed, unusual) is read again item by item with ijson,
    which gives the same arrays or the precise error.  With ``workers`` above 1, a large
    plain file is cut into that many ranges of its events, read by as many processes and
    joined in order (:func:`_read_ranges`): the same arrays as one process reads.
    """
    path = Path(path)
    prefix, metadata = _read_head(path)
    if workers > 1:
        ranges = _event_ranges(path, prefix, workers)
        if ranges is not None:
            try:
                return _read_ranges(path, prefix, dict(metadata), ranges, workers)
            except Exception:  # noqa: BLE001 - read whole below: the same arrays, or the precise error
                pass
    try:
        return _read_events(path, prefix, dict(metadata), _fast_events(path, prefix))
    except _FastReadFailed:
        pass
    return _read_events(path, prefix, metadata, None)


class _FastReadFailed(Exception):
    pass


def _fast_events(path: Path, prefix: str) -> tuple[Iterator[Any], list[bytes]]:
    from tprimat.trace.fastread import fast_events

    tail: list[bytes] = []

    def events() -> Iterator[Any]:
        try:
            with open_binary(path) as fh:
                yield from fast_events(fh, prefix, tail, threaded=isinstance(fh, gzip.GzipFile))
        except Exception as exc:  # any surprise: the item-by-item reader decides
            raise _FastReadFailed(str(exc)) from None

    return events(), tail


def _read_events(
    path: Path, prefix: str, metadata: dict[str, Any], fast: tuple[Iterator[Any], list[bytes]] | None
) -> RankTrace:
    trace = RankTrace(path=path, metadata=metadata)
    if fast is None:
        tail: list[bytes] = []
        stream = iter_events(path, prefix, tail)
    else:
        stream, tail = fast
    _take(trace, stream)
    return _finished(trace, prefix, tail)


def _take(trace: RankTrace, stream: Iterator[Any]) -> None:
    """Add the events of ``stream`` to ``trace``'s arrays (names interned in order of appearance)."""
    from tprimat.trace.fastread import Event

    names: dict[str, int] = {name: index for index, name in enumerate(trace.names)}
    name_list = trace.names
    ts_a, dur_a, nid_a, code_a = trace.ts, trace.dur, trace.name_id, trace.code
    stream_a, corr_a = trace.stream, trace.correlation
    lcorr_a, lts_a = trace.launch_correlation, trace.launch_ts
    activity_index = _ACTIVITY_INDEX
    launch_cats = _LAUNCH_CATEGORIES
    events = 0
    for event in stream:
        events += 1
        if not isinstance(event, (dict, Event)):
            continue
        cat = event.get("cat")
        code = activity_index.get(cat)  # type: ignore[arg-type]
        if code is not None:
            dur = event.get("dur")
            ts = event.get("ts")
            if dur is None or ts is None or event.get("ph", "X") != "X":
                continue
            args = event.get("args") or {}
            name = event.get("name", "")
            nid = names.get(name)
            if nid is None:
                nid = names[name] = len(name_list)
                name_list.append(name)
            ts_a.append(float(ts))
            dur_a.append(float(dur))
            nid_a.append(nid)
            code_a.append(code)
            stream_a.append(_as_int(args.get("stream"), -1))
            corr_a.append(_as_int(args.get("correlation"), -1))
        elif cat in launch_cats:
            args = event.get("args")
            if args and "correlation" in args and event.get("ts") is not None:
                lcorr_a.append(_as_int(args["correlation"], -1))
                lts_a.append(float(event["ts"]))
        elif cat != "gpu_user_annotation":
            name = event.get("name")
            if name and name.startswith("ProfilerStep"):
                match = _STEP.match(name)
                if match and event.get("dur") is not None and event.get("ts") is not None:
                    trace.steps.append(ProfilerStep(int(match.group(1)), float(event["ts"]), float(event["dur"])))
    trace.events += events


def _finished(trace: RankTrace, prefix: str, tail: list[bytes]) -> RankTrace:
    """``trace`` with the metadata written after its events, its identity, and its steps in time order."""
    if tail and prefix != "item":
        for key, value in _metadata_after_events(tail[0]).items():
            trace.metadata.setdefault(key, value)
    _identify(trace)
    trace.steps.sort(key=lambda step: step.ts)
    return trace


# -- one file on several processes ------------------------------------------------------------

#: A plain trace file from this size on is cut into ranges of events when workers are given.
SPLIT_MIN_BYTES = 32 * 1024 * 1024
#: The least bytes of events per range: more ranges than this gives cost more in processes than they save.
RANGE_MIN_BYTES = 16 * 1024 * 1024


def _event_ranges(path: Path, prefix: str, pieces: int) -> list[tuple[int, int | None]] | None:
    """Up to ``pieces`` ranges of the event array of a large plain trace (of
    :data:`RANGE_MIN_BYTES` or more each), as (start, end) offsets (the last one's end None: to
    the end of the array); None for a small or gzip file, or where no boundary between events is
    found near a cut."""
    from tprimat.trace.fastread import array_start, element_boundary

    try:
        size = path.stat().st_size
        if size < SPLIT_MIN_BYTES:
            return None
        with open_binary(path) as fh:
            if isinstance(fh, gzip.GzipFile):
                return None  # no offsets into compressed bytes
            first = start = array_start(fh, prefix)
            ranges: list[tuple[int, int | None]] = []
            # Cuts stay clear of the document's end, where the metadata after the events is.
            span = size - _TAIL - first
            pieces = min(pieces, span // RANGE_MIN_BYTES)
            if pieces < 2:
                return None
            for index in range(1, pieces):
                boundary = element_boundary(fh, first + span * index // pieces) if span > 0 else None
                if boundary is None or boundary[0] <= start:
                    return None
                end, following = boundary
                ranges.append((start, end))
                start = following
    except (OSError, ValueError):
        return None
    ranges.append((start, None))
    return ranges


def _read_range(job: tuple[Path, str, int, int | None]) -> tuple[RankTrace, list[bytes]]:
    """One range's events as a trace of their own (names numbered from 0), with the document's
    end for the last range."""
    from tprimat.trace.fastread import fast_events, range_events

    path, prefix, start, end = job
    trace = RankTrace(path=path)
    tail: list[bytes] = []
    with open(path, "rb") as fh:
        if end is None:
            _take(trace, fast_events(fh, prefix, tail, threaded=False, start=start))
        else:
            _take(trace, range_events(fh, start, end))
    return trace, tail


def _read_ranges(
    path: Path, prefix: str, metadata: dict[str, Any], ranges: list[tuple[int, int | None]], workers: int
) -> RankTrace:
    """The trace from its ranges, read on ``workers`` processes and joined in order."""
    from tprimat.workers import map_files

    parts = map_files(_read_range, [(path, prefix, start, end) for start, end in ranges], workers)
    trace = RankTrace(path=path, metadata=metadata)
    names: dict[str, int] = {}
    tail: list[bytes] = []
    for part, part_tail in parts:
        ids = [names.setdefault(name, len(names)) for name in part.names]
        trace.name_id.extend(map(ids.__getitem__, part.name_id))
        for ours, theirs in (
            (trace.ts, part.ts),
            (trace.dur, part.dur),
            (trace.code, part.code),
            (trace.stream, part.stream),
            (trace.correlation, part.correlation),
            (trace.launch_correlation, part.launch_correlation),
            (trace.launch_ts, part.launch_ts),
        ):
            ours.extend(theirs)
        trace.steps.extend(part.steps)
        trace.events += part.events
        tail = part_tail or tail
    trace.names.extend(names)
    return _finished(trace, prefix, tail)


def _as_int(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def rank_of(metadata: dict[str, Any], name: str) -> int | None:
    """The rank a trace belongs to: its ``distributedInfo.rank``, else the rank its file ``name`` shows."""
    info = metadata.get("distributedInfo")
    if isinstance(info, dict):
        rank = _as_int(info.get("rank"), -1)
        if rank >= 0:
            return rank
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def trace_rank(path: Path) -> int | None:
    """The rank of the trace file at ``path`` (see :func:`rank_of`), from its header only."""
    try:
        _, metadata = _read_head(path)
    except TraceFormatError:
        metadata = {}
    return rank_of(metadata, path.name)


def _identify(trace: RankTrace) -> None:
    """Rank, world size, vendor and device name from the metadata (rank from the file name as fallback)."""
    meta = trace.metadata
    trace.rank = rank_of(meta, trace.path.name)
    info = meta.get("distributedInfo")
    if isinstance(info, dict):
        world_size = _as_int(info.get("world_size"), -1)
        trace.world_size = world_size if world_size >= 0 else None
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        trace.device = props[0].get("name") or None
    if any(k in meta for k in ("roctracer_version", "hip_runtime_version", "hip_driver_version")):
        trace.vendor = "amd"
    elif any(k in meta for k in ("cupti_version", "cuda_runtime_version", "cuda_driver_version")):
        trace.vendor = "nvidia"
    elif trace.device:
        lowered = trace.device.lower()
        if any(k in lowered for k in ("nvidia", "tesla", "a100", "h100", "v100", "b200", "geforce")):
            trace.vendor = "nvidia"
        elif any(k in lowered for k in ("amd", "instinct", "radeon", "mi2", "mi3")):
            trace.vendor = "amd"


__all__ = [
    "ACTIVITY_CODES",
    "ProfilerStep",
    "RankTrace",
    "TraceFormatError",
    "iter_events",
    "open_binary",
    "read_trace",
]
