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
from collections.abc import Callable
from itertools import accumulate, repeat, starmap
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, IterationRecord, RankPeak, iteration_values

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
#: Bytes that make a line the line reader could read otherwise: colour codes (and the
#: reset a code without its ESC byte comes with), control characters other than tab and
#: the line's end, anything outside ASCII.
_UNPLAIN = re.compile(rb"[^\t\n\r\x20-\x7e]|\[0m")
_KEY = b"Training epoch"
_GIB = 1024.0**3
_NL = b"\n"
#: Every digit to "0": see :meth:`NemoFastLane._step_rows`.
_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
#: Shapes kept per stream (a long run prints a few hundred as its figures change width).
_SHAPES_HELD = 4096
_UNKNOWN: Any = object()  # a shape not looked at yet
_EMPTY = slice(0, 0)
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
        # A line's shape (its bytes with every digit "0") -> the getter of its figures, or None
        # for a line that is not a plain step line in the known form (see `_learned`).
        self._shapes: dict[bytes, Callable[[bytes], tuple[bytes, ...]] | None] = {}

    def read_run(
        self, chunk: bytes, spans: list[tuple[int, int]], index: int, counted: int, counted_to: int
    ) -> tuple[IterationBlock, int, int, int, int] | None:
        """The step lines of ``spans`` from ``index`` on, as one block (see the module's rules).

        ``counted``: the lines of the stream before offset ``counted_to`` of ``chunk``.  Returns
        the block, the next span's index, the lines before the last line read and its offset, and
        the end of the last line read; or None when the line at ``index`` must be read line by line.
        """
        parser = self.parser
        if (
            not parser.started
            or parser.holds_line()
            or not {"train_iters", "global_batch_size"} <= parser._facts.keys()
        ):
            return None
        window = spans[index : index + self.WINDOW]
        lines = list(map(chunk.__getitem__, starmap(slice, window)))
        rows = self._step_rows(lines)
        columns = _columns(rows) if rows else None
        if columns is None:
            return None
        count = len(columns["iteration"])
        starts = list(map(operator.itemgetter(0), window[:count]))
        steps = map(chunk.count, repeat(_NL), [counted_to, *starts[:-1]], starts)
        before = list(accumulate(steps, initial=counted))
        where = parser.source.replace("%", "%%") + ":%d"
        columns["source"] = list(map(where.__mod__, map((1).__add__, before[1:])))
        _read_memory(parser, columns)
        for name, value in _DEFAULTS.items():
            columns[name] = [value] * count
        block = IterationBlock(columns=tuple(columns[name] for name in ITERATION_FIELDS))
        return block, index + count, before[-1], starts[-1], window[count - 1][1]

    def _step_rows(self, lines: list[bytes]) -> list[tuple[bytes, ...]]:
        """The figures of the first ``lines`` (b"" for one not printed), up to the first that is
        not a plain step line in the known form.

        Two lines with the same shape (every digit "0") match :data:`_STEP_LINE` alike, with
        their figures at the same offsets (the pattern tells digits apart from other characters,
        never one digit from another): a shape is matched once, then its lines are sliced.
        """
        shapes = list(map(bytes.translate, lines, repeat(_DIGITS)))
        getters = list(map(self._shapes.get, shapes, repeat(_UNKNOWN)))
        while _UNKNOWN in getters:
            row = getters.index(_UNKNOWN)
            if None in getters[:row]:
                break  # the run ends before it
            getters[row] = self._learned(shapes[row])
            getters[row + 1 :] = map(self._shapes.get, shapes[row + 1 :], repeat(_UNKNOWN))
        count = min(getters.index(value) if value in getters else len(getters) for value in (None, _UNKNOWN))
        return list(map(operator.call, getters[:count], lines[:count]))  # type: ignore[arg-type]  # getters: not None

    def _learned(self, shape: bytes) -> Callable[[bytes], tuple[bytes, ...]] | None:
        """The getter of the figures of lines of ``shape`` (kept), or None for lines read one by one."""
        match = None
        if _UNPLAIN.search(shape) is None and shape.count(_KEY) == 1:
            match = _STEP_LINE.match(shape, shape.find(_KEY))
        getter = None
        if match is not None and not _other_memory(shape, match):
            # A figure not printed is the empty slice: every figure printed has a character.
            getter = operator.itemgetter(
                *(slice(*match.span(group)) if match.start(group) >= 0 else _EMPTY for group in range(1, 15))
            )
        if len(self._shapes) >= _SHAPES_HELD:
            self._shapes.clear()
        self._shapes[shape] = getter
        return getter


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
