"""Read the log files of one result on every core, with exactly the events a serial read gives.

``tprimat parse`` reads many files (Primus's per-rank tree) or one large file
(a console log with every rank's lines).  Files are read by a pool of worker
processes and their events handed to the collector in file order.  Each file
is a stream of its own, but for the files of a rotated log, which go on from
the reader's state at the end of the file before.  A large file is cut into
byte ranges at the chunk boundaries a whole-file read uses
(:func:`tprimat.contract.logfile.chunk_starts`), so every range sees exactly the
chunks the serial read sees.  The reader's
state at the start of a range (start-up over, facts stated, the last
iteration and its interval, a line held over, triggers turned on) is guessed
by the worker: from the state at the end of the last range of the stream it
read itself (else from the start-up lines: the file's, or for a rotated file
its stream's), it reads the chunks just before the range (for a rotated
file: the end of the file before, unless the worker read that file's end).
The guess is checked against the true state at the end of the unit before;
when they differ the range is read again from the true state, so the result
never depends on the guess, only the speed.  Backend parsers that cannot
report their state (see :class:`tprimat.contract.logfile.LogFile`) get whole files.
"""

from __future__ import annotations

import collections
import itertools
import operator
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract import logfile
from tprimat.contract.logfile import LogFile, chunk_starts, count_lines
from tprimat.contract.records import ITERATION_FIELDS, REPEATED_LINE, IterationBlock, LineSources, is_memory_only
from tprimat.result import spill
from tprimat.result.packing import SealedBlock, pack, unpack
from tprimat.result.schema import IterationRecord
from tprimat.result.spill import memory_only_row
from tprimat.workers import can_fork, default_workers, fork_pool

#: Bytes per chunk of a file (see :class:`tprimat.contract.logfile.LogFile`); ranges start at chunk starts.
CHUNK_BYTES = logfile.CHUNK_BYTES
#: Below this many bytes in all, files are read in this process (a pool costs more than it saves).
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
#: How much of the file before a range is read to guess the reader's state at its start.
LEAD_BYTES = 1024 * 1024
#: The most read before a range when the file holds few iteration lines (then the guess may miss).
LEAD_MAX_BYTES = 64 * 1024 * 1024
#: The largest range a large file is cut into: the events of a range wait whole to be collected, so
#: this bounds the memory they take (each range after the first also costs a lead read).
RANGE_MAX_BYTES = 64 * 1024 * 1024
#: Units given to the workers ahead of the one being collected, per worker: the events of a unit
#: read wait as bytes until the collector takes them, so this bounds the memory they take where the
#: collector is slower than the workers (a TorchTitan log, whose every step is a new record).
AHEAD_PER_WORKER = 4
#: A file at least this large is cut into ranges: any file a pool may read (a 40 MB file read
#: whole by one worker, this process waiting, was slower than reading it here).
SPLIT_MIN_BYTES = PARALLEL_MIN_BYTES


class LogReadError(OSError):
    """A log file that cannot be read; ``path`` names it."""

    def __init__(self, path: Path, strerror: str) -> None:
        super().__init__(strerror)
        self.path = path
        self.strerror = strerror


@attrs.frozen(kw_only=True)
class _Unit:
    """One file, or one byte range of one, read by one worker."""

    path: Path
    source: str
    drop_last_line: bool
    chunk_bytes: int
    start: int = 0
    end: int | None = None  # None: to the end of the file
    chunk_index: int = 0  # the range's first chunk among the file's chunks
    first_lineno: int = 1  # the number of the range's first line
    starts: tuple[int, ...] = ()  # all chunk starts of the file (for ranges)
    # A rotated log: the file continues the stream of ``previous``, which began in ``stream_top``,
    # and/or the stream goes on in the next file (``continued``).
    previous: Path | None = None
    stream_top: Path | None = None
    continued: bool = False
    stream_index: int = 0  # the file's place in its stream (0: its first file)

    @property
    def resumes(self) -> bool:
        """Whether the reader starts from the state at the end of the unit before (a later range, a rotation)."""
        return bool(self.chunk_index) or self.previous is not None


