"""Runs of TorchTitan step lines read at once: what a Primus TorchTitan log is made of.

Every step line of Primus's TorchTitan engine is a record (see :mod:`.torchtitan`), and read
one by one each costs a decode, a colour-code strip, two regex searches, a ``datetime`` and a
record.  Here a run of consecutive step lines is read from the bytes of the log, a column at a
time, and yielded as one :class:`~tprimat.contract.records.IterationBlock`.

Lines of one *shape* (their bytes with every digit "0") read alike: the step pattern and the
timestamp pattern tell digits from other characters, never one digit from another, so the
figures of every line of a shape lie at the same offsets.  A shape is matched once, on the
shape itself, and kept when its lines are plain (ASCII without colour codes or control
characters, so the text the line reader matches is the bytes as they are) and hold nothing
else a Primus line reader looks for (an iteration, an argument, a memory report).  Another
rank's copy of the step just read is skipped, as the line reader skips it.  The run ends at
the first line of another shape, a step below the one before (a restart), or a figure or
timestamp the line reader does not read either: that line is read by the line reader, which
yields what it always does.
"""

from __future__ import annotations

import operator
import re
from datetime import datetime, timedelta
from itertools import repeat
from typing import Any, cast

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, IterationRecord, iteration_values
from tprimat.plugins.amd_primus.torchtitan import _TIMESTAMP_RE, STEP_BYTES_RE
from tprimat.plugins.megatron_core.runs import UNPLAIN, Getter, ShapeGetters, run_block, slices_getter, window_lines

#: What else a Primus line reader looks for in a line before its TorchTitan step (see
#: ``MegatronLogParser.feed`` and ``RankMemory.read_line``): such a line is read line by line.
_OTHER_READERS = (b"iteration", b" ....", b"hip mem usage", b"memory (MB)", b"max_memory_", b"Theoretical memory")
_STAMP_BYTES_RE = re.compile(_TIMESTAMP_RE.pattern.encode())
_KEY = b"step:"
#: Shapes kept per stream (a long run prints a few as its step number grows).
_SHAPES_HELD = 1024
_READ = frozenset(
    {"iteration", "step_time_s", "loss", "grad_norm", "covers_iterations", "mem_max_reserved_gib"}
    | {"timestamp", "source", "reported"}
)
#: What a step line leaves every other field of its record at.
_DEFAULTS = {
    name: value
    for name, value in zip(ITERATION_FIELDS, iteration_values(IterationRecord(iteration=0)), strict=True)
    if name not in _READ
}
#: The step pattern's groups, in the order a shape's getter gives them (then the timestamp's).
_STEP_GROUPS = ("step", "loss", "grad_norm", "memory", "memory_pct", "tps", "tflops", "mfu")


class TitanLane:
    """Reads runs of a Primus parser's TorchTitan step lines at once (the stream calls
    :meth:`read_run`, see :func:`tprimat.plugins.megatron_core.stream.iter_events`)."""

    #: Lines looked at in one go at most.
    WINDOW = 4096

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self._shapes = ShapeGetters(_learned, _SHAPES_HELD)

    def read_run(
        self, chunk: bytes, spans: list[tuple[int, int]], index: int, counted: int, counted_to: int
    ) -> tuple[IterationBlock, int, int, int, int] | None:
        """The step lines of ``spans`` from ``index`` on as one block, by the module's rules, and where
        the stream is after them; or None (see :mod:`tprimat.plugins.megatron_core.runs`)."""
        parser = self.parser
        titan = parser._titan
        if not parser.started or "tps:" not in parser.running_triggers or titan._last_step is None:
            return None
        window, lines = window_lines(chunk, spans, index, self.WINDOW)
        rows = self._shapes.rows(lines)
        count, kept = _new_steps(rows, titan._last_step)
        columns = _columns(list(map(rows.__getitem__, kept)), titan._last_step, titan._last_time) if kept else None
        if columns is None:
            return None
        if len(columns["iteration"]) < len(kept):
            count = kept[len(columns["iteration"])]  # the run ends at the line the reader reads otherwise
            kept = kept[: len(columns["iteration"])]
        titan._last_step, titan._last_time = columns["iteration"][-1], columns.pop("time")[-1]
        for name, value in _DEFAULTS.items():
            columns[name] = [value] * len(kept)
        return run_block(columns, parser.source, (chunk, window, index, count), (counted, counted_to), kept)


def _learned(shape: bytes) -> Getter | None:
    """The getter of the figures of lines of ``shape``, or None for lines read one by one (see the
    module's rules): the step pattern's figures, then the timestamp's text, date-time and fraction."""
    if UNPLAIN.search(shape) is not None or any(map(shape.__contains__, _OTHER_READERS)):
        return None
    step = _first_step(shape)
    if step is None or b"_" in step["loss"] or b"_" in (step["grad_norm"] or b""):
        return None  # float() would take "_", the line reader not
    stamp = _STAMP_BYTES_RE.search(shape, 0, step.start())
    spans = [step.span(name) for name in _STEP_GROUPS]
    return slices_getter(spans + ([stamp.span(0), stamp.span(1), stamp.span(2)] if stamp else [(-1, -1)] * 3))


def _first_step(line: bytes) -> re.Match[bytes] | None:
    """The step pattern's first match in ``line``, where the line reader finds it (see
    ``torchtitan._first_step``)."""
    position = line.find(_KEY)
    while position != -1:
        match = STEP_BYTES_RE.match(line, position)
        if match is not None:
            return match
        position = line.find(_KEY, position + 1)
    return None


