"""Stream a Kineto (PyTorch profiler) Chrome-trace JSON file into compact per-rank arrays.

A trace is read once, in large blocks decoded by :mod:`tprimat.trace.fastread`,
and only what the analysis needs is kept, in typed arrays rather than dicts:

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
their names.  Top-level metadata (``distributedInfo``, ``deviceProperties`` (once ``computeProperties``),
the runtime versions) is read from the document's keys before and after
``traceEvents``.

Every trace is untrusted: the bounds it is read under are in
:mod:`tprimat.trace.limits`, and a file that is broken or past a bound is one
:class:`TraceFormatError` naming the file and what is wrong.  An event whose
fields have the wrong type is skipped and counted (:attr:`RankTrace.malformed`,
:func:`malformed_note`), unless nothing usable is left.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import attrs

from tprimat.errors import TprimatError
from tprimat.trace.categories import ACTIVITY_CATEGORIES, canonical_category
from tprimat.trace.limits import INT64, MAX_INFLATION, BrokenTrace, inflation_limit, int_problem

if TYPE_CHECKING:
    from tprimat.trace.fastread import EventArray

#: A profiler step's number: at most 18 digits (a 64-bit integer); a longer one is no step.
PROFILER_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d{1,18})(?!\d)")
#: A rank in a trace file's name: ``rank-3``, ``rank_3``, ``rank3``, Primus's ``rank[3]``.
_RANK_IN_NAME = re.compile(r"rank[-_\[]?(\d{1,9})(?!\d)", re.IGNORECASE)
_TAIL = 1 << 18  # bytes at the document's end kept clear of range cuts (the metadata after the events)
#: Longest device name kept from the metadata (a real one is under 64 characters).
MAX_DEVICE_CHARS = 256

#: Kineto categories of GPU-timeline activity, in a fixed order (index = stored code).
ACTIVITY_CODES: tuple[str, ...] = tuple(ACTIVITY_CATEGORIES)
_ACTIVITY_INDEX = {cat: i for i, cat in enumerate(ACTIVITY_CODES)}
_LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
#: What an event's category makes it, besides an activity (a code >= 0): a launch, a GPU-side
#: annotation (never a profiler step), or anything else.
_LAUNCH, _GPU_ANNOTATION, _OTHER = -1, -2, -3
#: Distinct category spellings remembered per read (a real trace has a few dozen).
_MAX_KINDS = 4096


def _kind(cat: object) -> int:
    """What an event of category ``cat`` is (an activity code, or ``_LAUNCH``/``_GPU_ANNOTATION``/``_OTHER``),
    in any spelling Kineto has used (see :data:`~tprimat.trace.categories.CATEGORY_ALIASES`)."""
    canonical = canonical_category(cat)
    if canonical is None:
        return _OTHER  # not a string: no category
    code = _ACTIVITY_INDEX.get(canonical)
    if code is not None:
        return code
    if canonical in _LAUNCH_CATEGORIES:
        return _LAUNCH
    return _GPU_ANNOTATION if canonical == "gpu_user_annotation" else _OTHER


class _Kinds(dict[Any, int]):
    """Category spelling -> :func:`_kind`, filled as spellings are met: one lookup an event."""

    def __missing__(self, cat: Any) -> int:
        kind = _kind(cat)
        if len(self) < _MAX_KINDS:
            self[cat] = kind
        return kind


class TraceFormatError(TprimatError):
    """A trace file that cannot be read: not JSON, truncated, not gzip, not a Chrome trace, or past a limit."""


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
    #: the file's format: "kineto", "nsys-sqlite", "rocprofv3-csv", "rocprofv3-json", "rocprofv3-rocpd"
    #: or "rocprofv3-pftrace" (see :func:`load_trace`)
    format: str = "kineto"
    #: host time in runtime calls, from a vendor profiler's API trace (:mod:`tprimat.trace.runtime_calls`)
    runtime_api: dict[str, Any] | None = None
    #: why a vendor profiler's file has no profiler steps, and what would give them (:mod:`tprimat.trace.nsys`)
    steps_note: str | None = None
    events: int = 0  # events read in traceEvents
    # events skipped for malformed fields: how many, the first (index in traceEvents, what is
    # wrong), and how many of them were GPU activity
    malformed: int = 0
    malformed_first: tuple[int, str] | None = None
    malformed_activities: int = 0

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else self.path.name


def append_ns_activities(trace: RankTrace, rows: Iterable[tuple[int, int, str, str, int, int]], origin_ns: int) -> None:
    """Append GPU activities timed in ns, ``(start, end, name, activity, stream, correlation)``, in order.

    Vendor profilers (rocprofv3, Nsight Systems) record ns since a clock's origin; times are kept
    in µs from ``origin_ns`` (the first activity), since µs since the epoch in a double would
    lose those nanoseconds.  ``activity`` is a Kineto category of :data:`ACTIVITY_CODES`.
    """
    names = {name: index for index, name in enumerate(trace.names)}
    known = len(names)
    for start, end, name, activity, stream, corr in rows:
        trace.ts.append((start - origin_ns) / 1000.0)
        trace.dur.append((end - start) / 1000.0)
        trace.name_id.append(names.setdefault(name, len(names)))
        trace.code.append(_ACTIVITY_INDEX[activity])
        trace.stream.append(stream)
        trace.correlation.append(corr)
    trace.names.extend(list(names)[known:])


def malformed_note(trace: RankTrace) -> str | None:
    """``"3 events with malformed fields skipped (first: event #12: ts is a string)"``, or None."""
    if not trace.malformed:
        return None
    index, problem = trace.malformed_first or (-1, "?")
    events = "event" if trace.malformed == 1 else "events"
    return f"{trace.malformed} {events} with malformed fields skipped (first: event #{index}: {problem})"


class Inflated:
    """A gzip stream that refuses to inflate past :func:`~tprimat.trace.limits.inflation_limit`
    of its compressed size, and says what is wrong with corrupt data (never a zlib traceback)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self.compressed = os.fstat(raw.fileno()).st_size
        self.limit = inflation_limit(self.compressed)
        self.inflated = 0

    def read(self, size: int = -1) -> bytes:
        room = self.limit + 1 - self.inflated
        try:
            data = self._gzip.read(room if size < 0 else min(size, room))
        except EOFError:
            raise BrokenTrace("the gzip data ends early: a truncated file?", bare=True) from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise BrokenTrace(f"corrupt gzip data: {_reason(exc)}", bare=True) from None
        self.inflated += len(data)
        if self.inflated > self.limit:
            raise BrokenTrace(
                f"the gzip data inflates to more than {self.limit} bytes, {MAX_INFLATION} times its "
                f"{self.compressed} compressed bytes (the limit for a gzip trace)",
                limit=True,
                bare=True,
            )
        return data

    def seek(self, offset: int) -> int:
        """Move forward to ``offset`` of the inflated text (read and dropped; the limit holds)."""
        if offset < self._gzip.tell():
            self._gzip.seek(0)
        while (ahead := offset - self._gzip.tell()) > 0:
            if not self.read(min(ahead, 1 << 20)):
                break
        return self._gzip.tell()

    def close(self) -> None:
        self._gzip.close()
        self._raw.close()

    def __enter__(self) -> Inflated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_binary(path: Path) -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently gunzipping (within the limit) when it starts
    with the gzip magic."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
        head = raw.peek(2)[:2]
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot open trace: {exc.strerror or exc}") from None
    if head == b"\x1f\x8b":
        return Inflated(raw)  # type: ignore[return-value]
    return raw


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


