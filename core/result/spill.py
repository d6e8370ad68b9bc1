"""Iteration records kept in a temporary file instead of memory, for the logs of long runs.

A record takes about 1 KiB as Python objects, so the log of a 240 000-step run would
hold a quarter of a gigabyte of records that only wait to be summarised and written.
``EventCollector(spill_after=N)`` keeps at most N records in memory and moves older
ones to :class:`ColdRecords`.  Its finished records are then one :class:`RecordSequence`:
sorted by iteration, read one block at a time.  Whatever reads records after collection
(the checks, the summary, the result writer) reads them in passes and never holds them
all, so memory no longer grows with the length of the run.

A record is stored as its *row*, the tuple of its field values (``ITERATION_FIELDS``
order), and a block of rows by field: each field's values of the block, one column after
the other (:mod:`marshal`).  No pass after collection makes records: a pass that needs a
few fields (:func:`record_fields`, :func:`record_field_blocks`) decodes only those columns,
what is filled in later (:meth:`RecordSequence.map_columns`) is computed over a block's
columns, and the result writer encodes the columns.  Records a collector took as the
columns of an :class:`~tprimat.contract.records.IterationBlock` are stored from those
columns (:meth:`ColdRecords.put_columns`), never made into rows.  Blocks go to an unnamed temporary
file and are read back by position (``os.pread``), so a forked process reads them without
sharing a file offset.
"""

from __future__ import annotations

import abc
import bisect
import functools
import heapq
import itertools
import marshal
import operator
import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

import attrs

from tprimat.contract.records import BODY_FIELDS, EMPTY_BODY, ITERATION_FIELDS, IterationRecord, iteration_values
from tprimat.result.packing import SealedBlock, decode_column, encode_column, encode_sources, record_from

#: Records per block: what one read brings back into memory.
BLOCK_RECORDS = 1024

#: A record as stored: its field values in ``ITERATION_FIELDS`` order.
Row = tuple[Any, ...]

#: Something done to each record's row as it is read back (see :meth:`RecordSequence.map_rows`).
RowFunction = Callable[[Row], Row]

#: Something done to a block's columns as they are read back (see :meth:`RecordSequence.map_columns`):
#: from the columns of the fields it reads, the new columns of those it changes.
ColumnFunction = Callable[[list[Sequence[Any]]], list[Sequence[Any]]]

#: The first byte of a block of 8-byte floats (pickle's first byte is its PROTO opcode, 0x80).
_FLOATS = b"d"
#: Bytes read first of a block of rows: its header (where each column lies), and its first columns if short.
_HEAD_BYTES = 4096

#: Each field's place in a row.
FIELD_INDEX = {name: index for index, name in enumerate(ITERATION_FIELDS)}
_ITERATION = FIELD_INDEX["iteration"]
_SOURCE = FIELD_INDEX["source"]
_iteration_of = operator.itemgetter(_ITERATION)