@attrs.frozen
class _Spooled:
    """A range's events as a worker packed them, in a file of the read's spool directory: one
    piece after another, of these lengths in bytes."""

    path: str
    lengths: tuple[int, ...]


@attrs.frozen(kw_only=True)
class _Read:
    events: list[Any] | _Spooled  # _Spooled: packed by a worker for the collecting process (see _pack)
    final_state: Any
    assumed_state: Any = None  # the state a later range was read from
    lines: int | None = None  # the lines of a range, for the true numbers of the next one
    started: bool = False  # the reader had passed the start-up lines at its end


# The registry and backend, inherited by forked workers (never pickled).
_CONTEXT: dict[str, Any] = {}


def _parse(unit: _Unit, lines: LogFile) -> list[Any]:
    return list(_events(unit, lines))


def _events(unit: _Unit, lines: LogFile) -> Iterator[Any]:
    return _CONTEXT["registry"].parse_metrics(_CONTEXT["backend"], lines=lines, source=unit.source)


def _range(unit: _Unit, start: int, end: int | None, first_lineno: int, state: Any) -> LogFile:
    return LogFile(
        unit.path,
        drop_last_line=unit.drop_last_line and end is None,
        chunk_bytes=unit.chunk_bytes,
        start=start,
        end=end,
        first_lineno=first_lineno,
        resume_state=state,
        continued=unit.continued and end is None,
    )


def _read_unit(unit: _Unit) -> _Read | LogReadError:
    try:
        if not unit.resumes:
            lines = _range(unit, unit.start, unit.end, 1, None)
            events = _pack(_events(unit, lines))
            read = _Read(
                events=events, final_state=lines.final_state, lines=_lines_read(unit, lines), started=lines.started
            )
        else:
            read = _read_later_range(unit)
    except OSError as exc:
        return LogReadError(unit.path, exc.strerror or str(exc))
    if read.final_state is not None and read.started:
        # Kept only past the start-up lines: before their end, another worker may read start-up
        # lines (facts) that this state lacks and that the start-up state holds.
        end = (unit.stream_index + 1, 0) if unit.end is None else (unit.stream_index, unit.end)
        _LATEST[_stream_key(unit)] = (end, read.final_state)
    return read


#: Events per piece of a range a worker packs: the collecting process unpacks and takes in one
#: piece at a time, so that a range of many records is never all objects at once.  A block of
#: records counts as its records (see :func:`_pieces`).
PIECE_EVENTS = 4096