@attrs.frozen
class TraceHead:
    """Where a trace's event array is: its prefix (``"traceEvents.item"`` or ``"item"``), the
    metadata before it, and the offset of the byte after its ``[``."""

    prefix: str
    metadata: dict[str, Any]
    start: int


def read_trace_head(path: Path) -> TraceHead:
    """The metadata written before the event array, and where the array starts."""
    from tprimat.trace.fastread import read_head

    try:
        with open_binary(path) as fh:
            return TraceHead(*read_head(fh))
    except BrokenTrace as exc:
        raise TraceFormatError(f"{path}: {exc.in_head()}") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror or exc}") from None


def read_trace(path: str | Path, workers: int = 1) -> RankTrace:
    """Read one rank's trace file (plain or gzip JSON), streaming.

    Events are decoded in large typed batches (:mod:`tprimat.trace.fastread`).  With
    ``workers`` above 1, a large plain file is cut into that many ranges of its events, read
    by as many processes and joined in order (:func:`_read_ranges`): the same arrays as one
    process reads.  A broken file, or one past a limit, raises :class:`TraceFormatError`.
    """
    trace = read_split_or_whole(Path(path), workers, _read_ranges, _read_whole)
    check_usable(trace)
    return trace


_Read = TypeVar("_Read")


def read_split_or_whole(
    path: Path,
    workers: int,
    read_ranges: Callable[[Path, TraceHead, list[tuple[int, int | None]], int], _Read],
    read_whole: Callable[[Path, TraceHead], _Read],
) -> _Read:
    """A trace read by ``read_ranges`` on ``workers`` processes where it can be cut into ranges of
    its events (:func:`event_ranges`), else, or when that fails, by ``read_whole`` (the same
    arrays, or the precise error).  :func:`read_trace` and :func:`tprimat.trace.opread.read_ops`
    read so."""
    head = read_trace_head(path)
    if workers > 1:
        ranges = event_ranges(path, head, workers)
        if ranges is not None:
            try:
                return read_ranges(path, head, ranges, workers)
            except Exception:  # noqa: BLE001 - read whole below: the same arrays, or the precise error
                pass
    return read_whole(path, head)


