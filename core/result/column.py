"""One figure's values over the measured iterations, in bounded memory, with exact order statistics.

The summary describes each figure (step time, tokens/s/GPU, each reported figure) by its
median, p5, p95, min and max: values at given ranks of the sorted column, exactly.  Held as
floats and sorted as a list, the column of a run of 780 000 iterations takes 30 MB, and it
grows with the run.  A :class:`Column` holds at most :data:`RUN_VALUES` values; beyond that
it sorts what it holds and writes it to a temporary file as a *sorted run*, in blocks of
:data:`BLOCK_VALUES` values of which only the first and the last stay in memory.

:meth:`Column.ordered` is then the whole column in sorted order as a sequence
(:class:`SortedRuns`): the value at a rank is found by a search over the runs that reads a
few blocks, never the whole column; :meth:`Column.values` reads it a block at a time, for
the mean and the standard deviation.  Either way the figures are those of sorting the whole
column in memory: equal values keep the order they came in (as a stable sort keeps them),
ints stay ints, and values that are not finite are left out.

A logged figure takes few distinct values (a step time printed to a tenth of a millisecond,
a throughput to one decimal), so a column first only *counts* its values (:meth:`Column.counts`:
each distinct value and how often it came, counted in C), which gives every rank and every sum
without sorting or storing the column.  Counting is exact while equal values are also written
alike: all floats with zeros of one sign, or all ints.  A column that breaks this (an int equal
to a float, 0.0 beside -0.0), or takes more than :data:`COUNTED_VALUES` distinct values, turns
its counts into one sorted run and goes on as above.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from tprimat.result.spill import RecordFile

#: Values a column holds in memory; more are sorted and written to its file as one run.
RUN_VALUES = 65536

#: Values per block of a run: what one read brings back.
BLOCK_VALUES = 1024

#: Blocks kept after reading (the searches for nearby ranks read the same ones).
BLOCKS_CACHED = 64

#: Distinct values a column counts; past them it keeps its values in sorted runs instead.
COUNTED_VALUES = 16384

_NUMBER = (int, float)
_FLOAT = frozenset({float})
#: Types of the values that count as numbers (``isinstance(value, _NUMBER)`` for these exactly).
_NUMBER_TYPES = frozenset({float, int, bool})
_NUMBER_OR_NONE_TYPES = _NUMBER_TYPES | {type(None)}
_ZERO = 0.0
#: The largest int a float holds exactly (and every smaller one).
_EXACT_INT = 2**53


@attrs.frozen
class _Block:
    """Where a block of a run is in the file, and its smallest and largest values."""

    offset: int
    length: int
    first: Any
    last: Any


class _Run:
    """Values sorted and written at once, in blocks; positions count from the run's start."""

    def __init__(self, blocks: list[_Block], sizes: list[int]) -> None:
        self.blocks = blocks
        self.firsts = [block.first for block in blocks]
        self.starts = [0]  # the position of each block's first value; the last entry is the run's length
        for size in sizes:
            self.starts.append(self.starts[-1] + size)

    def __len__(self) -> int:
        return self.starts[-1]