class RecordFile:
    """Blocks of records in an unnamed temporary file, deleted when it is closed or freed.

    :meth:`write` and :meth:`read` store any list (a column of figures, see
    :mod:`tprimat.result.column`); :meth:`write_rows` stores records' rows by field, each
    field's values one after the other, so that :meth:`read_columns` decodes only the
    fields a pass asks for.
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="tprimat-records-")
        self._size = 0

    def write(self, values: list[Any]) -> tuple[int, int]:
        """Append ``values`` as one block; its offset and length."""
        return self._append(pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))

    def write_floats(self, values: Sequence[float]) -> tuple[int, int]:
        """Append ``values`` (floats, every one) as one block of 8-byte floats, read back by
        :meth:`read` four times faster than pickle's; its offset and length."""
        return self._append(_FLOATS + array("d", values).tobytes())

    def read(self, offset: int, length: int) -> list[Any]:
        """The values of the block at ``offset`` (written by :meth:`write` or :meth:`write_floats`)."""
        data = self._bytes(offset, length)
        if data[:1] == _FLOATS:
            return array("d", data[1:]).tolist()
        return pickle.loads(data)  # noqa: S301  (a file this process wrote)

    def write_rows(self, rows: list[Row]) -> tuple[int, int]:
        """Append ``rows`` as one block of columns (one per field); its offset and length."""
        return self.write_columns(list(zip(*rows, strict=True)) or [()] * len(ITERATION_FIELDS))

    def write_columns(self, columns: Sequence[tuple[Any, ...]]) -> tuple[int, int]:
        """Append a block of records given as its columns (one tuple per field, in ``ITERATION_FIELDS``
        order), as :meth:`write_rows` stores them; its offset and length."""
        return self.write_encoded(list(map(encode_column, columns)))

    def write_encoded(self, encoded: Sequence[bytes]) -> tuple[int, int]:
        """Append a block of records given as its columns already encoded (:func:`encode_column`),
        as :meth:`write_columns` stores them; its offset and length."""
        header = marshal.dumps([len(column) for column in encoded])
        return self._append(b"".join([len(header).to_bytes(4, "little"), header, *encoded]))

    def read_columns(self, offset: int, length: int, places: Sequence[int]) -> list[Sequence[Any]]:
        """The columns at ``places`` (fields' places in a row) of the block of rows at ``offset``.

        Only the bytes from the first column asked for to the last are read (after the block's
        header, read with the start of the block): a pass over one field reads that field."""
        if not places:
            return []
        head = self._bytes(offset, min(length, _HEAD_BYTES))
        size = int.from_bytes(head[:4], "little")
        if 4 + size > len(head):  # a header longer than guessed
            head = self._bytes(offset, 4 + size)
        lengths = marshal.loads(head[4 : 4 + size])
        starts = list(itertools.accumulate(lengths, initial=4 + size))
        low, high = starts[min(places)], starts[max(places) + 1]
        data = memoryview(head[low:high] if high <= len(head) else self._bytes(offset + low, high - low))
        return [decode_column(data[starts[place] - low : starts[place + 1] - low]) for place in places]

    def read_rows(self, offset: int, length: int) -> list[Row]:
        """The rows of the block of rows at ``offset``."""
        return list(zip(*self.read_columns(offset, length, range(len(ITERATION_FIELDS))), strict=True))

    def _append(self, block: bytes) -> tuple[int, int]:
        data = memoryview(block)
        offset = self._size
        while data:
            written = os.pwrite(self._file.fileno(), data, self._size)
            data = data[written:]
            self._size += written
        return offset, self._size - offset

    def _bytes(self, offset: int, length: int) -> bytes:
        parts = []
        while length:
            part = os.pread(self._file.fileno(), length, offset)
            if not part:
                raise OSError(f"record file ends {length} bytes early")
            parts.append(part)
            offset += len(part)
            length -= len(part)
        return b"".join(parts)


@attrs.define
class _Block:
    """One block in the file: where it is, how many records it holds, and their first and last
    iterations (ascending within the block)."""

    offset: int
    length: int
    count: int
    first: int
    last: int
    dropped: set[int] = attrs.Factory(set)  # positions whose records went back to the collector