@contextmanager
def trace_events(
    path: Path, head: TraceHead, after: dict[str, Any], array_type: type[EventArray] | None = None
) -> Iterator[Generator[Any, None, None]]:
    """The events of the whole trace at ``path`` (plain or gzip), streamed, for the ``with`` block.

    The readers of this package (:func:`read_trace`, :func:`tprimat.trace.opread.read_ops`,
    :mod:`tprimat.trace.critical_path`) all read a file so: ``array_type`` is the
    :class:`~tprimat.trace.fastread.EventArray` that decodes the fields they keep, ``after``
    receives the document's keys after the events.  A broken or unreadable file, found while
    the block reads the events, is a :class:`TraceFormatError` naming the file.
    """
    from tprimat.trace import fastread

    try:
        with open_binary(path) as fh:
            threaded = isinstance(fh, Inflated)
            array = array_type or fastread.EventArray
            events = fastread.fast_events(fh, head.prefix, after, threaded=threaded, start=head.start, array_type=array)
            try:
                yield events
            finally:
                events.close()  # the reading thread ends before the file closes
    except BrokenTrace as exc:
        raise TraceFormatError(f"{path}: {exc}") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror or exc}") from None


def _read_whole(path: Path, head: TraceHead) -> RankTrace:
    trace = RankTrace(path=path, metadata=dict(head.metadata))
    after: dict[str, Any] = {}
    with trace_events(path, head, after) as events:
        _take(trace, events)
    return finish_trace(trace, after)


#: How many bytes from a file's start (inflated) tell its format.
SNIFF_BYTES = 4096


def sniff_format(path: str | Path) -> str:
    """A profile's format from its first bytes: ``"rocprofv3-rocpd"`` (an SQLite database with
    rocprofv3's ``rocpd_`` tables, told by opening it), ``"nsys-sqlite"`` (any other SQLite
    database), ``"rocprofv3-csv"``, ``"rocprofv3-json"``, ``"rocprofv3-pftrace"`` (a Perfetto
    protobuf, :func:`~tprimat.trace.pftrace.sniff_pftrace`) or ``"kineto"`` (anything else)."""
    from tprimat.trace.rocprof import sniff_csv
    from tprimat.trace.sqlitefile import SQLITE_MAGIC

    head = _head_bytes(Path(path))  # nothing where unreadable: the Kineto reader says precisely what is wrong
    if head.startswith(SQLITE_MAGIC):
        from tprimat.trace.rocpd import is_rocpd

        return "rocprofv3-rocpd" if is_rocpd(Path(path)) else "nsys-sqlite"
    if sniff_csv(head) is not None:
        return "rocprofv3-csv"
    if b'"rocprofiler-sdk-tool"' in head:
        return "rocprofv3-json"
    from tprimat.trace.pftrace import sniff_pftrace

    if sniff_pftrace(head):
        return "rocprofv3-pftrace"
    return "kineto"


#: What each format is called in notes and messages.
FORMAT_NAMES = {
    "kineto": "PyTorch profiler (Kineto) trace",
    "nsys-sqlite": "Nsight Systems export",
    "rocprofv3-csv": "rocprofv3 trace",
    "rocprofv3-json": "rocprofv3 JSON output",
    "rocprofv3-rocpd": "rocprofv3 database (rocpd)",
    "rocprofv3-pftrace": "rocprofv3 Perfetto trace",
}