def _new_steps(rows: list[tuple[bytes, ...]], last_step: int) -> tuple[int, list[int]]:
    """How many of the first ``rows`` a run takes, and the places of those that are new steps.

    A new step is above the step before; a row of the step before is another rank's copy, which
    the line reader skips unread (``TorchTitanSteps.repeats``): taken, and left out.  The run
    ends at a step below the one before (a restart), which the line reader reads.
    """
    kept: list[int] = []
    for place, step in enumerate(map(int, map(operator.itemgetter(0), rows))):
        if step < last_step:
            return place, kept
        if step > last_step:
            kept.append(place)
            last_step = step
    return len(rows), kept


def _columns(rows: list[tuple[bytes, ...]], last_step: int, last_time: datetime | None) -> dict[str, list[Any]] | None:
    """The record columns of the first ``rows`` as the line reader reads each, after a step
    ``last_step`` at ``last_time``, up to a row it reads otherwise (a step not above the one
    before, a figure ``float`` refuses); None when that is the first.  ``time`` holds each
    row's time (the reader's state after it)."""
    steps = list(map(int, map(operator.itemgetter(0), rows)))
    previous = [last_step, *steps]
    ascending = list(map(operator.lt, previous, steps))
    count = ascending.index(False) if False in ascending else len(rows)
    while count:
        try:
            columns = _converted(rows[:count])
            break
        except ValueError:
            count = _readable(rows[:count])
    else:
        return None
    times = columns.pop("time")
    covers = list(map(operator.sub, steps[:count], previous[:count]))
    columns["iteration"] = steps[:count]
    columns["covers_iterations"] = covers
    columns["step_time_s"] = _step_times(times, [last_time, *times[:-1]], covers)
    columns["timestamp"] = [text.decode() if text else None for text in map(operator.itemgetter(8), rows[:count])]
    columns["time"] = times
    return columns


def _step_times(times: list[datetime | None], before: list[datetime | None], covers: list[int]) -> list[float | None]:
    """Each step's time: the time since the line before over the iterations it covers, where
    both lines have a time and it is later (else None), as the line reader takes it; a column
    at a time where every line has a time and each is later than the one before."""
    if None not in times and None not in before:
        later, earlier = cast("list[datetime]", times), cast("list[datetime]", before)
        if all(map(operator.gt, later, earlier)):
            seconds = map(timedelta.total_seconds, map(operator.sub, later, earlier))
            return list(map(operator.truediv, seconds, covers))
    return [
        (time - earlier).total_seconds() / cover
        if time is not None and earlier is not None and time > earlier
        else None
        for time, earlier, cover in zip(times, before, covers, strict=True)
    ]


def _time(stamp: bytes, fraction: bytes) -> datetime | None:
    """The time of a step line's timestamp (its date and time, and its fraction of a second)."""
    if not stamp:
        return None
    return datetime.fromisoformat(f"{stamp.decode().replace('T', ' ')}.{fraction.decode():0<6}")


def _times(stamps: tuple[bytes, ...], fractions: tuple[bytes, ...]) -> list[datetime | None]:
    """:func:`_time` of each row's timestamp; a column at a time where every row has one."""
    if not all(stamps):
        return list(map(_time, stamps, fractions))
    texts = b"\n".join(stamps).decode().replace("T", " ").split("\n")  # a timestamp holds no newline
    digits = b"\n".join(fractions).decode().split("\n")
    return list(map(datetime.fromisoformat, map("{}.{:0<6}".format, texts, digits)))


def _readable(rows: list[tuple[bytes, ...]]) -> int:
    """The place of the first of ``rows`` whose figures ``float`` refuses."""
    for row, values in enumerate(rows):
        try:
            _converted([values])
        except ValueError:
            return row
    return len(rows)


def _converted(rows: list[tuple[bytes, ...]]) -> dict[str, list[Any]]:
    """The figures of ``rows`` as records hold them, and their times; a ValueError when one is not
    a number or a time (which the line reader does not read either)."""
    _, loss, grad_norm, memory, memory_pct, tps, tflops, mfu, _, stamps, fractions = map(tuple, zip(*rows, strict=True))
    tps_values = list(map(float, map(bytes.replace, tps, repeat(b","), repeat(b""))))
    tflops_values = list(map(float, map(bytes.replace, tflops, repeat(b","), repeat(b""))))
    mfu_values = list(map(float, mfu))
    percent = list(map(float, memory_pct))
    return {
        "time": _times(stamps, fractions),
        "loss": list(map(float, loss)),
        "grad_norm": [float(text) if text else None for text in grad_norm],
        "mem_max_reserved_gib": list(map(float, memory)),
        "reported": [
            {"tokens_per_s_per_gpu": a, "tflops_per_gpu": b, "mfu_percent": c, "mem_max_reserved_percent": d}
            for a, b, c, d in zip(tps_values, tflops_values, mfu_values, percent, strict=True)
        ],
    }


class PrimusLanes:
    """A Primus parser's two fast lanes: its Megatron iteration lines' (``lines``) and its
    TorchTitan step lines' (``steps``); a run is read by the first that can read it."""

    def __init__(self, lines: Any, steps: TitanLane) -> None:
        self.lines = lines
        self.steps = steps

    def read_run(
        self, chunk: bytes, spans: list[tuple[int, int]], index: int, counted: int, counted_to: int
    ) -> tuple[IterationBlock, int, int, int, int] | None:
        """See :meth:`TitanLane.read_run`."""
        return self.lines.read_run(chunk, spans, index, counted, counted_to) or self.steps.read_run(
            chunk, spans, index, counted, counted_to
        )

    def learn(self, line: bytes, record: IterationRecord) -> None:
        """An iteration line's shape, for the Megatron lane (the TorchTitan lane learns its own)."""
        self.lines.learn(line, record)