class ColdRecords:
    """The records a collector moved out of memory, found again by iteration.

    Only each block's first and last iteration stay in memory, so that memory does not grow
    with the number of records.  Most lookups are for iterations no block holds (a new
    iteration lies above all of them), answered without reading anything; one within a
    block's span (a job restarted from a checkpoint logs iterations again) reads that block.
    """

    def __init__(self) -> None:
        self.file = RecordFile()
        self.blocks: list[_Block] = []
        self.highest: int | None = None  # the largest iteration ever moved here
        self._loaded: tuple[int, list[Row]] | None = None  # the last block read
        self._firsts: list[int] = []  # the blocks' first iterations, ascending
        self._order: list[int] = []  # the blocks' indices in that order
        self._in_order = True  # no two blocks' spans overlap

    def put(self, records: list[IterationRecord]) -> None:
        """Move ``records`` (of distinct iterations) here, in blocks sorted by iteration (see
        :meth:`put_columns`)."""
        rows = sorted(map(iteration_values, records), key=_iteration_of)
        if rows:
            self.put_columns(list(zip(*rows, strict=True)))

    def put_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Move records given as columns (one per field, in ``ITERATION_FIELDS`` order; iterations
        strictly ascending, none held here) here, without making a record or a row of each.

        A block ends before the first iteration of a block already here (records moved after
        others of higher iterations), so that no block's span covers another's first record;
        spans that overlap all the same (a restart logged iterations again) are merged in the end."""
        iterations = columns[_ITERATION]
        start = 0
        while start < len(iterations):
            stop = min(start + BLOCK_RECORDS, len(iterations))
            place = bisect.bisect_right(self._firsts, iterations[start])
            if place < len(self._firsts):
                stop = bisect.bisect_left(iterations, self._firsts[place], start + 1, stop)
            written = self.file.write_columns([tuple(column[start:stop]) for column in columns])
            self._add_block(*written, stop - start, iterations[start], iterations[stop - 1])
            start = stop

    def put_sealed(self, sealed: SealedBlock) -> None:
        """Move a block a worker sealed here as it encoded it (see :class:`SealedBlock`), its
        sources encoded now (as their file and line numbers); as its columns
        (:meth:`put_columns`) where it would span the first record of a block already here or
        hold more than :data:`BLOCK_RECORDS` records."""
        place = bisect.bisect_right(self._firsts, sealed.first)
        if sealed.count > BLOCK_RECORDS or (place < len(self._firsts) and self._firsts[place] <= sealed.last):
            self.put_columns(sealed.block().columns)
            return
        encoded = list(sealed.encoded)
        encoded[_SOURCE] = encode_sources(sealed.source_prefix, sealed.lines)
        self._add_block(*self.file.write_encoded(encoded), sealed.count, sealed.first, sealed.last)

    def _add_block(self, offset: int, length: int, count: int, first: int, last: int) -> None:
        """Note a block just written, of ``count`` records from iteration ``first`` to ``last``."""
        place = bisect.bisect_right(self._firsts, first)
        if (place and self.blocks[self._order[place - 1]].last >= first) or (
            place < len(self._firsts) and self._firsts[place] <= last
        ):
            self._in_order = False  # a restart logged iterations again: blocks overlap
        self._firsts.insert(place, first)
        self._order.insert(place, len(self.blocks))
        self.blocks.append(_Block(offset, length, count, first, last))
        self.highest = last if self.highest is None else max(self.highest, last)

    def find(self, iteration: int) -> tuple[int, int] | None:
        """Where the record of ``iteration`` is, as (block, position), or None."""
        if self.highest is None or iteration > self.highest:
            return None
        for index in self._spanning(iteration):
            rows = self._rows(index)
            position = bisect.bisect_left(rows, iteration, key=_iteration_of)
            if rows[position][_ITERATION] == iteration and position not in self.blocks[index].dropped:
                return index, position
        return None

    def _spanning(self, iteration: int) -> Iterable[int]:
        """The blocks whose span holds ``iteration``: found by bisection while no spans overlap
        (a copy from another rank's file, a whole file later, costs a lookup, not a scan)."""
        if self._in_order:
            place = bisect.bisect_right(self._firsts, iteration) - 1
            if place < 0:
                return ()
            index = self._order[place]
            return (index,) if iteration <= self.blocks[index].last else ()
        return (index for index, block in enumerate(self.blocks) if block.first <= iteration <= block.last)

    def _rows(self, index: int) -> list[Row]:
        """The rows of block ``index`` (the block read last is kept)."""
        if self._loaded is None or self._loaded[0] != index:
            block = self.blocks[index]
            self._loaded = (index, self.file.read_rows(block.offset, block.length))
        return self._loaded[1]

    def record(self, where: tuple[int, int]) -> IterationRecord:
        """The record at ``where`` (from :meth:`find`), made anew."""
        index, position = where
        return record_from(self._rows(index)[position])

    def run(self, iteration: int, most: int) -> list[Row]:
        """The stored rows (no record made) of the record of ``iteration`` and of those that follow
        it in its block, at most ``most``, up to the first taken back; empty when no record of
        ``iteration`` is here.  The block is read once for the run (see :meth:`find`)."""
        where = self.find(iteration)
        if where is None:
            return []
        index, position = where
        rows = self._rows(index)
        stop = min(position + most, len(rows))
        dropped = self.blocks[index].dropped
        if dropped:
            stop = min([stop, *(p for p in dropped if p > position)])
        return rows[position:stop]

    def drop(self, where: tuple[int, int]) -> None:
        """Forget the record at ``where``: the collector holds its iteration again."""
        index, position = where
        self.blocks[index].dropped.add(position)

    def finish(self, remaining: list[IterationRecord]) -> RecordSequence:
        """All records, with ``remaining`` (those still in memory), as one sequence sorted by iteration.

        Blocks whose records do not interleave are read as they are.  Otherwise (a job that
        restarted and logged some iterations again with other values) the records are merged
        into new blocks, holding in memory only the blocks that overlap.
        """
        self.put(remaining)
        self._loaded = None
        blocks = sorted(self.blocks, key=lambda b: (b.first, b.last))
        kept = [_kept(block) for block in blocks]
        spans = [self._span(block, positions) for block, positions in zip(blocks, kept, strict=True)]
        if all(a[1] < b[0] for a, b in itertools.pairwise(span for span in spans if span)):
            parts = [
                _Part(block.offset, block.length, block.count if positions is None else len(positions), positions)
                for block, positions in zip(blocks, kept, strict=True)
                if positions is None or positions
            ]
            return RecordSequence(self.file, parts)
        return RecordSequence(self.file, self._merged(blocks, kept))

    def _span(self, block: _Block, positions: tuple[int, ...] | None) -> tuple[int, int] | None:
        """The first and last iteration of the kept records of ``block`` (None: none kept)."""
        if positions is None:
            return block.first, block.last
        if not positions:
            return None
        (iterations,) = self.file.read_columns(block.offset, block.length, [_ITERATION])
        return iterations[positions[0]], iterations[positions[-1]]

    def _merged(self, blocks: list[_Block], kept: list[tuple[int, ...] | None]) -> list[_Part]:
        """The kept records of ``blocks`` (sorted by first iteration), in iteration order, written
        again in new blocks.

        A block is read when the merge reaches its first iteration and let go when its last
        record is taken: only the blocks that overlap are in memory at once.  Each iteration is
        in one block only (the collector took back the others), so no two records tie.
        """
        pending: list[tuple[int, int]] = []  # (iteration, block index) of each open block's next record
        rows: dict[int, list[Row]] = {}  # the kept rows of each open block, the taken ones first
        taken: dict[int, int] = {}  # how many rows of each open block are taken
        parts: list[_Part] = []
        batch: list[Row] = []
        following = 0  # the next block to open
        while pending or following < len(blocks):
            while following < len(blocks) and (not pending or blocks[following].first <= pending[0][0]):
                block, positions = blocks[following], kept[following]
                read = self.file.read_rows(block.offset, block.length)
                if positions is not None:
                    read = [read[p] for p in positions]
                if read:
                    rows[following], taken[following] = read, 0
                    heapq.heappush(pending, (read[0][_ITERATION], following))
                following += 1
            if not pending:
                continue
            _, index = heapq.heappop(pending)
            position = taken[index]
            batch.append(rows[index][position])
            taken[index] = position + 1
            if position + 1 < len(rows[index]):
                heapq.heappush(pending, (rows[index][position + 1][_ITERATION], index))
            else:
                del rows[index], taken[index]
            if len(batch) == BLOCK_RECORDS:
                parts.append(_Part(*self.file.write_rows(batch), len(batch), None))
                batch = []
        if batch:
            parts.append(_Part(*self.file.write_rows(batch), len(batch), None))
        return parts


def _kept(block: _Block) -> tuple[int, ...] | None:
    """The positions of the records of ``block`` that stay (None: all of them)."""
    if not block.dropped:
        return None
    return tuple(p for p in range(block.count) if p not in block.dropped)


@attrs.frozen
class _Part:
    """One block of a :class:`RecordSequence`: where it is, how many of its records count, and
    which (None: all)."""

    offset: int
    length: int
    count: int
    positions: tuple[int, ...] | None


class RowSource(abc.ABC):
    """Records that can be read as their rows (field values in ``ITERATION_FIELDS`` order)
    without making a record of each: what :func:`record_fields` reads fields from."""

    @abc.abstractmethod
    def rows(self) -> Iterator[Row]:
        """Each record's row, in order."""

    def fields(self, *names: str) -> Iterator[tuple[Any, ...]]:
        """:func:`record_fields` of these records."""
        return _tuples(operator.itemgetter(*(FIELD_INDEX[name] for name in names)), self.rows(), names)

    def field_blocks(self, *names: str) -> Iterator[list[Sequence[Any]]]:
        """:func:`record_field_blocks` of these records."""
        return _blocks(self.fields(*names), len(names))


_STEP_TIME = FIELD_INDEX["step_time_s"]
_BODY_PLACES = [FIELD_INDEX[name] for name in BODY_FIELDS]
_row_body = operator.itemgetter(*_BODY_PLACES)
_ALL_PLACES = range(len(ITERATION_FIELDS))


@attrs.frozen
class _Step:
    """A :data:`ColumnFunction` given to :meth:`RecordSequence.map_columns`, and the places in a
    row of the fields it reads and of those it changes."""

    function: ColumnFunction
    reads: tuple[int, ...]
    changes: tuple[int, ...]


def _rows_through(function: RowFunction, places: list[int], columns: list[Sequence[Any]]) -> list[Sequence[Any]]:
    """The columns at ``places`` of a block whose columns (every field's) are ``columns``,
    after ``function`` was applied to each row."""
    rows = list(map(function, zip(*columns, strict=True)))
    if not rows:
        return [columns[place] for place in places]
    changed = list(zip(*rows, strict=True))
    return [changed[place] for place in places]


def memory_only_row(row: Row) -> bool:
    """:func:`~tprimat.contract.records.is_memory_only` of the record whose row is ``row``."""
    return row[_STEP_TIME] is None and _row_body(row) == EMPTY_BODY


class RecordSequence(Sequence[IterationRecord], RowSource):
    """Records in a :class:`RecordFile`, sorted by iteration: a read-only sequence that reads
    a block at a time.

    Each read makes new record objects (the block read last is kept), so a pass over all
    of them holds one block.  :meth:`rows` reads the stored values and makes no records
    (nor does :func:`record_fields`).  :meth:`map_columns` gives the same records with a
    function applied to each block's columns as they are read, which is how they are filled
    in after collection (:meth:`map_rows`: to each row).
    """

    def __init__(self, file: RecordFile, parts: list[_Part], steps: tuple[_Step, ...] = ()) -> None:
        self._file = file
        self._parts = parts
        self._steps = steps
        self._starts = [0]
        for part in parts:
            self._starts.append(self._starts[-1] + part.count)
        self._loaded: tuple[int, list[IterationRecord]] | None = None

    def map_columns(self, function: ColumnFunction, *, reads: Iterable[str], changes: Iterable[str]) -> RecordSequence:
        """These records, each block's columns passed through ``function`` when read (after those before).

        ``function`` takes a block's columns of the fields ``reads`` (in that order) and returns
        the block's new columns of the fields ``changes`` (in that order), whose values were
        checked as a record's would be.  A pass that reads none of ``changes`` skips it.
        """
        step = _Step(function, tuple(FIELD_INDEX[name] for name in reads), tuple(FIELD_INDEX[name] for name in changes))
        return RecordSequence(self._file, self._parts, (*self._steps, step))

    def map_rows(self, function: RowFunction, *, changes: Iterable[str]) -> RecordSequence:
        """These records, each row passed through ``function`` when read (after the functions before).

        ``function`` takes a row and returns the row of the record as it should be: the same
        tuple, or a new one whose changed values were checked as a record's would be.
        ``changes`` names the fields it may change: :meth:`fields` of the others skips it.
        """
        names = tuple(changes)
        through = functools.partial(_rows_through, function, [FIELD_INDEX[name] for name in names])
        return self.map_columns(through, reads=ITERATION_FIELDS, changes=names)

    def rows(self) -> Iterator[Row]:
        """Each record's row, in order, a block at a time (no record is made)."""
        return itertools.chain.from_iterable(map(self._rows, range(len(self._parts))))

    def fields(self, *names: str, timed: bool = False) -> Iterator[tuple[Any, ...]]:
        """:func:`record_fields` of these records (``timed``: of those that are not memory lines
        alone): only those fields are read from the file (and those the functions given to
        :meth:`map_columns` that change them read)."""
        return itertools.chain.from_iterable(itertools.starmap(zip, self.field_blocks(*names, timed=timed)))

    def field_blocks(self, *names: str, timed: bool = False) -> Iterator[list[Sequence[Any]]]:
        """The columns of the fields ``names`` of each block of records, in order (see :meth:`fields`)."""
        places = [FIELD_INDEX[name] for name in names]
        return map(functools.partial(self._part_fields, places, timed), range(len(self._parts)))

    def _part_fields(self, places: list[int], timed: bool, index: int) -> list[Sequence[Any]]:
        """The columns at ``places`` of part ``index`` (see :meth:`fields`)."""
        if not timed:
            return self._part_columns(index, places)
        columns = self._part_columns(index, [*places, _STEP_TIME])
        steps = columns.pop()
        if None in steps:  # a record without a step time may be a memory line alone
            bodies = zip(*self._part_columns(index, _BODY_PLACES), strict=True)
            kept = [step is not None or body != EMPTY_BODY for step, body in zip(steps, bodies, strict=True)]
            columns = [list(itertools.compress(column, kept)) for column in columns]
        return columns

    def _part_columns(self, index: int, places: Sequence[int]) -> list[Sequence[Any]]:
        """The columns at ``places`` of part ``index``, through the steps of :meth:`map_columns`
        that change any of them (and those that change what those read)."""
        needed = set(places)
        steps: list[_Step] = []
        for step in reversed(self._steps):
            if not needed.isdisjoint(step.changes):
                steps.append(step)
                needed.update(step.reads)
        part = self._parts[index]
        wanted = sorted(needed)
        read = self._file.read_columns(part.offset, part.length, wanted)
        if part.positions is not None:
            read = [[column[p] for p in part.positions] for column in read]
        columns = dict(zip(wanted, read, strict=True))
        for step in reversed(steps):
            changed = step.function([columns[place] for place in step.reads])
            columns.update(zip(step.changes, changed, strict=True))
        return [columns[place] for place in places]

    def row_slice(self, start: int, stop: int) -> list[Row]:
        """The rows of the records ``start`` to ``stop`` (a slice's bounds, within the sequence)."""
        return list(zip(*self.column_slice(start, stop), strict=True))

    def column_slice(self, start: int, stop: int) -> list[Sequence[Any]]:
        """The columns (every field's, in ``ITERATION_FIELDS`` order) of the records ``start`` to
        ``stop`` (a slice's bounds, within the sequence)."""
        pieces: list[list[Sequence[Any]]] = []
        while start < stop:
            block = bisect.bisect_right(self._starts, start) - 1
            first = self._starts[block]
            pieces.append([column[start - first : stop - first] for column in self._part_columns(block, _ALL_PLACES)])
            start = self._starts[block + 1]
        if len(pieces) == 1:
            return pieces[0]
        return [list(itertools.chain.from_iterable(parts)) for parts in zip(*pieces, strict=True)] or [
            [] for _ in _ALL_PLACES
        ]

    def __len__(self) -> int:
        return self._starts[-1]

    def _rows(self, index: int) -> list[Row]:
        """The rows of part ``index``, through the functions of :meth:`map_columns`."""
        return list(zip(*self._part_columns(index, _ALL_PLACES), strict=True))

    def _block(self, index: int) -> list[IterationRecord]:
        if self._loaded is not None and self._loaded[0] == index:
            return self._loaded[1]
        records = list(map(record_from, self._rows(index)))
        self._loaded = (index, records)
        return records

    @overload
    def __getitem__(self, index: int) -> IterationRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[IterationRecord]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            found: list[IterationRecord] = []
            while start < stop:
                block = bisect.bisect_right(self._starts, start) - 1
                first = self._starts[block]
                found.extend(self._block(block)[start - first : stop - first])
                start = self._starts[block + 1]
            return found
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("record index out of range")
        block = bisect.bisect_right(self._starts, index) - 1
        return self._block(block)[index - self._starts[block]]

    def __iter__(self) -> Iterator[IterationRecord]:
        for index in range(len(self._parts)):
            yield from self._block(index)


def _tuples(getter: Callable[[Row], Any], rows: Iterable[Row], names: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    values = map(getter, rows)
    return values if len(names) > 1 else zip(values)


def record_field_blocks(records: Iterable[IterationRecord], *names: str) -> Iterator[list[Sequence[Any]]]:
    """:func:`record_fields`, a block of records at a time: each block as the columns of the
    fields ``names`` (for records kept in a file, as they are read back, never made into tuples)."""
    if isinstance(records, RowSource):
        return records.field_blocks(*names)
    return _blocks(record_fields(records, *names), len(names))


def _blocks(fields: Iterator[tuple[Any, ...]], count: int) -> Iterator[list[Sequence[Any]]]:
    """Tuples of ``count`` fields' values, as the columns of each :data:`BLOCK_RECORDS` of them."""
    while block := list(itertools.islice(fields, BLOCK_RECORDS)):
        yield list(zip(*block, strict=True)) or [()] * count


def record_fields(records: Iterable[IterationRecord], *names: str) -> Iterator[tuple[Any, ...]]:
    """The values of the fields ``names`` of each of ``records``, as tuples, in order.

    For records kept in a file (a :class:`RowSource`), read from their rows without making
    the records: a pass that needs a few fields costs a quarter as much.
    """
    if isinstance(records, RowSource):
        return records.fields(*names)
    getter = operator.attrgetter(*names)
    return map(getter, records) if len(names) > 1 else zip(map(getter, records))