class Column:
    """The numbers of one figure, in the order added: counted while that is exact (see the
    module docstring), else in memory up to :data:`RUN_VALUES`, then in sorted runs in a
    temporary file.

    In memory the values are an array of 8-byte floats while the column holds only floats, a
    list from its first other number on (so that ints stay ints).
    """

    def __init__(self) -> None:
        self._counts: Counter[Any] | None = Counter()  # the finite values counted; None once not counting
        self._counted: type | None = None  # the type of every value counted (float or int)
        self._zero_sign: float | None = None  # the sign (±1.0) of every float zero counted
        self._held: array | list = array("d")
        self._runs: list[_Run] = []
        self._file: RecordFile | None = None
        self._cache: dict[tuple[int, int], list[Any]] = {}

    def extend(self, values: list[Any]) -> None:
        """Add the numbers among ``values`` (None and text are left out)."""
        kinds = set(map(type, values))
        if not kinds <= _NUMBER_TYPES:
            if kinds <= _NUMBER_OR_NONE_TYPES:
                values = list(itertools.compress(values, map(operator.is_not, values, itertools.repeat(None))))
            else:
                values = [value for value in values if isinstance(value, _NUMBER)]
            kinds = set(map(type, values))
        if self._counts is not None:
            if self._count(values, kinds):
                return
            self._stop_counting()
        if type(self._held) is array and not kinds <= _FLOAT:
            self._held = self._held.tolist()
        self._held.extend(values)
        if len(self._held) >= RUN_VALUES:
            self._write_run()

    def counts(self) -> Mapping[Any, int] | None:
        """Each finite value and how often it came, while the column counts its values (else None).

        Equal values are then written alike, so the value at a rank is the one counted."""
        return self._counts

    def ordered(self) -> Sequence[Any]:
        """The finite values, sorted (equal ones in the order added): a list, or for a column
        counted or written to its file, a sequence that finds the ranks asked for."""
        if self._counts is not None:
            return CountedOrder(self._counts)
        if not self._runs:
            return sorted(filter(math.isfinite, self._held))
        self._write_run()
        return SortedRuns(self)

    def values(self) -> Iterator[Any]:
        """The finite values, a run at a time (in no useful order: for sums and counts)."""
        if self._counts is not None:
            counts = self._counts
            return itertools.chain.from_iterable(map(itertools.repeat, counts, counts.values()))
        if not self._runs:
            return filter(math.isfinite, self._held)
        self._write_run()
        blocks = ((run, block) for run, found in enumerate(self._runs) for block in range(len(found.blocks)))
        return itertools.chain.from_iterable(itertools.starmap(self._read, blocks))

    def drop_cache(self) -> None:
        """Let go of the blocks kept from reading (they are read again when needed)."""
        self._cache.clear()

    def _count(self, values: list[Any], kinds: set[type]) -> bool:
        """Count ``values`` (numbers of the types ``kinds``), if counting stays exact; whether it did."""
        if not values:
            return True
        if len(kinds) != 1 or self._counted not in (None, *kinds):
            return False
        (kind,) = kinds
        if kind is float:
            if not math.isfinite(sum(values)):  # a NaN or an infinity among them (or a sum past the largest float)
                values = list(filter(math.isfinite, values))
            if 0.0 in values:  # -0.0 too: the zeros must have one sign
                signs = set(map(math.copysign, itertools.repeat(1.0), filter(_ZERO.__eq__, values)))
                if len(signs | {self._zero_sign} - {None}) > 1:
                    return False
                self._zero_sign = signs.pop()
        elif kind is not int or max(values) > _EXACT_INT or min(values) < -_EXACT_INT:
            return False  # bools; ints a float cannot hold (the mean takes them as floats)
        self._counted = kind
        counts: Counter[Any] = self._counts  # type: ignore[assignment]  # counting: checked by the caller
        if values and values.count(values[0]) == len(values):  # one value (a loss scale, a total): one addition
            counts[values[0]] += len(values)
        else:
            counts.update(values)
        if len(counts) > COUNTED_VALUES:
            self._stop_counting()
        return True

    def _stop_counting(self) -> None:
        """Write the values counted as one sorted run, and keep the values from now on."""
        counts, self._counts = self._counts, None
        if counts:
            ordered = sorted(counts)
            self._write_sorted(
                list(itertools.chain.from_iterable(map(itertools.repeat, ordered, map(counts.__getitem__, ordered)))),
                floats=self._counted is float,
            )

    def _write_run(self) -> None:
        """Sort the values held and write them to the file as one run."""
        ordered = sorted(filter(math.isfinite, self._held))
        floats = type(self._held) is array
        self._held = array("d") if floats else []
        self._write_sorted(ordered, floats=floats)

    def _write_sorted(self, ordered: list[Any], *, floats: bool) -> None:
        """Write ``ordered`` (finite values, sorted; ``floats``: every one a float) to the file as one run."""
        if not ordered:
            return
        if self._file is None:
            self._file = RecordFile()
        write = self._file.write_floats if floats else self._file.write
        blocks, sizes = [], []
        for start in range(0, len(ordered), BLOCK_VALUES):
            values = ordered[start : start + BLOCK_VALUES]
            blocks.append(_Block(*write(values), values[0], values[-1]))
            sizes.append(len(values))
        self._runs.append(_Run(blocks, sizes))

    def _read(self, run: int, block: int) -> list[Any]:
        key = (run, block)
        values = self._cache.get(key)
        if values is None:
            if len(self._cache) >= BLOCKS_CACHED:
                self._cache.clear()
            found = self._runs[run].blocks[block]
            assert self._file is not None
            values = self._cache[key] = self._file.read(found.offset, found.length)
        return values

    def _below(self, run: int, value: Any, *, inclusive: bool) -> int:
        """How many values of ``run`` are less than ``value`` (or equal to it, ``inclusive``)."""
        cut = bisect.bisect_right if inclusive else bisect.bisect_left
        found = self._runs[run]
        block = cut(found.firsts, value) - 1  # the last block that may hold such values
        if block < 0:
            return 0
        last = found.blocks[block].last
        if last < value or (inclusive and last == value):
            return found.starts[block + 1]
        return found.starts[block] + cut(self._read(run, block), value)

    def _at(self, run: int, position: int) -> Any:
        """The value at ``position`` of ``run``."""
        block = bisect.bisect_right(self._runs[run].starts, position) - 1
        return self._read(run, block)[position - self._runs[run].starts[block]]


