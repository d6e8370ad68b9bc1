"""Runs of NeMo 2 step lines read at once: what a log written every step is made of.

A NeMo 2 run logged every step is mostly step lines.  Read one by one, each costs a
decode, a colour-code strip, two regex matches and a record: tens of microseconds.
Here a run of consecutive step lines in a form NeMo 2 prints (the known form of
:mod:`tprimat.plugins.nvd_nemo.parse`: its keys in NeMo's order, plain numbers, no
``val_loss``) is read from the bytes of the log with one match per line, its figures
converted a column at a time, and yielded as one
:class:`~tprimat.contract.records.IterationBlock`.

Only lines the line reader would read the very same way are taken: plain ASCII
without colour codes or control characters (so the text the line reader matches is
the bytes as they are), one ``Training epoch`` per line, a step time above zero,
every figure a number ``float`` reads, and a stream steady enough that the line
states no fact (its run length and global batch stated already).  The first line
that is anything else ends the run, and the line reader reads it as it always does.
"""

from __future__ import annotations

import operator
import re
from itertools import repeat
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, IterationRecord, RankPeak, iteration_values
from tprimat.plugins.megatron_core.runs import UNPLAIN, Getter, ShapeGetters, run_block, slices_getter, window_lines

_FLOAT = rb"([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf))"
_PLAIN = rb"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
#: The line reader's step-line pattern and its known form, as one pattern over a line's bytes,
#: to the end of the line (trailing white space as ``str.rstrip`` takes it from an ASCII line).
_STEP_LINE = re.compile(
    rb"Training epoch ([0-9]+), iteration ([0-9]+)/([0-9]+)\s*\|"
    rb" lr: " + _FLOAT + rb" \| (?:consumed_samples: ([0-9]+) \| )?global_batch_size: ([0-9]+) \| "
    rb"global_step: ([0-9]+) \| "
    rb"(?:max_memory_reserved: " + _FLOAT + rb" \| max_memory_allocated: " + _FLOAT + rb" \| )?"
    rb"reduced_train_loss: " + _FLOAT + rb"(?: \| train_step_timing in s: " + _FLOAT + rb")?"
    rb"(?: \| TFLOPS_per_GPU: " + _FLOAT + rb")?(?: \| consumed_samples: ([0-9]+))?"
    rb"(?: \| val_loss: " + _PLAIN + rb")?[ \t\n\r\x0b\x0c]*\Z"
)
_KEY = b"Training epoch"
_GIB = 1024.0**3
#: Shapes kept per stream (a long run prints a few hundred as its figures change width).
_SHAPES_HELD = 4096
#: The fields a step line gives (the rest keep their defaults).
_READ = frozenset(
    {"iteration", "step_time_s", "loss", "lr", "global_batch_size", "consumed_samples", "reported", "source"}
    | {"mem_max_reserved_gib", "mem_max_allocated_gib"}
)
#: What a step line leaves every other field of its record at.
_DEFAULTS = {
    name: value
    for name, value in zip(ITERATION_FIELDS, iteration_values(IterationRecord(iteration=0)), strict=True)
    if name not in _READ
}


class NemoFastLane:
    """Reads runs of a :class:`~tprimat.plugins.nvd_nemo.parse.NemoLogParser`'s step lines at once
    (the stream calls :meth:`read_run`; see :func:`tprimat.plugins.megatron_core.stream.iter_events`)."""

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
        if (
            not parser.started
            or parser.holds_line()
            or not {"train_iters", "global_batch_size"} <= parser._facts.keys()
        ):
            return None
        window, lines = window_lines(chunk, spans, index, self.WINDOW)
        rows = self._shapes.rows(lines)
        columns = _columns(rows) if rows else None
        if columns is None:
            return None
        count = len(columns["iteration"])
        _read_memory(parser, columns)
        for name, value in _DEFAULTS.items():
            columns[name] = [value] * count
        return run_block(columns, parser.source, (chunk, window, index, count), (counted, counted_to))


def _learned(shape: bytes) -> Getter | None:
    """The getter of the figures of lines of ``shape``, or None for lines read one by one: those
    that are not plain step lines in the known form, with one ``Training epoch``.

    Two lines with the same shape match :data:`_STEP_LINE` alike, their figures at the same
    offsets (the pattern tells digits apart from other characters, never one digit from another).
    """
    if UNPLAIN.search(shape) is not None or shape.count(_KEY) != 1:
        return None
    match = _STEP_LINE.match(shape, shape.find(_KEY))
    if match is None or _other_memory(shape, match):
        return None
    return slices_getter([match.span(group) for group in range(1, 15)])


