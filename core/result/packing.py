"""Iteration records as compact bytes: how log readers hand records between processes; and
records made again from their values (:func:`record_from`, also for the rows a long run
keeps on disk, :mod:`tprimat.result.spill`).

Pickle stores an attrs record as a dict of its fields' names and values; here a record is the
tuple of its values, and is made again by a generated function that sets each slot directly
(its values were checked when the record was first made).

Between processes, the records of a batch of events go as one list of those tuples (and
:class:`~tprimat.contract.records.IterationBlock` events as their columns) by :mod:`marshal`,
which reads them back faster than pickle and, unlike pickle, keeps a value
that several records share (a memory figure, a loss scale: one float object in the reader)
one object on the other side; the other events are pickled as pickle does.

A worker seals a block it can (:func:`seal`): it checks what the collector would check to take
the block whole, and encodes each column as the records' file stores it
(:func:`encode_column`), so that the collecting process moves it there without decoding and
encoding it again (:class:`SealedBlock`).
"""

from __future__ import annotations

import io
import itertools
import marshal
import operator
import pickle
from collections.abc import Sequence
from typing import Any

import attrs

from tprimat.contract.records import (
    ITERATION_FIELDS,
    FigureColumns,
    IterationBlock,
    IterationRecord,
    LineSources,
    iteration_values,
)
from tprimat.result.plausible import INTS, plausible_columns


class _EventPickler(pickle.Pickler):
    """Pickles an iteration record as the tuple of its fields' values; any other object as pickle does."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is IterationRecord:
            return record_from, (iteration_values(obj),)
        return NotImplemented


def _record_maker() -> Any:
    """A function that makes a record from the tuple of its values, setting each slot directly.

    Generated with one statement per field: a loop over the fields took twice as long, and
    a collector takes in a record per iteration of the run.
    """
    slots = {f"set_{name}": IterationRecord.__dict__[name].__set__ for name in ITERATION_FIELDS}
    lines = [f"    set_{name}(record, values[{index}])" for index, name in enumerate(ITERATION_FIELDS)]
    source = "\n".join(["def record_from(values):", "    record = new(IterationRecord)", *lines, "    return record"])
    # __name__: the function is pickled by reference, as this module's record_from.
    namespace = {"__name__": __name__, "new": object.__new__, "IterationRecord": IterationRecord, **slots}
    exec(source, namespace)  # noqa: S102  (text built above from the record's own field names)
    return namespace["record_from"]


#: The record whose values are ``values`` (a tuple in ``ITERATION_FIELDS`` order).
record_from = _record_maker()


#: The marshal format of a stored column: version 2, which writes every value in full.  Later
#: versions write a value several places hold once and refer to it, which means looking each
#: value up as it is written (twice the time, and a slice of a column is held by two places),
#: to save a few bytes a value and objects that a column read back for one pass does not keep.
_STORED = 2


def encode_column(values: Sequence[Any]) -> bytes:
    """A column of values as bytes: by :mod:`marshal` (fast to write and to read back), or by
    pickle for what marshal does not write; a column of
    dicts (the framework's figures) as :class:`FigureColumns` where that keeps it exactly."""
    if type(values) is FigureColumns or (values and type(values[0]) is dict):
        figures = _figures_bytes(values)
        if figures is not None:
            return figures
    elif type(values) is LineSources:
        return encode_sources(values.prefix, values.lines)
    try:
        return b"M" + marshal.dumps(values, _STORED)  # type: ignore[arg-type]  # a tuple or list (else ValueError)
    except ValueError:  # an instance of a subclass of a built-in type
        return b"P" + pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)


def encode_sources(prefix: str, lines: Sequence[int]) -> bytes:
    """The sources of records that are lines of one file (``prefix``: its ``name:``) as bytes
    for the records' file, as :func:`encode_column` would store their texts: the prefix and the
    line numbers, without a text made per record (read back as :class:`LineSources`)."""
    return b"S" + marshal.dumps((prefix, list(lines)), _STORED)