#: File names a directory search looks at; the content then tells the format.
_KINETO_NAMES = (".json", ".json.gz")
_NSYS_NAMES = (".sqlite", ".sqlite.gz")
_CSV_NAMES = (".csv", ".csv.gz")
_ROCPD_NAMES = (".db", ".db.gz")
_PFTRACE_NAMES = (".pftrace", ".pftrace.gz")


def traces_in(directory: Path) -> list[Path]:
    """The profiles in ``directory`` and below, one per rank or profiling run, sorted.

    Kineto traces and rocprofv3 JSON outputs (``*.json``, ``*.json.gz``: the content tells
    which), Nsight Systems SQLite exports (``*.sqlite``,
    ``*.sqlite.gz`` that are SQLite databases), rocprofv3 databases (``*.db``, ``*.db.gz`` with
    rocprofv3's ``rocpd_`` tables, :mod:`tprimat.trace.rocpd`) and rocprofv3 kernel traces (``*.csv``,
    ``*.csv.gz`` with a kernel trace's columns; the memory copy and HIP API files of the same
    run are read with it, :mod:`tprimat.trace.rocprof`, so they are not listed apart), and
    rocprofv3 Perfetto traces (``*.pftrace``, ``*.pftrace.gz`` that are Perfetto protobufs).
    """
    from tprimat.trace.rocprof import KERNEL, sniff_csv

    found = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = path.name
        if name.endswith(_KINETO_NAMES):
            found.append(path)
        elif name.endswith(_NSYS_NAMES) and sniff_format(path) in ("nsys-sqlite", "rocprofv3-rocpd"):
            found.append(path)
        elif name.endswith(_ROCPD_NAMES) and sniff_format(path) == "rocprofv3-rocpd":
            found.append(path)
        elif name.endswith(_CSV_NAMES) and sniff_csv(_head_bytes(path)) == KERNEL:
            found.append(path)
        elif name.endswith(_PFTRACE_NAMES) and sniff_format(path) == "rocprofv3-pftrace":
            found.append(path)
    return found


def _head_bytes(path: Path) -> bytes:
    """The first :data:`SNIFF_BYTES` of ``path`` (inflated), or nothing where it cannot be read."""
    try:
        with open_binary(path) as fh:
            return fh.read(SNIFF_BYTES)
    except (BrokenTrace, OSError, TraceFormatError):
        return b""


def load_trace(path: str | Path, workers: int = 1, nvtx_step: str | None = None) -> RankTrace:
    """Read a profile of one rank in whichever format its content shows (:func:`sniff_format`).

    An SQLite database with rocprofv3's ``rocpd_`` tables is rocprofv3's database
    (:mod:`tprimat.trace.rocpd`), any other an Nsight Systems export (:mod:`tprimat.trace.nsys`); a CSV file
    with rocprofv3's columns a rocprofv3 trace (:mod:`tprimat.trace.rocprof`); a JSON
    document of rocprofv3 (``"rocprofiler-sdk-tool"``) its JSON output
    (:mod:`tprimat.trace.rocprof_json`); a Perfetto protobuf rocprofv3's ``pftrace`` output
    (:mod:`tprimat.trace.pftrace`); anything else a Kineto trace (:func:`read_trace`).
    ``nvtx_step``: the NVTX ranges that are an Nsight Systems export's profiler steps
    (:func:`~tprimat.trace.nsys.read_nsys`).
    """
    from tprimat.trace.nsys import read_nsys
    from tprimat.trace.rocprof import read_rocprof_csv

    path = Path(path)
    kind = sniff_format(path)
    if kind == "rocprofv3-rocpd":
        from tprimat.trace.rocpd import read_rocpd

        return read_rocpd(path)
    if kind == "nsys-sqlite":
        return read_nsys(path, nvtx_step=nvtx_step)
    if kind == "rocprofv3-csv":
        return read_rocprof_csv(path)
    if kind == "rocprofv3-json":
        from tprimat.trace.rocprof_json import read_rocprof_json

        return read_rocprof_json(path)
    if kind == "rocprofv3-pftrace":
        from tprimat.trace.pftrace import read_pftrace

        return read_pftrace(path)
    return read_trace(path, workers=workers)