def _read_memory(parser: Any, columns: dict[str, list[Any]]) -> None:
    """The run's memory figures to the parser's peaks, as its lines one by one would give them
    (``RankMemory.read_line``: each line's two fields, the larger of each kept)."""
    allocated = [value for value in columns["mem_max_allocated_gib"] if value is not None]
    if allocated:
        reserved = [value for value in columns["mem_max_reserved_gib"] if value is not None]
        parser._rank_memory.add(RankPeak(rank=None, max_allocated_gib=max(allocated), max_reserved_gib=max(reserved)))


def _other_memory(shape: bytes, match: re.Match[bytes]) -> bool:
    """Whether lines of ``shape`` hold a memory figure the file's memory scan reads otherwise than
    the step line's fields (see ``RankMemory.read_line``): another report, a ``max_memory_`` field
    outside the step, or one whose value is not the whole number (of at most 15 digits, which a
    float holds exactly) that the scan reads."""
    if any(map(shape.__contains__, (b"hip mem usage", b"memory (MB)", b"Theoretical memory"))):
        return True
    values = [shape[match.start(group) : match.end(group)] for group in (8, 9) if match.start(group) >= 0]
    if shape.count(b"max_memory_") != len(values):
        return True
    return any(not value.isdigit() or len(value) > 15 for value in values)


def _leading(values: list[Any], value: Any, negate: bool = False) -> int:
    """How many of the first ``values`` are ``value`` (are not, with ``negate``)."""
    if negate:
        return values.index(value) if value in values else len(values)
    if values.count(value) == len(values):
        return len(values)
    return next(row for row, found in enumerate(values) if found != value)


def _floats(column: tuple[bytes, ...]) -> list[float | None]:
    """A column of optional numbers (b"": not printed) read by ``float`` (a ValueError if one is
    not a number)."""
    if b"" not in column:
        return list(map(float, column))
    if column.count(b"") == len(column):
        return [None] * len(column)
    return [float(text) if text else None for text in column]


def _columns(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]] | None:
    """The record columns of matched step lines as the line reader reads each, of their first lines
    up to one it reads otherwise (a ``val_loss``, ``consumed_samples`` printed twice, a figure
    ``float`` refuses, a step time not above zero); None when that is the first."""
    count = _usable(rows)
    while count:
        try:
            columns = _converted(rows[:count])
        except ValueError:
            count = _readable(rows[:count])
            continue
        positive = [value is None or value > 0 for value in columns["step_time_s"]]
        if False not in positive:
            return columns
        count = positive.index(False)
    return None


def _usable(rows: list[tuple[Any, ...]]) -> int:
    """How many of the first ``rows`` hold no ``val_loss`` (an evaluation: the line reader's) and
    print ``consumed_samples`` once."""
    val_loss = [row[13] for row in rows]
    twice = [bool(row[4] and row[12]) for row in rows]
    return min(_leading(val_loss, b""), _leading(twice, False))


def _readable(rows: list[tuple[Any, ...]]) -> int:
    """The place of the first of ``rows`` whose figures ``float`` or ``int`` refuses."""
    for row, values in enumerate(rows):
        try:
            _converted([values])
        except ValueError:
            return row
    return len(rows)


def _either(later: bytes, first: bytes) -> bytes:
    """``consumed_samples`` where a line prints it (at its end, or else before the batch)."""
    return later or first


def _ints(column: tuple[bytes, ...]) -> list[int | None]:
    """A column of optional whole numbers (b"": not printed) read by ``int``."""
    if b"" not in column:
        return list(map(int, column))
    return [int(text) if text else None for text in column]


def _gib(column: tuple[bytes, ...]) -> list[float | None]:
    """A column of optional byte counts in GiB (``float(text) / 2**30``, as the line reader)."""
    if b"" not in column:
        return list(map(operator.truediv, map(float, column), repeat(_GIB)))
    if column.count(b"") == len(column):
        return [None] * len(column)
    return [float(text) / _GIB if text else None for text in column]


def _converted(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The record columns of ``rows`` (no ``val_loss``, ``consumed_samples`` once); a ValueError
    when a figure is not a number ``float`` reads."""
    _, _, _, lr, samples_first, batch, step, reserved, allocated, loss, seconds, tflops, samples, _ = map(
        tuple, zip(*rows, strict=True)
    )
    return {
        "iteration": list(map((1).__add__, map(int, step))),
        "step_time_s": _floats(seconds),
        "loss": list(map(float, loss)),
        "lr": list(map(float, lr)),
        "global_batch_size": list(map(int, batch)),
        "consumed_samples": _ints(samples if b"" not in samples else tuple(map(_either, samples, samples_first))),
        "mem_max_reserved_gib": _gib(reserved),
        "mem_max_allocated_gib": _gib(allocated),
        "reported": [{} if value is None else {"tflops_per_gpu": value} for value in _floats(tflops)],
    }