def _pieces(events: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``events`` in lists of about ``size`` records each (a block counts as the records it holds,
    any other event as one), so that a batch of blocks is no larger than one of records."""
    piece: list[Any] = []
    weight = 0
    for event in events:
        piece.append(event)
        weight += len(event) if type(event) is IterationBlock else 1
        if weight >= size:
            yield piece
            piece, weight = [], 0
    if piece:
        yield piece


def _pack(events: Iterable[Any]) -> _Spooled:
    """A range's events as the worker sends them: packed a piece at a time as they are read
    (see :mod:`tprimat.result.packing`) and written to a file in the spool directory.

    Neither process holds a long range's records as objects all at once, and a range read
    before the collector takes it waits on disk, not in the collector's memory: the memory
    of a parse does not depend on how many records a range holds or how far ahead the
    workers are.
    """
    lengths = []
    iterator = iter(events)
    with tempfile.NamedTemporaryFile(dir=_CONTEXT["spool"], prefix="range-", delete=False) as spooled:
        for piece in _pieces(iterator, PIECE_EVENTS):
            data = pack(piece, seal_records=spill.BLOCK_RECORDS)  # blocks go as the records' file keeps them
            spooled.write(data)
            lengths.append(len(data))
    return _Spooled(spooled.name, tuple(lengths))


def _unpacked(events: list[Any] | _Spooled) -> Iterator[list[Any]]:
    """A range's events, piece by piece as the worker packed them (its file is then deleted),
    or as read in this process."""
    if isinstance(events, _Spooled):
        with open(events.path, "rb") as spooled:
            os.unlink(events.path)
            for length in events.lengths:
                yield unpack(spooled.read(length))
    else:
        yield events


def _lines_read(unit: _Unit, lines: LogFile) -> int | None:
    """The lines of a range (None for a whole file: nothing follows it), as the reader counted them."""
    if unit.end is None:
        return None
    if lines.line_count is not None:
        return lines.line_count
    return count_lines(unit.path, unit.end, unit.start)  # a reader that does not report its count


def _guess(unit: _Unit, path: Path, start: int, end: int | None, state: Any) -> tuple[list[Any], LogFile]:
    """Read part of ``path`` (the unit's file, or an earlier file of its stream) from ``state``."""
    part = attrs.evolve(unit, path=path, drop_last_line=False, continued=True)
    lines = _range(part, start, end, unit.first_lineno, state)
    return _parse(part, lines), lines


def _iterations(events: list[Any]) -> set[int]:
    """The iterations of the records of ``events`` (and of their blocks) that are not memory lines alone."""
    found = {e.iteration for e in events if isinstance(e, IterationRecord) and not is_memory_only(e)}
    for event in events:
        if isinstance(event, IterationBlock):
            if None in event.column("step_time_s"):
                found.update(row[_ITERATION] for row in event.rows() if not memory_only_row(row))
            else:
                found.update(event.column("iteration"))
    return found


# A worker's start-up states, by (stream's first file, chunk size): see _start_up.  Each rotated
# file of a stream needs its stream's.
_START_UP: dict[tuple[Path, int], tuple[Any, int, bool]] = {}
# The state at the end of the last unit a worker read past the start-up lines, by stream as above:
# where that unit ended, as (its file's place in the stream, byte offset), and the state.  See
# _known_state.
_LATEST: dict[tuple[Path, int], tuple[tuple[int, int], Any]] = {}


def _stream_key(unit: _Unit) -> tuple[Path, int]:
    """A stream's key in a worker's caches: its first file and the chunk size."""
    return (unit.stream_top or unit.path, unit.chunk_bytes)


def _known_state(unit: _Unit) -> tuple[Any, int | None] | None:
    """The state at the end of the last unit of ``unit``'s stream that this worker read, when that
    unit came before ``unit``; with the chunk of ``unit``'s file where it ended (None: in an earlier file).

    A later range starts from it rather than from the start-up lines: it holds what only a
    line far before the range shows, such as the triggers an evaluation turns on (see
    ``PrimusLogParser``), which the chunks just before the range may not hold.
    """
    known = _LATEST.get(_stream_key(unit))
    if known is None:
        return None
    (index, offset), state = known
    if (index, offset) > (unit.stream_index, unit.start):
        return None
    if index < unit.stream_index:
        return state, None
    return state, unit.starts.index(offset) if offset else 0


def _start_up(unit: _Unit, top: Path, starts: tuple[int, ...], readable: int) -> tuple[Any, int, bool]:
    """The reader's state after the start-up lines of ``top``, read chunk by chunk until it has passed
    them; the chunk it got to; and whether those chunks held an iteration (the stream logs them)."""
    state, index, iterations = None, 0, False
    while index < readable:
        end = starts[index + 1] if index + 1 < len(starts) else None
        events, lines = _guess(unit, top, starts[index], end, state)
        iterations = iterations or bool(_iterations(events))
        state = lines.final_state
        index += 1
        if lines.started:
            break
    return state, index, iterations


def _read_later_range(unit: _Unit) -> _Read:
    """A range after the first, or a file that continues a rotated log: guess the reader's state
    at its start, then read it from there.

    The guess starts from the state at the end of the last unit of the same stream this
    worker read (:func:`_known_state`), or else from the start-up lines (at the top of the
    file, or of the stream's first file).  It then reads what comes just before the unit:
    the chunks before a range, the end of the file before a rotated one (nothing when the
    known state is that file's end).  Lines are numbered from the range's marker
    (:func:`_marker`); the events of the guess are thrown away, so their numbers do not matter.
    """
    known = _known_state(unit)
    if unit.chunk_index and unit.stream_top is None:
        if known is None:
            state, floor, _ = _start_up(unit, unit.path, unit.starts, unit.chunk_index - 1)
        else:
            state, floor = known[0], known[1] or 0
        assumed = _lead_chunks(unit, state, floor)
    else:
        key = _stream_key(unit)
        if key not in _START_UP:
            starts = tuple(chunk_starts(key[0], unit.chunk_bytes))
            _START_UP[key] = _start_up(unit, key[0], starts, len(starts))
        state, _, iterations = _START_UP[key]
        floor = None
        if known is not None:
            state, floor = known
        if unit.chunk_index:
            assumed = _lead_chunks(unit, state, floor or 0)
        elif floor == 0:  # the known state is the end of the file before
            assumed = state
        else:
            assumed = _lead_tail(unit, state, iterations)
    lines = _range(unit, unit.start, unit.end, unit.first_lineno, assumed)
    events = _pack(_events(unit, lines))
    return _Read(
        events=events,
        final_state=lines.final_state,
        assumed_state=assumed,
        lines=_lines_read(unit, lines),
        started=lines.started,
    )


def _lead_chunks(unit: _Unit, state: Any, floor: int) -> Any:
    """The state after the chunks just before a range, read from ``state`` (chunks before ``floor`` are read).

    As many chunks as hold two different iterations (more each time), up to LEAD_MAX_BYTES:
    the last iteration and its interval are part of the state.
    """
    span = max(1, -(-LEAD_BYTES // unit.chunk_bytes))
    while True:
        lead = max(floor, unit.chunk_index - span)
        events, lines = _guess(unit, unit.path, unit.starts[lead], unit.start, state)
        if len(_iterations(events)) >= 2 or lead == floor or span * unit.chunk_bytes >= LEAD_MAX_BYTES:
            return lines.final_state
        span *= 4


#: How much of the end of the file before a rotated one is read first to guess the state at its start.
TAIL_BYTES = 64 * 1024


def _lead_tail(unit: _Unit, state: Any, logs_iterations: bool) -> Any:
    """The state at the end of the file before a rotated one, read from ``state`` over its last lines.

    More each time until they hold two iteration lines (the last one and its interval), up to
    LEAD_MAX_BYTES.  In a stream whose start-up showed no iteration (a pipeline rank that logs
    none) a tail without any is enough; a wrong guess is only read again.
    """
    assert unit.previous is not None
    size = unit.previous.stat().st_size
    span = TAIL_BYTES
    while True:
        start = _line_start(unit.previous, size - span)
        events, lines = _guess(unit, unit.previous, start, None, state)
        seen = len(_iterations(events))
        if seen >= 2 or (seen == 0 and not logs_iterations) or start == 0 or span >= LEAD_MAX_BYTES:
            return lines.final_state
        span *= 4


def _line_start(path: Path, position: int) -> int:
    """The start of the first line that begins at or after ``position`` (0 for the top)."""
    if position <= 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(position - 1)
        handle.readline()  # the rest of the line that holds byte position - 1
        return handle.tell()


#: Line numbers of a later range start at its marker (see :func:`_marker`): the number of its
#: first line is not known until the ranges before it are read.  No log has this many lines.
MARK = 10**12


def _marker(index: int) -> int:
    """The number given to the first line of the ``index``-th unit when it is a later range.

    Half a ``MARK`` above ``index × MARK``, so that any number a reader gives while reading
    that range (or carries over from it, such as a held line's) maps back to it.
    """
    return index * MARK + MARK // 2


def _adopt(events: list[Any], firsts: dict[int, int], last: dict[Any, Any], *, marked: bool = True) -> None:
    """Make the events of a range, just received, this process's own, in place.

    * Events read with marker line numbers (``file:N``) get their true numbers (an iteration
      block's records in its ``source`` column); ``firsts`` maps a unit's index to the true
      number of its first line.  ``marked`` False: no unit of the read was numbered from a
      marker (none is a later range), so every number is true already and none is looked at.
    * A float of the first and the last record (of a block: its first or last row) equal to
      the same field's in the record before (``last`` holds them) becomes that same object.
      Within a batch the records share what the reader made them share (see
      :mod:`tprimat.result.packing`), as in a serial read; across ranges, a run's repeated
      figures (memory, loss scale) are then one object too.

    The events were made for this range alone (received from a worker, or read again here)
    and nothing else holds them yet, so setting fields of these frozen records is safe.
    """
    if marked:
        for index, event in enumerate(events):
            if event is REPEATED_LINE:
                continue
            if type(event) is SealedBlock:
                lines = _true_lines(event.lines, firsts)
                if lines is not None:
                    object.__setattr__(event, "lines", lines)
                    continue
                event = events[index] = event.block()  # lines of several ranges: each source on its own
            if type(event) is IterationBlock:
                _true_sources(event.column("source"), firsts)
                continue
            source = getattr(event, "source", None)
            if type(source) is str:
                true = _true_source(source, firsts)
                if true is not source:
                    object.__setattr__(event, "source", true)
    first = next((event for event in events if _holds_records(event)), None)
    if first is not None:
        _share_repeated(first, 0, last)
        final_event = next(event for event in reversed(events) if _holds_records(event))
        final = len(final_event) - 1 if type(final_event) is IterationBlock else 0
        if final_event is not first or final:
            _share_repeated(final_event, final, last)


def _holds_records(event: Any) -> bool:
    """Whether ``event`` is an iteration record or a block of at least one."""
    return type(event) is IterationRecord or (type(event) is IterationBlock and bool(event))


def _true_source(source: str, firsts: dict[int, int]) -> str:
    """``source`` (``file:N``) with its true line number if ``N`` is a marker's, else ``source``."""
    name, colon, number = source.rpartition(":")
    if colon and number.isdigit() and int(number) >= MARK // 2:
        return f"{name}:{_true_line(int(number), firsts)}"
    return source


def _true_line(line: int, firsts: dict[int, int]) -> int:
    """The true number of ``line`` if it is a marker's, else ``line``."""
    if line < MARK // 2:
        return line
    index = line // MARK
    return line - _marker(index) + firsts[index]


def _true_lines(lines: list[int], firsts: dict[int, int]) -> list[int] | None:
    """A sealed block's line numbers made true, when they are (or are all of one range's marker:
    then shifted at once); None when they are of several ranges' markers."""
    least, greatest = min(lines), max(lines)
    if greatest < MARK // 2:
        return lines  # true numbers already
    index = least // MARK
    if least >= MARK // 2 and greatest // MARK == index:
        return list(map((firsts[index] - _marker(index)).__add__, lines))
    return None


def _true_sources(sources: list[Any] | LineSources, firsts: dict[int, int]) -> None:
    """:func:`_true_source` of each of a block's ``sources``, in place.

    A block read from one range names one file, its line numbers all that range's markers:
    then the numbers are shifted at once, else each source is looked at on its own.
    """
    if not sources:
        return
    if isinstance(sources, LineSources):
        lines = _true_lines(sources.lines, firsts)
        sources.lines = lines if lines is not None else [_true_line(line, firsts) for line in sources.lines]
        return
    first = sources[0]
    if type(first) is str:
        name, colon, _ = first.rpartition(":")
        prefix = name + colon
        cut = len(prefix)
        if colon and set(map(type, sources)) == {str} and all(map(str.startswith, sources, itertools.repeat(prefix))):
            numbers = [s[cut:] for s in sources]
            if all(map(str.isdigit, numbers)) and all(map(str.isascii, numbers)):
                values = list(map(int, numbers))
                least, greatest = min(values), max(values)
                if greatest < MARK // 2:
                    return  # true numbers already
                index = least // MARK
                if least >= MARK // 2 and greatest // MARK == index:
                    shift = firsts[index] - _marker(index)
                    sources[:] = [f"{prefix}{value + shift}" for value in values]
                    return
    sources[:] = [s if type(s) is not str else _true_source(s, firsts) for s in sources]


#: The record's fields that may hold a float (their annotations are text: see ``from __future__``).
_FLOAT_FIELDS = tuple(f.name for f in attrs.fields(IterationRecord) if "float" in str(f.type) and f.name != "reported")
_float_values = operator.attrgetter(*_FLOAT_FIELDS)
_FLOAT_PLACES = tuple(ITERATION_FIELDS.index(name) for name in _FLOAT_FIELDS)
_REPORTED = ITERATION_FIELDS.index("reported")
_ITERATION = ITERATION_FIELDS.index("iteration")


#: Keys of ``last`` in :func:`_share_repeated`: the float fields and reported figures last seen.
_FLOATS_BEFORE, _REPORTED_BEFORE = "floats", "reported"
_UNSEEN = object()  # a field without a float yet: equal to no value


def _share_repeated(event: IterationRecord | IterationBlock, position: int, last: dict[Any, Any]) -> None:
    """A float of the record ``event`` (of a block: of its record at ``position``) equal to the
    last float (not 0.0) its field held in the records before becomes that object.  The fields
    are compared all at once; only equal ones are looked at."""
    if isinstance(event, IterationBlock):
        values = [event.columns[place][position] for place in _FLOAT_PLACES]
        reported = event.columns[_REPORTED][position]
    else:
        values = list(_float_values(event))
        reported = event.reported
    before = last.get(_FLOATS_BEFORE)
    if before is None:
        before = last[_FLOATS_BEFORE] = [_UNSEEN] * len(values)
    equal = list(map(operator.eq, values, before))
    if True in equal:
        for index in itertools.compress(range(len(equal)), equal):
            value, previous = values[index], before[index]
            # Not 0.0, which -0.0 equals; not an int equal to a float.
            if value is not previous and type(value) is float and value and type(previous) is float:
                values[index] = previous
                if isinstance(event, IterationBlock):
                    event.columns[_FLOAT_PLACES[index]][position] = previous
                else:
                    object.__setattr__(event, _FLOAT_FIELDS[index], previous)
    if False in equal:
        last[_FLOATS_BEFORE] = [
            value if type(value) is float and value else previous
            for value, previous in zip(values, before, strict=True)
        ]
    if reported:
        _share_reported(reported, last)


def _share_reported(reported: dict[str, Any], last: dict[Any, Any]) -> None:
    """:func:`_share_repeated` for a record's ``reported`` figures, in place."""
    reported_before = last.get(_REPORTED_BEFORE)
    if reported_before is None:
        reported_before = last[_REPORTED_BEFORE] = {}
    try:
        same = reported.items() & reported_before.items()
    except TypeError:  # a figure that is not hashable: nothing shared
        same = set()
    for key, value in same:
        previous = reported_before[key]
        if value is not previous and type(value) is float and value and type(previous) is float:
            reported[key] = previous
    reported_before.update((key, value) for key, value in reported.items() if type(value) is float and value)


def _resumable(registry: Any, backend: str, path: Path, source: str) -> bool:
    """Whether the backend's parser reports its state (an empty range shows it)."""
    probe = LogFile(path, start=0, end=0)
    try:
        for _ in registry.parse_metrics(backend, lines=probe, source=source):
            pass
    except Exception:  # a parser that reads text lines only
        return False
    return probe.final_state is not None


def _whole_files(
    files: Sequence[Path], sources: Sequence[str], cuts: Sequence[bool], continues: Sequence[bool], chunk_bytes: int
) -> list[_Unit]:
    """One unit per file, each tied to the files before and after it in its stream."""
    units: list[_Unit] = []
    top: Path | None = None
    place = 0
    for index, (path, source, cut) in enumerate(zip(files, sources, cuts, strict=True)):
        previous = files[index - 1] if continues[index] else None
        top = top if previous is not None else path
        place = place + 1 if previous is not None else 0
        units.append(
            _Unit(
                path=path,
                source=source,
                drop_last_line=cut,
                chunk_bytes=chunk_bytes,
                previous=previous,
                stream_top=top if previous is not None else None,
                continued=index + 1 < len(files) and continues[index + 1],
                stream_index=place,
            )
        )
    return units


def _units(
    registry: Any,
    backend: str,
    wholes: Sequence[_Unit],
    split_bytes: int,
    workers: int,
    resumable: bool | None,
) -> list[_Unit]:
    units: list[_Unit] = []
    for whole in wholes:
        path, source, chunk_bytes = whole.path, whole.source, whole.chunk_bytes
        size = path.stat().st_size
        if size < split_bytes:
            units.append(whole)
            continue
        if resumable is None:
            resumable = _resumable(registry, backend, path, source)
        starts = chunk_starts(path, chunk_bytes) if resumable else [0]
        # At least two ranges per worker (they finish at different times), and ranges of at
        # most RANGE_MAX_BYTES, so that the events waiting to be collected stay few.
        pieces = min(len(starts), max(2 * workers, -(-size // RANGE_MAX_BYTES)))
        if pieces < 2:
            units.append(whole)
            continue
        cut_at = sorted({starts[round(i * len(starts) / pieces)] for i in range(pieces)})
        for i, start in enumerate(cut_at):
            end = cut_at[i + 1] if i + 1 < len(cut_at) else None
            units.append(
                attrs.evolve(whole, start=start, end=end, chunk_index=starts.index(start), starts=tuple(starts))
            )
    return units


def read_events(
    registry: Any,
    backend: str,
    files: Sequence[Path],
    sources: Sequence[str],
    cuts: Sequence[bool],
    *,
    workers: int | None = None,
    chunk_bytes: int | None = None,
    split_bytes: int | None = None,
    parallel_min_bytes: int | None = None,
    continues: Sequence[bool] | None = None,
) -> Iterator[list[Any]]:
    """The events of ``files`` (read as ``sources``, last line dropped where ``cuts``), in order.

    Yields one list of events per file or range.  A file whose ``continues`` is true goes on
    with the stream of the file before it (a rotated log): its reader starts from the state at
    the end of that file, when the backend's parser reports its state (see
    :class:`tprimat.contract.logfile.LogFile`).  ``workers`` processes (default: the CPUs this
    process may use); 1, a small input, a single file too small to cut into ranges, a
    platform without ``fork`` or a process running other threads reads serially.  The sizes
    default to this module's constants.
    Raises :class:`LogReadError` for a file that cannot be read.
    """
    workers = default_workers() if workers is None else max(1, workers)
    chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    split_bytes = SPLIT_MIN_BYTES if split_bytes is None else split_bytes
    parallel_min_bytes = PARALLEL_MIN_BYTES if parallel_min_bytes is None else parallel_min_bytes
    try:
        total = sum(path.stat().st_size for path in files)
    except OSError as exc:
        raise LogReadError(Path(exc.filename or "?"), exc.strerror or str(exc)) from None
    continues = [False] * len(files) if continues is None else list(continues)
    resumable: bool | None = None
    if any(continues) and files:
        resumable = _resumable(registry, backend, files[0], sources[0])
        if not resumable:  # a parser that cannot carry its state: each file on its own
            continues = [False] * len(files)
    wholes = _whole_files(files, sources, cuts, continues, chunk_bytes)
    parallel = workers > 1 and can_fork() and total >= parallel_min_bytes
    units = _units(registry, backend, wholes, split_bytes, workers, resumable) if parallel else wholes
    if len(units) < 2:  # nothing to share between workers: a pool would only cost its packing
        state: Any = None
        for unit in wholes:
            lines = _range(unit, 0, None, 1, state if unit.previous is not None else None)
            try:
                yield from _stream(registry, backend, lines, unit.source)
            except OSError as exc:
                raise LogReadError(unit.path, exc.strerror or str(exc)) from None
            state = lines.final_state
        return
    yield from _read_in_pool(registry, backend, units, workers)


def _read_in_pool(registry: Any, backend: str, units: list[_Unit], workers: int) -> Iterator[list[Any]]:
    """The events of ``units`` read by a pool of ``workers`` forked processes, in unit order (see
    :func:`read_events`)."""
    spool = tempfile.mkdtemp(prefix="tprimat-events-")  # the workers' ranges, until collected
    _CONTEXT.update(registry=registry, backend=backend, spool=spool)
    _START_UP.clear()  # the workers, forked from here, start without start-up or latest states
    _LATEST.clear()
    size = min(workers, len(units))
    pool = fork_pool(size)
    try:
        state = None
        units = [attrs.evolve(u, first_lineno=_marker(i)) if u.chunk_index else u for i, u in enumerate(units)]
        marked = any(unit.chunk_index for unit in units)  # line numbers from a marker: see _adopt
        waiting = iter(units)
        jobs: collections.deque[tuple[_Unit, Future[_Read | LogReadError]]] = collections.deque()

        def submit_next() -> None:
            unit = next(waiting, None)
            if unit is not None:
                jobs.append((unit, pool.submit(_read_unit, unit)))

        for _ in range(AHEAD_PER_WORKER * size):
            submit_next()
        firsts: dict[int, int] = {}  # unit index -> the true number of its first line
        last_values: dict[Any, float] = {}  # see _adopt
        following = 1  # the true number of the line after the last range read
        for index in range(len(units)):
            unit, job = jobs.popleft()  # dropped once read, so that its events can be freed
            submit_next()
            read = job.result()
            del job
            if isinstance(read, LogReadError):
                raise read
            firsts[index] = following if unit.chunk_index else 1
            if unit.resumes and read.assumed_state != state:
                # The guess was wrong: read the range or file again from the true state.
                if isinstance(read.events, _Spooled):
                    os.unlink(read.events.path)
                lines = _range(unit, unit.start, unit.end, unit.first_lineno, state)
                events = list(registry.parse_metrics(backend, lines=lines, source=unit.source))
                read = _Read(events=events, final_state=lines.final_state, lines=_lines_read(unit, lines))
            pieces = read.events
            state = read.final_state
            if read.lines is not None:
                following = firsts[index] + read.lines
            del read
            for events in _unpacked(pieces):
                _adopt(events, firsts, last_values, marked=marked)
                yield events
        # Ended and joined here, not at exit: what follows may fork, which only a process
        # without other threads (the pool's) can do safely.
        pool.shutdown(wait=True)
    finally:
        # Ranges not started are cancelled; those under way are waited for, or they could write
        # into the spool directory while it is being removed and leave it behind.
        pool.shutdown(wait=True, cancel_futures=True)
        _CONTEXT.clear()
        shutil.rmtree(spool, ignore_errors=True)


def _stream(registry: Any, backend: str, lines: LogFile, source: str) -> Iterator[list[Any]]:
    """One file's events in batches, so that a serial read keeps memory flat."""
    empty = True
    for batch in _pieces(registry.parse_metrics(backend, lines=lines, source=source), PIECE_EVENTS):
        empty = False
        yield batch
    if empty:
        yield []