def check_usable(trace: RankTrace) -> None:
    """Refuse a trace whose malformed events leave nothing to analyse, rather than analyse nothing."""
    if not trace.malformed:
        return
    index, problem = trace.malformed_first or (-1, "?")
    first = f"first: event #{index}: {problem}"
    if trace.malformed == trace.events:
        raise TraceFormatError(f"{trace.path}: no usable events: all {trace.events} have malformed fields ({first})")
    if not len(trace.ts) and trace.malformed_activities:
        raise TraceFormatError(
            f"{trace.path}: no usable GPU activity: all {trace.malformed_activities} GPU activities have "
            f"malformed fields ({first})"
        )


def _ints(args: Any) -> tuple[int, int, str | None]:
    """(stream, correlation, what is wrong) of a GPU activity's ``args`` (-1: not given)."""
    if args is None:
        return -1, -1, None
    stream, correlation = args.stream, args.correlation
    problem = int_problem("args.stream", stream) or int_problem("args.correlation", correlation)
    return (-1 if stream is None else stream), (-1 if correlation is None else correlation), problem


def _take(trace: RankTrace, stream: Iterator[Any]) -> None:
    """Add the events of ``stream`` to ``trace``'s arrays (names interned in order of appearance).

    The events are :class:`~tprimat.trace.fastread.Event` (fields of the right types) or
    :class:`~tprimat.trace.fastread.Malformed` (skipped and counted).
    """
    from tprimat.trace.fastread import Event

    names: dict[str, int] = {name: index for index, name in enumerate(trace.names)}
    name_list = trace.names
    ts_a, dur_a, nid_a, code_a = trace.ts, trace.dur, trace.name_id, trace.code
    stream_a, corr_a = trace.stream, trace.correlation
    lcorr_a, lts_a = trace.launch_correlation, trace.launch_ts
    kinds = _Kinds()
    low, high = INT64
    events = trace.events
    try:
        for event in stream:
            events += 1
            if type(event) is not Event:
                count_skipped(trace, events - 1, event.problem, event.activity)
                continue
            code = kinds[event.cat]
            if code >= 0:
                dur = event.dur
                ts = event.ts
                if dur is None or ts is None or (event.ph is not None and event.ph != "X"):
                    continue
                args = event.args
                if args is None:
                    stream_id = correlation = -1
                else:
                    stream_id, correlation = args.stream, args.correlation
                    if (
                        type(stream_id) is not int
                        or type(correlation) is not int
                        or not (low <= stream_id <= high and low <= correlation <= high)
                    ):
                        stream_id, correlation, problem = _ints(args)
                        if problem:
                            count_skipped(trace, events - 1, problem, True)
                            continue
                name = event.name or ""
                nid = names.get(name)
                if nid is None:
                    nid = names[name] = len(name_list)
                    name_list.append(name)
                ts_a.append(ts)
                dur_a.append(dur)
                nid_a.append(nid)
                code_a.append(code)
                stream_a.append(stream_id)
                corr_a.append(correlation)
            elif code == _LAUNCH:
                args = event.args
                if args is not None and args.correlation is not None and event.ts is not None:
                    correlation = args.correlation
                    if type(correlation) is not int or not low <= correlation <= high:
                        count_skipped(trace, events - 1, int_problem("args.correlation", correlation) or "?", False)
                        continue
                    lcorr_a.append(correlation)
                    lts_a.append(event.ts)
            elif code != _GPU_ANNOTATION:
                host_name = event.name
                if host_name and host_name.startswith("ProfilerStep"):
                    match = PROFILER_STEP.match(host_name)
                    if match and event.dur is not None and event.ts is not None:
                        trace.steps.append(ProfilerStep(int(match.group(1)), event.ts, event.dur))
    finally:
        trace.events = events


def count_skipped(trace: RankTrace, index: int, problem: str, activity: bool) -> None:
    """Count event ``index`` of ``trace`` as skipped for ``problem``."""
    trace.malformed += 1
    trace.malformed_activities += activity
    if trace.malformed_first is None:
        trace.malformed_first = (index, problem)


def finish_trace(trace: RankTrace, after: dict[str, Any]) -> RankTrace:
    """``trace`` with the metadata written after its events, its identity, and its steps in time order."""
    for key, value in after.items():
        trace.metadata.setdefault(key, value)
    _identify(trace)
    trace.steps.sort(key=lambda step: step.ts)
    return trace


# -- one file on several processes ------------------------------------------------------------

#: A plain trace file from this size on is cut into ranges of events when workers are given.
SPLIT_MIN_BYTES = 32 * 1024 * 1024
#: The least bytes of events per range: more ranges than this gives cost more in processes than they save.
RANGE_MIN_BYTES = 16 * 1024 * 1024