def decode_column(data: memoryview) -> Sequence[Any]:
    """The column :func:`encode_column` or :func:`encode_sources` made ``data`` of (a tuple, a
    list, :class:`FigureColumns` or :class:`LineSources`)."""
    column: Sequence[Any]
    if data[0] == ord("M"):
        column = marshal.loads(data[1:])  # noqa: S302  (written by this process or its own workers)
    elif data[0] == ord("F"):
        column = FigureColumns(*marshal.loads(data[1:]))  # noqa: S302  (likewise)
    elif data[0] == ord("S"):
        column = LineSources(*marshal.loads(data[1:]))  # noqa: S302  (likewise)
    else:
        column = pickle.loads(data[1:])  # noqa: S301  (likewise)
    return column


def _figures_bytes(values: Sequence[Any]) -> bytes | None:
    """``values`` (a dict per record) as :class:`FigureColumns` bytes, or None where a dict holds
    a None or a value marshal does not write (a None and no figure would then read back alike)."""
    if type(values) is FigureColumns:
        names, columns = values.names, values.columns
    else:
        if set(map(type, values)) != _DICT_ONLY:
            return None
        names = tuple(sorted(set().union(*values)))
        columns = tuple(list(map(dict.get, values, itertools.repeat(name))) for name in names)
        if sum(map(len, values)) != sum(len(column) - column.count(None) for column in columns):
            return None
    try:
        return b"F" + marshal.dumps((len(values), names, columns), _STORED)
    except ValueError:  # an instance of a subclass of a built-in type
        return None


_DICT_ONLY = {dict}


