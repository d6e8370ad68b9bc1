"""A run of iteration lines of mixed shapes read into one set of columns, in line order.

A fast lane (:mod:`tprimat.plugins.megatron.fastlane`) knows the shapes of the lines it has
learned.  Each value of a shape goes to a *slot*: where it ends up (the iteration, a record
field, a reported figure, the ``hip mem usage`` figures) and how it is read afterwards
(milliseconds to seconds, a count kept as a float).  :class:`Slots` numbers the slots of every
shape held, so that a run whose lines take turns between shapes (a log that prints two forms,
a width that changes) is read into one column per slot, row by row, without grouping the
lines by shape and gathering them back.

The run is read by the compiled ``read_rows`` (:data:`~tprimat.plugins.megatron_core.compiled.READ_ROWS`)
where it is built, else by :func:`rows_in_python`, to the same values: both stop at the first
line of no known shape or whose iteration is not above the line's before.  :func:`run_columns`
then makes the slots' columns the block's fields, figures and memory figures.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from itertools import repeat
from typing import Any

from tprimat.contract.records import MAX_STEP_TIME_S, FigureColumns
from tprimat.plugins.megatron_core import compiled
from tprimat.plugins.megatron_core.compiled import KINDS
from tprimat.plugins.megatron_core.runs import DIGITS, window_lines

#: A slot: what its values are (see the module), e.g. ("field", "step_time_s", "ms").
Slot = tuple[Any, ...]
#: The slot every shape fills: the line's iteration, in the first column.
ITERATION: Slot = ("iteration",)
ITERATION_COLUMN = 0
#: A count of iterations kept as a float (Megatron's "number of nan iterations"): exactly.
_LARGEST_COUNT = 2**53


class Slots:
    """The slots of the shapes a fast lane holds, numbered in the order first met."""

    def __init__(self) -> None:
        self.numbers: dict[Slot, int] = {ITERATION: ITERATION_COLUMN}

    def __len__(self) -> int:
        return len(self.numbers)

    def number(self, slot: Slot) -> int:
        """The column of ``slot``, given one when first met."""
        return self.numbers.setdefault(slot, len(self.numbers))


def rows_in_python(
    chunk: bytes,
    spans: list[tuple[int, int]],
    index: int,
    size: int,
    shapes: dict[bytes, Any],
    width: int,
    previous: int,
) -> list[list[Any]]:
    """What the compiled ``read_rows`` gives for the lines ``spans[index:index + size]`` of
    ``chunk`` (``shapes``: each known shape's key and its shape): ``width`` columns, a value per
    line up to the first line of no known shape or whose iteration is not above the line's
    before (the first's above ``previous``), None where a line's shape fills no such slot."""
    _, lines = window_lines(chunk, spans, index, size)
    found, count = known_run(lines, shapes, previous)
    columns: list[list[Any]] = [[None] * count for _ in range(width)]
    rows_of: dict[Any, list[int]] = {}
    for row, shape in enumerate(found[:count]):
        rows_of.setdefault(shape, []).append(row)
    for shape, rows in rows_of.items():
        values = shape.python_values(list(map(lines.__getitem__, rows)))
        for item, slot in shape.placed:
            if len(rows) == count:
                columns[slot] = list(values[item])
            else:
                column = columns[slot]
                for row, value in zip(rows, values[item], strict=True):
                    column[row] = value
    return columns


def known_run(lines: list[bytes], shapes: dict[bytes, Any], previous: int) -> tuple[list[Any], int]:
    """The shape of each of ``lines`` (None where not in ``shapes``), and how many of them from
    the first are of known shapes with iterations ascending (the first's above ``previous``)."""
    found: list[Any] = list(map(shapes.get, map(bytes.translate, lines, repeat(DIGITS))))
    count = found.index(None) if None in found else len(found)
    iterations = [int(line[shape.items[shape.iteration]]) for shape, line in zip(found[:count], lines, strict=False)]
    above = list(map(operator.lt, [previous, *iterations[:-1]], iterations))
    return found, above.index(False) if False in above else count


def read_rows(*run: Any) -> list[list[Any]]:
    """:func:`rows_in_python` of ``run`` (``chunk, spans, index, size, shapes, width, previous``),
    by the compiled reader where it is built."""
    read = compiled.READ_ROWS
    if read is None:
        return rows_in_python(*run)
    chunk, spans, index, size, shapes, width, previous = run
    return read(chunk, spans, index, size, shapes, width, ITERATION_COLUMN, previous)


def layout(shape: Any, slots: Slots) -> None:
    """Give ``shape`` its ``placed`` items ((item, column) pairs) and its compiled ``layout``
    ((start, stop, kind, column) items)."""
    placed = [(shape.iteration, slots.number(ITERATION))]
    placed += [(item, slots.number(("field", name, post))) for name, (item, post) in shape.fields.items()]
    placed += [(item, slots.number(("figure", name, post))) for name, (item, post) in shape.reported.items()]
    if shape.hip is not None:
        rank, used, total = shape.hip
        placed.append((rank, slots.number(("hip", "rank"))))
        if used is not None and total is not None:
            placed += [(used, slots.number(("hip", "used"))), (total, slots.number(("hip", "total")))]
    shape.placed = placed
    shape.layout = tuple(
        (shape.items[item].start, shape.items[item].stop, KINDS[shape.readers[item]], column) for item, column in placed
    )


def run_columns(
    columns: list[list[Any]], slots: Slots, defaults: dict[str, Any]
) -> tuple[dict[str, Any], tuple[list[Any], ...] | None] | None:
    """The block's columns (every field but ``source`` and ``covers_iterations``, ``reported`` as
    :class:`FigureColumns`) and the ``hip mem usage`` figures of its rows (columns of the rank,
    None where a line has none, used and total; None where no row has them) from the slots'
    ``columns``, cut before the first row the line
    reader would not make a valid record of; None where no row is left."""
    count = len(columns[0])
    fields: dict[str, list[Any]] = {}
    figures: dict[str, list[Any]] = {}
    hip: dict[str, list[Any]] = {}
    for slot, number in slots.numbers.items():
        column = columns[number]
        if slot == ITERATION or _empty(column):
            continue
        if slot[0] == "hip":
            hip[slot[1]] = column
        else:
            _, name, post = slot
            values = column if post is None else _posted(column, post)
            into = fields if slot[0] == "field" else figures
            into[name] = values if name not in into else _merged(into[name], values)
    for name, column in fields.items():
        if defaults[name] is not None and None in column:
            fields[name] = [defaults[name] if value is None else value for value in column]
    bad = _first_bad(fields, figures, slots, columns, count)
    found: dict[str, Any] = {"iteration": columns[0], **fields}
    names = sorted(figures)
    found["reported"] = FigureColumns(count, names, [figures[name] for name in names])
    memory = _hip_columns(hip, fields, count)
    if bad < count:
        if not bad:
            return None
        found = {name: column[:bad] for name, column in found.items()}
        memory = None if memory is None else tuple(column[:bad] for column in memory)
    return found, memory


def _empty(column: list[Any]) -> bool:
    """Whether every value of ``column`` is None (no line of the run has the slot)."""
    return column[0] is None and column[-1] is None and column.count(None) == len(column)


def _posted(column: list[Any], post: str) -> list[Any]:
    """A slot's values read as its ``post`` says (None where a line has none)."""
    full = None not in column
    if post == "ms":
        if full:
            return list(map(operator.truediv, column, repeat(1000.0)))
        return [None if value is None else value / 1000.0 for value in column]
    if post == "count":  # an int, kept as a float (rows with a count a float does not hold are cut)
        if full and _counts_held(column):
            return list(map(float, column))
        return [None if value is None or not 0 <= value <= _LARGEST_COUNT else float(value) for value in column]
    raise ValueError(f"no such reading of a slot: {post}")


def _counts_held(column: list[Any]) -> bool:
    """Whether every count of ``column`` (None where a line has none) is one a float holds exactly."""
    counts = column if None not in column else [value for value in column if value is not None]
    return not counts or (min(counts) >= 0 and max(counts) <= _LARGEST_COUNT)


def _merged(first: list[Any], then: list[Any]) -> list[Any]:
    """One column of two slots that fill one field (each line fills one of them)."""
    return [value if value is not None else other for value, other in zip(first, then, strict=True)]


def _first_bad(
    fields: dict[str, list[Any]], figures: dict[str, list[Any]], slots: Slots, columns: list[list[Any]], count: int
) -> int:
    """The first row the line reader would not make a record of, or whose record would be
    invalid: a step time out of range, a negative skipped count, a count a float does not hold."""
    bad = count
    steps = fields.get("step_time_s")
    # A digit-only change of a finite number is a number or inf, never NaN: min and max tell.
    if steps is None or None in steps:
        return 0
    if not (min(steps) > 0 and max(steps) <= MAX_STEP_TIME_S):
        bad = _first(steps, lambda step: 0 < step <= MAX_STEP_TIME_S, bad)
    skipped = fields.get("skipped")
    if skipped is not None and min(skipped) < 0:
        bad = _first(skipped, lambda value: value >= 0, bad)
    for slot, number in slots.numbers.items():
        if slot[-1] == "count" and not _empty(columns[number]) and not _counts_held(columns[number]):
            counts = columns[number]
            bad = _first(counts, lambda value: value is None or 0 <= value <= _LARGEST_COUNT, bad)
    return bad


def _first(column: list[Any], good: Callable[[Any], bool], bad: int) -> int:
    for row, value in enumerate(column[:bad]):
        if not good(value):
            return row
    return bad


def _hip_columns(hip: dict[str, list[Any]], fields: dict[str, list[Any]], count: int) -> tuple[list[Any], ...] | None:
    """Each row's ``hip mem usage`` figures for the per-rank peaks, as three columns: the rank
    (None where a line has none), used and total (those of the line's own memory segment where
    the shape reads them there); None where no line has them."""
    ranks = hip.get("rank")
    if ranks is None:
        return None
    own_used = fields.get("mem_device_used_gib") or [None] * count
    own_total = fields.get("mem_device_total_gib") or [None] * count
    if "used" not in hip:
        return ranks, own_used, own_total
    return ranks, _merged(hip["used"], own_used), _merged(hip["total"], own_total)