def event_ranges(path: Path, head: TraceHead | str, pieces: int) -> list[tuple[int, int | None]] | None:
    """Up to ``pieces`` ranges of the event array of a large plain trace (of
    :data:`RANGE_MIN_BYTES` or more each), as (start, end) offsets (the last one's end None: to
    the end of the array); None for a small or gzip file, or where no boundary between events is
    found near a cut.  ``head``: where the array starts (:func:`read_trace_head`; its prefix alone
    reads it)."""
    from tprimat.trace.fastread import element_boundary

    try:
        size = path.stat().st_size
        if size < SPLIT_MIN_BYTES:
            return None
        if isinstance(head, str):
            head = read_trace_head(path)
        with open_binary(path) as fh:
            if isinstance(fh, Inflated):
                return None  # no offsets into compressed bytes
            first = start = head.start
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
    except (OSError, ValueError, TraceFormatError):
        return None
    ranges.append((start, None))
    return ranges


@contextmanager
def range_events(
    job: tuple[Path, str, int, int | None], after: dict[str, Any], array_type: type[EventArray] | None = None
) -> Iterator[Iterator[Any]]:
    """The events of one range of a plain trace's event array, for the ``with`` block.

    ``job``: the file, the array's prefix, and the range's first and end byte
    (:func:`event_ranges`; an end of None: to the array's end, whose document keys after the
    events go to ``after``).  The parallel readers read each range so; ``array_type`` as for
    :func:`trace_events`.
    """
    from tprimat.trace import fastread

    path, prefix, start, end = job
    array = array_type or fastread.EventArray
    with open(path, "rb") as fh:
        if end is None:
            yield fastread.fast_events(fh, prefix, after, threaded=False, start=start, array_type=array)
        else:
            yield fastread.range_events(fh, start, end, array_type=array)


def _read_range(job: tuple[Path, str, int, int | None]) -> tuple[RankTrace, dict[str, Any]]:
    """One range's events as a trace of their own (names numbered from 0, events counted from
    0), with the document's keys after the events for the last range."""
    trace = RankTrace(path=job[0])
    after: dict[str, Any] = {}
    with range_events(job, after) as events:
        _take(trace, events)
    return trace, after


def _read_ranges(path: Path, head: TraceHead, ranges: list[tuple[int, int | None]], workers: int) -> RankTrace:
    """The trace from its ranges, read on ``workers`` processes and joined in order."""
    from tprimat.workers import map_files

    parts = map_files(_read_range, [(path, head.prefix, start, end) for start, end in ranges], workers)
    trace = RankTrace(path=path, metadata=dict(head.metadata))
    names: dict[str, int] = {}
    after: dict[str, Any] = {}
    for part, part_after in parts:
        append_range(trace, part, names)
        after = part_after or after
    trace.names.extend(names)
    return finish_trace(trace, after)


def append_range(trace: RankTrace, part: RankTrace, names: dict[str, int]) -> None:
    """Add ``part``, the trace of the next range of a file's events, to the end of ``trace``.

    Both parallel readers (:func:`read_trace`, :func:`tprimat.trace.opread.read_ops`) join
    their ranges so.  A part numbers its names and events from 0; ``names`` (name -> id) is
    the joined numbering, grown here (the caller sets ``trace.names`` from it once all parts
    are in); the part's first malformed event is placed after the events before it.
    """
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
    if part.malformed_first is not None and trace.malformed_first is None:
        index, problem = part.malformed_first
        trace.malformed_first = (trace.events + index, problem)
    trace.malformed += part.malformed
    trace.malformed_activities += part.malformed_activities
    trace.events += part.events


def _as_int(value: Any, default: int) -> int:
    """``value`` as a non-negative integer below 2^31 (an integer, or a string of digits), else ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 9:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value < 2**31:
        return value
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
        metadata = read_trace_head(path).metadata
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
    if props is None:  # the name before Kineto's June 2021 refactor
        props = meta.get("computeProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        device = props[0].get("name")
        if isinstance(device, str) and device.strip():
            trace.device = device if len(device) <= MAX_DEVICE_CHARS else device[: MAX_DEVICE_CHARS - 1] + "…"
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
    "load_trace",
    "malformed_note",
    "open_binary",
    "read_trace",
    "sniff_format",
]
