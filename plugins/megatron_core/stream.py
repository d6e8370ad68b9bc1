"""Streaming a log through a line parser: only the lines that can matter are read.

A Megatron-core log runs to millions of lines, nearly all of which no parser
wants.  :func:`iter_events` hands a parser (a
:class:`~tprimat.plugins.megatron.logparse.MegatronLogParser` or any object with
the same ``feed``/``triggers``/``finish`` protocol, such as the NeMo 2 reader)
only the lines holding one of its trigger substrings, searching the bytes of a
:class:`~tprimat.contract.LogFile` before decoding them.  Every backend built
on Megatron core streams its logs through it.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from tprimat.contract import newline_count
from tprimat.contract.records import IterationRecord, ParseIssue, RankPeak
from tprimat.plugins.megatron_core import compiled
from tprimat.plugins.megatron_core.lines import Event


def iter_events(parser: Any, lines: Iterable[str]) -> Iterator[Event]:
    """Run ``parser`` over ``lines`` lazily: each event is yielded as soon as its line is read.

    Most lines of a training log hold nothing a parser wants; a line is only
    handed to ``parser.feed`` when it contains one of the parser's trigger
    substrings, or when the parser holds an unfinished line.  Start-up lines
    (arguments, versions) are only looked for until training starts: from
    the line that sets ``parser.started`` on, ``parser.running_triggers``
    replace ``parser.triggers``.  When ``lines`` can also be read as byte chunks (a
    :class:`tprimat.contract.LogFile`), the triggers are searched in the bytes
    and only matching lines are decoded; the events are the same, except
    that start-up lines are looked for in the first :data:`STARTUP_BYTES`
    of a file only, and that a parser with a ``fast_lane`` (see
    ``tprimat.plugins.megatron.fastlane``) gives a run of iteration lines it
    can read at once as one ``IterationBlock``, the records it stands for.
    """
    chunks = getattr(lines, "byte_chunks", None)
    if callable(chunks):
        # A range of a file (see tprimat.contract.LogFile): its first line's number, where it
        # starts, and the reader's state there; the state at its end is handed back.
        resume = getattr(lines, "resume_state", None)
        if resume is not None:
            parser.resume(resume)
        before = getattr(lines, "first_lineno", 1) - 1
        counted, offset = yield from _iter_chunks(parser, chunks(), before, getattr(lines, "start", 0))
        yield from _rank_peaks(parser)
        log: Any = lines  # a LogFile range: it takes back the reader's state at its end
        if hasattr(log, "final_state") and hasattr(parser, "state"):
            log.final_state = parser.state()
            # Past the start-up lines: training started, or no more are looked for from here on.
            log.started = parser.started or offset >= STARTUP_BYTES
            log.line_count = counted - before
        if not getattr(lines, "at_end", True):
            return  # the file goes on in the next range
    else:
        yield from _iter_lines(parser, lines)
        yield from _rank_peaks(parser)
    try:
        yield from parser.finish()
    except Exception as exc:
        yield ParseIssue(source=parser.where(0), message=f"end of log not understood ({type(exc).__name__})")


def _rank_peaks(parser: Any) -> list[RankPeak]:
    """The memory peaks per rank a parser read (see ``MegatronLogParser.rank_peaks``), if it reads them."""
    peaks = getattr(parser, "rank_peaks", None)
    return peaks() if peaks is not None else []


def _feed(parser: Any, line: str, lineno: int) -> list[Event] | None:
    try:
        return parser.feed(line, lineno)
    except Exception as exc:  # a parser bug must not lose the rest of the log
        return [ParseIssue(source=parser.where(lineno), message=f"line not understood ({type(exc).__name__}); skipped")]


#: The events of a line that gave none, as :meth:`remember` is told them (never changed).
_NO_EVENTS: list[Event] = []


def _check_triggers(triggers: tuple[str, ...]) -> None:
    if not 1 <= len(triggers) <= 10 or not all(t.isascii() and t for t in triggers):
        raise ValueError("between 1 and 10 non-empty ASCII trigger strings")


def _triggers_now(parser: Any) -> tuple[str, ...]:
    """What ``parser`` looks for at this point of its stream (see :func:`iter_events`)."""
    return parser.running_triggers if parser.started else parser.triggers


def _iter_lines(parser: Any, lines: Iterable[str]) -> Iterator[Event]:
    numbered = enumerate(lines, 1)
    changed = True
    while changed:  # again with the triggers a line changed: training started, or more are looked for
        changed = False
        triggers = _triggers_now(parser)
        _check_triggers(triggers)
        t1, t2, t3, t4, t5, t6, t7, t8, t9, t10 = tuple(triggers) + (triggers[0],) * (10 - len(triggers))
        pending = parser.holds_line()
        # One loop per number of triggers: the test of a line that holds nothing is the cost
        # of parsing a log, so it is kept to the fewest substring scans.
        if len(triggers) <= 2:
            for lineno, line in numbered:
                if not pending and t1 not in line and t2 not in line:
                    continue
                events = _feed(parser, line, lineno)
                pending = parser.holds_line()
                if events:
                    yield from events
                if _triggers_now(parser) is not triggers:
                    changed = True
                    break
        else:
            for lineno, line in numbered:
                if not (
                    pending
                    or t1 in line
                    or t2 in line
                    or t3 in line
                    or t4 in line
                    or t5 in line
                    or t6 in line
                    or t7 in line
                    or t8 in line
                    or t9 in line
                    or t10 in line
                ):
                    continue
                events = _feed(parser, line, lineno)
                pending = parser.holds_line()
                if events:
                    yield from events
                if _triggers_now(parser) is not triggers:
                    changed = True
                    break


_LONE_CR = re.compile(rb"\r(?!\n)")
_ANY_NEWLINE = re.compile(rb"\r\n|\r|\n")


#: Start-up lines (arguments, versions) are looked for in this much of a file at most, also
#: in a file that never reaches an iteration line (a rank that does not log them).
STARTUP_BYTES = 64 * 1024 * 1024


#: Bytes that can precede "iteration" in a line whose copies are recognised by their bytes: none
#: of them can be part of a terminal colour code, so the text from "iteration" on reads the
#: same whatever came before it.
_REPEAT_SAFE_BEFORE = frozenset(b" \t|:])>,")


def repeat_key(line: bytes) -> bytes | None:
    """The bytes that decide what an iteration or memory line reads as, or None if they cannot be told.

    Two lines with the same key give the same record but for where they were
    read and their timestamp: the key is the line from the byte before the
    first "iteration" (or before the "(after N " of a memory line) on, plus
    whether the line holds colour codes (which are stripped from the whole
    line or not at all).  Lines whose start could hold an earlier iteration
    match (a "|") or whose key may follow a colour code get no key.
    """
    position = line.find(b"iteration")
    if position <= 0:
        return None
    after = line.rfind(b"(after ", 0, position)
    if after > 0 and line[after + 7 : position - 1].isdigit() and line[position - 1] == 32:
        position = after
    if line[position - 1] not in _REPEAT_SAFE_BEFORE or line.find(b"|", 0, position) >= 0:
        return None
    coloured = b"\x1b" in line or b"[0m" in line
    return line[position - 1 :] + (b"\x01" if coloured else b"\x00")


def _iter_chunks(
    parser: Any, chunks: Iterable[bytes], before: int = 0, offset: int = 0
) -> Generator[Event, None, tuple[int, int]]:
    # before: lines in earlier chunks; offset: bytes in earlier chunks.  Returns the lines read and
    # before, and the bytes read and before (where the next chunk would start).
    copy_of = getattr(parser, "copy_of", None)
    remember = getattr(parser, "remember", None)
    fast = getattr(parser, "fast_lane", None)  # reads runs of iteration lines at once, if it can
    lane = _Lane(fast)
    holds_line = parser.holds_line
    is_clean = parser.state_is_clean if remember is not None else None
    for chunk in chunks:
        started = parser.started or offset >= STARTUP_BYTES
        offset += len(chunk)
        pieces = _lone_cr_lines(chunk)
        if pieces is not None:
            yield from _iter_lines_from(parser, pieces, before)
            before += len(pieces)
            continue
        triggers = parser.running_triggers if started else parser.triggers
        _check_triggers(triggers)
        spans = _trigger_lines(chunk, triggers)
        index, last = 0, len(spans)
        counted_to, counted = 0, before  # `counted` lines lie before offset `counted_to`
        fed_to = 0  # bytes already given to the parser
        held = holds_line()
        while True:
            if held:
                if fed_to >= len(chunk):
                    break
                start = fed_to  # an unfinished line: the next line goes in whatever it holds
                end = chunk.find(b"\n", start)
                end = len(chunk) if end == -1 else end + 1
                line = chunk[start:end]
                key = None
            else:
                if index == last:
                    break
                start, end = spans[index]
                index += 1
                if start < fed_to:
                    continue  # read already, as the continuation of a held line
                line = chunk[start:end]
                key = None
                if copy_of is not None:
                    copied, key = copy_of(line)
                    if copied is not None:
                        fed_to = end
                        if copied:
                            yield from copied
                        continue
                if (run := lane.run(chunk, spans, index - 1, counted, counted_to)) is not None:
                    block, index, counted, counted_to, fed_to = run
                    yield block  # a run of iteration lines, read at once
                    continue
            counted += chunk.count(b"\n", counted_to, start)  # a line or two: no faster way
            counted_to = start
            clean_before = not held and is_clean is not None and is_clean()
            events = _feed(parser, line.decode("utf-8", "replace"), counted + 1)
            fed_to = end
            if remember is not None:
                _remember(parser, fast, key, events, clean_before, line)
            if events:
                yield from events
            held = holds_line()
            if (started or parser.started) and parser.running_triggers is not triggers:
                # Training started with this line, or the line turned on more triggers (see
                # PrimusLogParser): the rest of the chunk is searched for the running ones.
                started = True
                triggers = parser.running_triggers
                _check_triggers(triggers)
                spans = [span for span in _trigger_lines(chunk, triggers) if span[0] >= fed_to]
                index, last = 0, len(spans)
        # Lines of this chunk: those counted up to the last line read, and the rest.
        before = counted + newline_count(chunk, counted_to) + (0 if chunk.endswith(b"\n") else 1)
    return before, offset


#: The most lines read one by one before the fast lane is tried again (see `_Rest`).
_LONGEST_REST = 64


class _Lane:
    """A parser's fast lane (``fast_lane``, or None), asked to read a run from a line on.

    After a line it could not start a run at, the next ``resting`` lines are read one by one
    without asking it, twice as many after each miss (up to :data:`_LONGEST_REST`): a log whose
    iteration lines come one at a time (another rank's copy after each, start-up lines) then
    costs the lane nearly nothing, and a dense log's runs are long.
    """

    __slots__ = ("fast", "rest", "resting")

    def __init__(self, fast: Any) -> None:
        self.fast = fast
        self.rest, self.resting = 1, 0

    def run(
        self, chunk: bytes, spans: list[tuple[int, int]], index: int, counted: int, counted_to: int
    ) -> tuple[Any, int, int, int, int] | None:
        """The fast lane's run from span ``index`` on (see ``FastLane.read_run``), or None."""
        if self.fast is None:
            return None
        if self.resting:
            self.resting -= 1
            return None
        run = self.fast.read_run(chunk, spans, index, counted, counted_to)
        if run is None:
            self.resting, self.rest = self.rest, min(2 * self.rest, _LONGEST_REST)
        else:
            self.resting, self.rest = 0, 1
        return run


def _lone_cr_lines(chunk: bytes) -> list[bytes] | None:
    """The lines of ``chunk`` split like text mode when a lone carriage return ends some (progress
    bars), else None."""
    if b"\r" not in chunk or not _LONE_CR.search(chunk):
        return None
    pieces = _ANY_NEWLINE.split(chunk)
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return pieces


def _remember(parser: Any, fast: Any, key: bytes | None, events: list[Event] | None, clean: bool, line: bytes) -> None:
    """Tell ``parser`` what ``line`` gave (see ``MegatronLogParser.remember``), and its fast lane the
    shape of an iteration line read from a steady state (``clean``), whose like are then read at once."""
    parser.remember(key, events or _NO_EVENTS, clean, line)
    if fast is not None and clean and events and len(events) == 1 and type(events[0]) is IterationRecord:
        fast.learn(line, events[0])


def _trigger_lines(chunk: bytes, triggers: tuple[str, ...]) -> list[tuple[int, int]]:
    """Where the lines of ``chunk`` that hold a trigger start and end (after their newline), in
    order: found by the compiled finder where it is built (see
    :mod:`~tprimat.plugins.megatron_core.compiled`), else by :func:`trigger_lines_in_python`."""
    find = compiled.TRIGGER_SPANS
    if find is None:
        return trigger_lines_in_python(chunk, triggers)
    return find(chunk, [trigger.encode() for trigger in triggers])


def trigger_lines_in_python(chunk: bytes, triggers: tuple[str, ...]) -> list[tuple[int, int]]:
    """:func:`_trigger_lines` in Python: the reader the compiled finder stands for."""
    spans: dict[int, int] = {}
    size = len(chunk)
    find, rfind = chunk.find, chunk.rfind
    for trigger in {t.encode() for t in triggers}:
        position = find(trigger)
        while position != -1:
            end = find(b"\n", position) + 1
            spans[rfind(b"\n", 0, position) + 1] = end or size
            if not end:
                break
            position = find(trigger, end)
    return sorted(spans.items()) if len(triggers) > 1 else list(spans.items())


def _iter_lines_from(parser: Any, pieces: list[bytes], before: int) -> Iterator[Event]:
    remember = getattr(parser, "remember", None)
    for offset, piece in enumerate(pieces, 1):
        triggers = parser.running_triggers if parser.started else parser.triggers
        line = piece.decode("utf-8", "replace") + "\n"
        if parser.holds_line() or any(t in line for t in triggers):
            events = _feed(parser, line, before + offset)
            if remember is not None:
                remember(None, events or [], False)
            if events:
                yield from events