def figure_columns(reported: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """The figures of ``reported`` (a dict per record, or :class:`FigureColumns`) as one list per
    name that has a value, None where a record has none (names in no useful order)."""
    if type(reported) is FigureColumns:
        found = dict(zip(reported.names, reported.columns, strict=True))
    else:
        found = {name: list(map(dict.get, reported, itertools.repeat(name))) for name in set().union(*reported)}
    return {name: column for name, column in found.items() if _has_value(column)}


def _has_value(column: list[Any]) -> bool:
    """Whether some value of ``column`` is not None (told by its ends first: most columns are full)."""
    if not column:
        return False
    return column[0] is not None or column[-1] is not None or column.count(None) < len(column)


_ITERATION = ITERATION_FIELDS.index("iteration")
_SOURCE = ITERATION_FIELDS.index("source")


@attrs.frozen
class SealedBlock:
    """A run of iteration records a worker checked and encoded for the records' file.

    Its iterations ascend, every figure is plausible and no record is a memory line alone
    (:func:`~tprimat.result.plausible.plausible_columns`): what the collector checks before it
    takes a block whole.  Every column but ``source`` is encoded as the file stores it
    (:func:`encode_column`, ``b""`` in the source's place); the sources, all lines of one file,
    are that file's ``name:`` and each record's line number, which the collecting process
    shifts once it knows where the worker's range starts.
    """

    first: int
    last: int
    count: int
    source_prefix: str
    lines: list[int]
    encoded: tuple[bytes, ...]

    def __len__(self) -> int:
        return self.count

    def sources(self) -> list[str]:
        """Each record's source (``name:line``)."""
        return list(map(self.source_prefix.__add__, map(str, self.lines)))

    def block(self) -> IterationBlock:
        """The block of the records, decoded."""
        columns = (
            self.sources() if place == _SOURCE else _decoded_list(memoryview(data))
            for place, data in enumerate(self.encoded)
        )
        return IterationBlock(columns=tuple(columns))


def _decoded_list(data: memoryview) -> Any:
    """A column :func:`encode_column` made ``data`` of, as a list (:class:`FigureColumns` as they are)."""
    column = decode_column(data)
    return column if type(column) is FigureColumns else list(column)


def seal(block: IterationBlock, size: int) -> list[SealedBlock] | None:
    """``block`` as sealed blocks of at most ``size`` records each (as few as hold them, of
    sizes that differ by one at most), or None where it is not
    sealed: a block of fewer than a quarter of ``size`` records (the records' file would hold it
    as a small block, which every later pass reads on its own; the collector joins unsealed
    ones into whole blocks), iterations that do not ascend, a figure :func:`plausible_columns`
    doubts, or sources that are not all ``name:line`` of one file, the line written as ``str``
    writes it."""
    columns = block.columns
    iterations = columns[_ITERATION]
    if (
        not iterations
        or len(iterations) < size // 4
        or set(map(type, iterations)) != INTS
        or not all(map(operator.lt, iterations, itertools.islice(iterations, 1, None)))
        or not plausible_columns(columns)
    ):
        return None
    found = _source_lines(columns[_SOURCE])
    if found is None:
        return None
    prefix, lines = found
    sealed = []
    count = len(iterations)
    pieces = -(-count // size)  # as few as hold them, of sizes that differ by one at most
    for piece in range(pieces):
        start, stop = count * piece // pieces, count * (piece + 1) // pieces
        encoded = tuple(
            b"" if place == _SOURCE else encode_column(_part(column, start, stop))
            for place, column in enumerate(columns)
        )
        sealed.append(
            SealedBlock(iterations[start], iterations[stop - 1], stop - start, prefix, lines[start:stop], encoded)
        )
    return sealed


def _part(column: Sequence[Any], start: int, stop: int) -> Sequence[Any]:
    """The values ``start`` to ``stop`` of a block's column, to encode: a tuple (marshal keeps it
    so), figures by name as they are."""
    return column[start:stop] if type(column) is FigureColumns else tuple(column[start:stop])


def _source_lines(sources: Sequence[Any]) -> tuple[str, list[int]] | None:
    """The file (``name:``) and line numbers of ``sources`` when all are ``name:line`` of one file.

    Given as :class:`LineSources`, they are; else split in C: the sources joined by newlines,
    split at each newline and ``name:``; one that is not ``name:`` and digits leaves a piece
    that is not digits alone, or another count."""
    if type(sources) is LineSources:
        return sources.prefix, sources.lines
    if set(map(type, sources)) != _STR_ONLY:
        return None
    name, colon, _ = sources[0].rpartition(":")
    prefix = name + colon
    joined = "\n".join(sources)
    if not colon or not joined.startswith(prefix):
        return None
    texts = joined[len(prefix) :].split("\n" + prefix)
    digits = "".join(texts)
    if len(texts) != len(sources) or "" in texts or not (digits.isdigit() and digits.isascii()):
        return None
    lines = list(map(int, texts))
    return (prefix, lines) if list(map(str, lines)) == texts else None


_STR_ONLY = {str}


def joined_blocks(events: list[Any]) -> list[Any]:
    """``events`` with each run of iteration blocks that follow one another as one block: each
    block's iterations above the one's before, its sources and figures of the same form (lines
    of one file, figures by the same names).  A parser yields a block per chunk it reads; joined,
    they are sealed in pieces as large as the records' file holds, whatever the chunks' size."""
    joined: list[Any] = []
    run: list[IterationBlock] = []
    for event in events:
        if type(event) is IterationBlock and event and (not run or _follows(run[-1], event)):
            run.append(event)
            continue
        joined.extend(_join(run))
        run = []
        if type(event) is IterationBlock and event:
            run.append(event)
        else:
            joined.append(event)
    joined.extend(_join(run))
    return joined


def _follows(before: IterationBlock, block: IterationBlock) -> bool:
    """Whether ``block`` joins ``before`` (see :func:`joined_blocks`)."""
    if not before.columns[_ITERATION][-1] < block.columns[_ITERATION][0]:
        return False
    for earlier, later in zip(before.columns, block.columns, strict=True):
        if type(earlier) is not type(later):
            return False
        if isinstance(earlier, LineSources) and earlier.prefix != later.prefix:  # type: ignore[attr-defined]
            return False
        if isinstance(earlier, FigureColumns) and earlier.names != later.names:  # type: ignore[attr-defined]
            return False
    return True


def _join(run: list[IterationBlock]) -> list[IterationBlock]:
    """The blocks of ``run`` (each following the one before) as one block."""
    if len(run) < 2:
        return run
    columns: list[Any] = []
    for parts in zip(*(block.columns for block in run), strict=True):
        first = parts[0]
        if type(first) is FigureColumns:
            by_name = zip(*(part.columns for part in parts), strict=True)
            count = sum(map(len, parts))
            columns.append(FigureColumns(count, first.names, list(map(_concatenated, by_name))))
        elif type(first) is LineSources:
            columns.append(LineSources(first.prefix, _concatenated([part.lines for part in parts])))
        else:
            columns.append(_concatenated(parts))
    return [IterationBlock(columns=tuple(columns))]


def _concatenated(parts: Sequence[Sequence[Any]]) -> list[Any]:
    """The values of ``parts`` in one list (by ``extend``, a copy of each part in C)."""
    joined = list(parts[0])
    for part in parts[1:]:
        joined.extend(part)
    return joined


def pack(events: list[Any], seal_records: int | None = None) -> bytes:
    """``events`` (iteration records and blocks, any other picklable events) as bytes, for a
    process forked from this one (:func:`unpack`).

    A record goes as the tuple of its values and an :class:`IterationBlock` as its columns,
    all by one :mod:`marshal` call (which writes the ``reported`` dicts as dicts, equal when
    read back), or with ``seal_records``, blocks that follow one another joined
    (:func:`joined_blocks`) and a block that can be sealed as :class:`SealedBlock` pieces of
    at most that many records; only if marshal refuses a value (an instance of a
    subclass of a built-in type) does the whole batch go by pickle, unsealed.
    """
    rows, blocks, block_places, sealed, sealed_places, others, places = [], [], [], [], [], [], []
    place = 0
    for event in joined_blocks(events) if seal_records else events:
        kind = type(event)
        if kind is IterationRecord:
            rows.append(iteration_values(event))
        elif kind is IterationBlock:
            pieces = seal(event, seal_records) if seal_records else None
            if pieces is None:  # its columns as lists: figures by name as their dicts, sources as texts
                blocks.append(tuple(column if type(column) is list else list(column) for column in event.columns))
                block_places.append(place)
            else:
                for piece in pieces:
                    sealed.append(attrs.astuple(piece, recurse=False))
                    sealed_places.append(place)
                    place += 1
                continue
        else:
            others.append(event)
            places.append(place)
        place += 1
    try:
        marshalled: bytes | None = marshal.dumps((rows, blocks, sealed))
    except ValueError:  # a value marshal does not write: all pickled
        marshalled, others, places, block_places, sealed_places = None, events, [], [], []
    buffer = io.BytesIO()
    _EventPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(
        (marshalled, others, places, block_places, sealed_places)
    )
    return buffer.getvalue()


def unpack(data: bytes) -> list[Any]:
    """The events :func:`pack` made ``data`` of, in their order (a block as a block, a sealed
    block as a :class:`SealedBlock`)."""
    marshalled, others, places, block_places, sealed_places = pickle.loads(data)  # noqa: S301  (bytes this process's own workers wrote)
    if marshalled is None:
        return list(others)
    rows, blocks, sealed = marshal.loads(marshalled)  # noqa: S302  (likewise)
    records = list(map(record_from, rows))
    if not others and not blocks and not sealed:
        return records
    events: list[Any] = [None] * (len(records) + len(blocks) + len(others) + len(sealed))
    for place, event in zip(places, others, strict=True):
        events[place] = event
    for place, columns in zip(block_places, blocks, strict=True):
        events[place] = IterationBlock(columns=columns)
    for place, fields in zip(sealed_places, sealed, strict=True):
        events[place] = SealedBlock(*fields)
    taken = {*places, *block_places, *sealed_places}
    for place, record in zip((p for p in range(len(events)) if p not in taken), records, strict=True):
        events[place] = record
    return events
