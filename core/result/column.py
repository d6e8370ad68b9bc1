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
"""

from __future__ import annotations

import bisect
import itertools
import math
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

import attrs

from tprimat.result.spill import RecordFile

#: Values a column holds in memory; more are sorted and written to its file as one run.
RUN_VALUES = 65536

#: Values per block of a run: what one read brings back.
BLOCK_VALUES = 1024

#: Blocks kept after reading (the searches for nearby ranks read the same ones).
BLOCKS_CACHED = 64

_NUMBER = (int, float)
_FLOAT = frozenset({float})
#: Types of the values that count as numbers (``isinstance(value, _NUMBER)`` for these exactly).
_NUMBER_TYPES = frozenset({float, int, bool})
_NUMBER_OR_NONE_TYPES = _NUMBER_TYPES | {type(None)}


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
    """The numbers of one figure, in the order added: in memory up to :data:`RUN_VALUES`,
    then in sorted runs in a temporary file.

    In memory the values are an array of 8-byte floats while the column holds only floats, a
    list from its first other number on (so that ints stay ints).
    """

    def __init__(self) -> None:
        self._held: array | list = array("d")
        self._runs: list[_Run] = []
        self._file: RecordFile | None = None
        self._cache: dict[tuple[int, int], list[Any]] = {}

    def extend(self, values: list[Any]) -> None:
        """Add the numbers among ``values`` (None and text are left out)."""
        kinds = set(map(type, values))
        if not kinds <= _NUMBER_TYPES:
            if kinds <= _NUMBER_OR_NONE_TYPES:
                values = [value for value in values if value is not None]
            else:
                values = [value for value in values if isinstance(value, _NUMBER)]
            kinds = set(map(type, values))
        if type(self._held) is array and not kinds <= _FLOAT:
            self._held = self._held.tolist()
        self._held.extend(values)
        if len(self._held) >= RUN_VALUES:
            self._write_run()

    def ordered(self) -> Sequence[Any]:
        """The finite values, sorted (equal ones in the order added): a list, or for a column
        written to its file, a :class:`SortedRuns` that reads the ranks asked for."""
        if not self._runs:
            return sorted(filter(math.isfinite, self._held))
        self._write_run()
        return SortedRuns(self)

    def values(self) -> Iterator[Any]:
        """The finite values, a run at a time (in no useful order: for sums and counts)."""
        if not self._runs:
            return filter(math.isfinite, self._held)
        self._write_run()
        blocks = ((run, block) for run, found in enumerate(self._runs) for block in range(len(found.blocks)))
        return itertools.chain.from_iterable(itertools.starmap(self._read, blocks))

    def drop_cache(self) -> None:
        """Let go of the blocks kept from reading (they are read again when needed)."""
        self._cache.clear()

    def _write_run(self) -> None:
        """Sort the values held and write them to the file as one run."""
        ordered = sorted(filter(math.isfinite, self._held))
        self._held = array("d") if type(self._held) is array else []
        if not ordered:
            return
        if self._file is None:
            self._file = RecordFile()
        blocks, sizes = [], []
        for start in range(0, len(ordered), BLOCK_VALUES):
            values = ordered[start : start + BLOCK_VALUES]
            blocks.append(_Block(*self._file.write(values), values[0], values[-1]))
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