class SortedRuns(Sequence[Any]):
    """A :class:`Column`'s finite values in sorted order, read by rank from its runs.

    The sorted column is the runs merged, equal values ordered by run and then by position:
    the order a stable sort of the values as they were added gives.  The value at rank ``k``
    lies between two consecutive *bounds* (the first and last values of all blocks): a binary
    search over the bounds, counting the values below each in every run (one block read per
    run at most), finds the largest bound ``c`` with at most ``k`` values below it.  The value
    is then ``c`` itself, or one of the values strictly between ``c`` and the next bound, which
    lie in at most one block per run.
    """

    def __init__(self, column: Column) -> None:
        self._column = column
        self._runs = range(len(column._runs))
        self._length = sum(len(run) for run in column._runs)
        blocks = [block for run in column._runs for block in run.blocks]
        self._bounds = sorted({block.first for block in blocks} | {block.last for block in blocks})

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("rank out of range")
        return self._at_rank(index)

    def _count_below(self, value: Any, *, inclusive: bool = False) -> int:
        return sum(self._column._below(run, value, inclusive=inclusive) for run in self._runs)

    def _at_rank(self, rank: int) -> Any:
        bounds = self._bounds
        low, high = 0, len(bounds) - 1  # nothing is below the smallest bound
        while low < high:
            middle = (low + high + 1) // 2
            if self._count_below(bounds[middle]) <= rank:
                low = middle
            else:
                high = middle - 1
        bound = bounds[low]
        below = self._count_below(bound)
        up_to = self._count_below(bound, inclusive=True)
        if rank < up_to:
            return self._equal_to(bound, rank - below)
        # Strictly between this bound and the next: in the block of each run that spans them.
        following = bounds[low + 1]
        between: list[Any] = []
        column = self._column
        for run in self._runs:
            found = column._runs[run]
            block = bisect.bisect_right(found.firsts, bound) - 1
            if block >= 0 and found.blocks[block].last > bound:
                values = column._read(run, block)
                for value in values[bisect.bisect_right(values, bound) :]:
                    if not value < following:
                        break
                    between.append(value)
        between.sort()  # stable: equal values stay in run order
        return between[rank - up_to]

    def _equal_to(self, value: Any, index: int) -> Any:
        """The ``index``-th of the values equal to ``value``, in run order (an int or a float, as added)."""
        column = self._column
        for run in self._runs:
            start = column._below(run, value, inclusive=False)
            count = column._below(run, value, inclusive=True) - start
            if index < count:
                return column._at(run, start + index)
            index -= count
        raise AssertionError(f"fewer values equal to {value!r} than counted")


class CountedOrder(Sequence[Any]):
    """A counted :class:`Column`'s finite values in sorted order: the value at a rank is the
    distinct value whose counts, added in order, pass the rank."""

    def __init__(self, counts: Mapping[Any, int]) -> None:
        self._values = sorted(counts)
        self._ends = list(itertools.accumulate(map(counts.__getitem__, self._values)))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("rank out of range")
        return self._values[bisect.bisect_right(self._ends, index)]
