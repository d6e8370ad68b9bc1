"""What the fast lanes of the log parsers share: lines read by their shape, and a run made a block.

A fast lane (a parser's ``fast_lane``, see :func:`tprimat.plugins.megatron_core.stream.iter_events`)
reads a run of a chunk's trigger lines at once into one
:class:`~tprimat.contract.records.IterationBlock`: the stream calls its
``read_run(chunk, spans, index, counted, counted_to)`` (``spans``: where the chunk's trigger lines
start and end; ``counted``: the lines of the stream before offset ``counted_to`` of the chunk),
which gives the block, the next span's index, the lines before the last line it read and that
line's offset, and the end of that line; or None, and the line at ``index`` is read line by line.

Lines of one *shape* (their bytes with every digit "0": the same length, so every figure at the
same offsets) read alike by any pattern that tells digits from other characters but never one
digit from another; :class:`ShapeGetters` learns once per shape where a line's figures are and
slices them out of every line of that shape.  :func:`run_block` turns a run's columns into the
block and the stream's new position.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from itertools import accumulate, repeat, starmap
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, LineSources
from tprimat.plugins.megatron_core import compiled

#: Every digit to "0": a line's shape.
DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
#: Bytes that make a line one a line reader could read otherwise than its bytes as they are:
#: colour codes (and the reset a code without its ESC byte comes with), control characters
#: other than tab and the line's end, anything outside ASCII.  Searched in a shape, a "[0m"
#: may also be another digit's reset: such lines are only read line by line, never misread.
UNPLAIN = re.compile(rb"[^\t\n\r\x20-\x7e]|\[0m")
#: A figure a line does not print: the empty slice (every figure printed has a character).
NOT_PRINTED = slice(0, 0)

#: A line's figures, as the getter of its shape slices them.
Getter = Callable[[bytes], tuple[bytes, ...]]
_UNKNOWN: Any = object()  # a shape not looked at yet


class ShapeGetters:
    """The getters of the figures of lines by their shape, each learned once (``learn(shape)``: the
    getter, or None for lines of that shape that are read line by line); at most ``held`` kept."""

    def __init__(self, learn: Callable[[bytes], Getter | None], held: int) -> None:
        self._learn = learn
        self._held = held
        self._getters: dict[bytes, Getter | None] = {}

    def rows(self, lines: list[bytes]) -> list[tuple[bytes, ...]]:
        """The figures of the first ``lines``, up to the first of a shape read line by line."""
        shapes = list(map(bytes.translate, lines, repeat(DIGITS)))
        getters = list(map(self._getters.get, shapes, repeat(_UNKNOWN)))
        while _UNKNOWN in getters:
            row = getters.index(_UNKNOWN)
            if None in getters[:row]:
                break  # the run ends before it
            getters[row] = self._learned(shapes[row])
            getters[row + 1 :] = map(self._getters.get, shapes[row + 1 :], repeat(_UNKNOWN))
        count = min(getters.index(value) if value in getters else len(getters) for value in (None, _UNKNOWN))
        return list(map(operator.call, getters[:count], lines[:count]))  # type: ignore[arg-type]  # not None

    def _learned(self, shape: bytes) -> Getter | None:
        getter = self._learn(shape)
        if len(self._getters) >= self._held:
            self._getters.clear()
        self._getters[shape] = getter
        return getter


def slices_getter(spans: list[tuple[int, int]]) -> Getter:
    """The getter of the figures at ``spans`` (a match's group spans; (-1, -1): not printed)."""
    return operator.itemgetter(*(slice(start, end) if start >= 0 else NOT_PRINTED for start, end in spans))


def window_lines(
    chunk: bytes, spans: list[tuple[int, int]], index: int, size: int
) -> tuple[list[tuple[int, int]], list[bytes]]:
    """The next ``size`` spans of a chunk's trigger lines from ``index`` on, and their lines."""
    window = spans[index : index + size]
    return window, list(map(chunk.__getitem__, starmap(slice, window)))


def run_block(
    columns: dict[str, Any],
    source: str,
    run: tuple[bytes, list[tuple[int, int]], int, int],
    counted: tuple[int, int],
    kept: list[int] | None = None,
) -> tuple[IterationBlock, int, int, int, int]:
    """A run's block and where the stream is after it, as a fast lane's ``read_run`` returns them.

    ``columns``: every record field but ``source``; ``run``: the chunk, the window of spans the
    run starts, its index among the chunk's spans and the number of lines it takes; ``counted``:
    the lines of the stream before an offset of the chunk; ``kept``: the places of the lines that
    gave the records (None: every line).  The sources name each record's line.
    """
    chunk, window, index, count = run
    lines_before, offset = counted
    numbers = (compiled.LINE_NUMBERS or line_numbers_in_python)(chunk, window, count, offset, lines_before)
    last_start, last_end = window[count - 1]
    columns["source"] = LineSources(source + ":", numbers if kept is None else [numbers[place] for place in kept])
    block = IterationBlock(columns=tuple(columns[name] for name in ITERATION_FIELDS))
    return block, index + count, numbers[-1] - 1, last_start, last_end


def line_numbers_in_python(
    chunk: bytes, spans: list[tuple[int, int]], count: int, offset: int, before: int
) -> list[int]:
    """The number of the line of each of the first ``count`` ``spans`` of ``chunk`` (ascending),
    counted from 1 in the stream: ``before`` lines come before offset ``offset`` (what the
    compiled ``line_numbers`` gives)."""
    starts = list(map(operator.itemgetter(0), spans[:count]))
    steps = map(chunk.count, repeat(b"\n"), [offset, *starts[:-1]], starts)
    return list(accumulate(steps, initial=before + 1))[1:]
