"""Writing a result: its JSON text, piece by piece, so that writing a long run never holds it whole.

The document is strict JSON indented by two spaces, as ``json.dumps(..., indent=2)`` writes
it, but for its iterations: an object with one member per field of the record
(:mod:`tprimat.result.iterjson`), each member on one line, its array written compactly
(no spaces), ``reported`` an array of objects::

    "iterations": {
      "iteration": [1,2,3],
      "step_time_s": [0.512,0.498,0.5],
      ...
      "reported": {
        "loss_scale": [1.0,1.0,1.0],
        "tflops_per_gpu": [301.2,302.0,null]
      }
    },

``reported`` (the framework's own figures) an object of one such line per figure name, so
that a field's values are one line (``jq -c .iterations.loss result.json``; a diff of two
results names the fields that differ) and the file takes a few bytes per value.

Each column is encoded a block of records at a time, read one field at a time (records kept
in a file, :class:`~tprimat.result.spill.RecordSequence`, are read from their stored columns,
no record made): memory holds one block of one column, whatever the length of the run.  A
block is one call of msgspec's encoder, or of json's C encoder where msgspec would spell a
value otherwise (a float with an exponent, non-ASCII text; see :func:`values_text`): either
way floats are spelled as ``repr`` spells them, NaN and the infinities as the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"``, and text as json escapes it.  For a long run the
last members (:data:`FORKED_FIELDS`, ``reported`` among them) are written meanwhile by a forked
child, whose bytes are then copied as they are (:data:`FORKED_RECORDS`); or all the members
are, by two children started as soon as the records are final, while the result is still
being summarised (:func:`write_ahead`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import operator
import os
import tempfile
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, repeat
from operator import is_
from pathlib import Path
from typing import Any

import attrs
import msgspec

from tprimat.atomic import atomic_write_bytes
from tprimat.contract.records import ITERATION_FIELDS, LineSources
from tprimat.result import schema
from tprimat.result.floattext import ALIKE_BEYOND, ALIKE_LEAST, numbers_text
from tprimat.result.packing import figure_columns
from tprimat.result.spill import RowSource
from tprimat.workers import fork_call, fork_helps

_MEMBER_INDENT = " " * 4  # "iterations" is a key of the top-level object: its members are two levels in
#: Records of a list whose column is encoded by one msgspec call (records kept in a file go
#: by their stored blocks).
BLOCK_RECORDS = 8192


def write_result(result: Any, path: str | Path) -> Path:
    """Write ``result`` to ``path`` atomically (never a half-written file), in bounded memory."""
    return atomic_write_bytes(path, _encoded(_result_pieces(result)))


def iter_result_json(result: Any) -> Iterator[str]:
    """The pieces of ``result``'s JSON text, in order (see the module's docstring)."""
    for piece in _result_pieces(result):
        if isinstance(piece, str):
            yield piece
        else:
            yield from piece.text()


def _encoded(pieces: Iterable[str | _ForkedMembers]) -> Iterator[bytes]:
    """``pieces`` in UTF-8, the members a child wrote copied as their bytes."""
    for piece in pieces:
        if isinstance(piece, str):
            yield piece.encode("utf-8")
        else:
            yield from piece.chunks()


def _result_pieces(result: Any) -> Iterator[str | _ForkedMembers]:
    """The pieces of ``result``'s JSON text, in order; the last members, for a long run, as a
    child writes them (to be read before the next piece is asked for)."""
    skeleton = schema.result_to_dict(attrs.evolve(result, iterations=[]))
    mark = f"tprimat-iterations-{uuid.uuid4().hex}"  # no other string of the document is this one
    skeleton["iterations"] = mark
    before, _, after = (json.dumps(skeleton, indent=2, allow_nan=False) + "\n").partition(json.dumps(mark))
    yield before + "{"
    ahead = _AHEAD.pop(result.iterations, None) if isinstance(result.iterations, RowSource) else None
    if ahead is not None:  # written meanwhile by children (see `write_ahead`)
        try:
            yield from ahead
        finally:
            _close(ahead)
        yield "\n  }" + after
        return
    held = _held_columns(result.iterations)
    with _ForkedMembers.of(result.iterations, FORKED_FIELDS) as forked:
        for index, name in enumerate(ITERATION_FIELDS):
            if forked is not None and name == FORKED_FIELDS[0]:
                yield forked
                break
            yield from _member_text(
                index, name, _column_blocks(result.iterations, name) if held is None else _in_blocks(held[index])
            )
    yield "\n  }" + after


def _member_text(index: int, name: str, blocks: Iterable[Sequence[Any]]) -> Iterator[str]:
    """The member of the iterations object for the field ``name`` (the ``index``-th), its values
    given a block at a time."""
    if name == "reported":
        yield ("," if index else "") + "\n" + _MEMBER_INDENT + '"reported": {'
        yield from _figures_text(blocks)
        yield "}"
        return
    yield ("," if index else "") + "\n" + _MEMBER_INDENT + json.dumps(name) + ": ["
    yield from _column_text(blocks)
    yield "]"


_FIGURE_INDENT = _MEMBER_INDENT + "  "
#: Records whose "null"s are written at once where a figure is absent.
_NULLS_AT_ONCE = 8192


def _figures_text(blocks: Iterable[Sequence[dict[str, Any]]]) -> Iterator[str]:
    """The members of ``reported``'s object: one array per figure name, in sorted order, null
    where a record has no such figure (see :mod:`tprimat.result.iterjson`).

    The records' figures are given a block of records at a time (a dict per record, or kept by
    name: :class:`~tprimat.contract.records.FigureColumns`).  Each block's text of each name
    goes to a temporary file as it comes, so memory holds one block,
    and the names' arrays are then read back from it name by name.  A name whose every value
    is None is left out, as :func:`~tprimat.result.iterjson.reported_columns` leaves it out.
    """
    with tempfile.TemporaryFile() as spool:
        pieces: dict[str, list[tuple[int, int] | int]] = {}  # a piece of text in the file, or that many nulls
        covered: dict[str, int] = {}  # records each name's pieces cover
        count = offset = 0
        for values in blocks:
            for name, column in figure_columns(values).items():
                held = pieces.setdefault(name, [])
                if covered.get(name, 0) < count:
                    held.append(count - covered.get(name, 0))
                data = _figure_text(column)
                spool.write(data)
                held.append((offset, len(data)))
                offset += len(data)
                covered[name] = count + len(values)
            count += len(values)
        spool.flush()
        separator = "\n"
        for name, held in sorted(pieces.items()):
            if covered[name] < count:
                held.append(count - covered[name])
            yield separator + _FIGURE_INDENT + json.dumps(name) + ": ["
            yield from _pieces_text(spool.fileno(), held)
            yield "]"
            separator = ",\n"
        if pieces:
            yield "\n" + _MEMBER_INDENT


def _figure_text(values: list[Any]) -> bytes:
    """A figure's column (None where a record has none) as the UTF-8 items of a JSON array."""
    text = numbers_text(values)
    return text if text is not None else values_text(values).encode("utf-8")


def _pieces_text(fd: int, pieces: list[tuple[int, int] | int]) -> Iterator[str]:
    """The items of one figure's array: its pieces of text in the file ``fd``, and runs of nulls."""
    separator = ""
    for piece in pieces:
        if isinstance(piece, int):
            for start in range(0, piece, _NULLS_AT_ONCE):
                yield separator + ",".join(repeat("null", min(_NULLS_AT_ONCE, piece - start)))
                separator = ","
        else:
            yield separator + os.pread(fd, piece[1], piece[0]).decode("utf-8")
            separator = ","


def _column_text(blocks: Iterable[Sequence[Any]]) -> Iterator[str]:
    """A column's values, given a block of records at a time, as the items of a JSON array."""
    separator = ""
    for values in blocks:
        if values:
            yield separator + values_text(values)
            separator = ","


#: Up to this many records kept in a file, their columns are read in one pass over the file and
#: held (a few MB): read a field at a time, every block of the file is read once per field.
HELD_RECORDS = 32768


#: From this many records kept in a file, the members of the last fields (:data:`FORKED_FIELDS`)
#: are written by a forked child while this process writes the others, and read back from the
#: child's temporary file.
FORKED_RECORDS = HELD_RECORDS
#: The fields the child writes: about half of the work, ``reported`` (the framework's own
#: figures, objects) the costliest of all.
FORKED_FIELDS = ITERATION_FIELDS[ITERATION_FIELDS.index("mem_device_used_gib") :]
#: Characters (or bytes) read at a time from the child's file.
_TEXT_CHUNK = 1 << 22


#: The fields of the children that write a long run's iterations ahead (:func:`write_ahead`),
#: each about half of the work: the framework's own figures the costliest, with the few before.
AHEAD_SHARES = (
    ITERATION_FIELDS[: ITERATION_FIELDS.index("mem_device_used_gib")],
    ITERATION_FIELDS[ITERATION_FIELDS.index("mem_device_used_gib") :],
)
#: Records kept in a file whose members children are writing ahead, by the records' object.
_AHEAD: weakref.WeakKeyDictionary[Any, list[_ForkedMembers]] = weakref.WeakKeyDictionary()


def write_ahead(iterations: Sequence[Any]) -> None:
    """Start writing the iterations object's members of ``iterations`` in forked children, for
    :func:`write_result` to copy once the rest of the result is known.

    Called by whoever will write the result as soon as its records are final (before they are
    summarised), so that the file is written while the summary is computed: on records kept
    in a file from :data:`FORKED_RECORDS` on, where a child helps (else nothing starts, and the
    result is written as usual).  The children end, and their files close, when the records
    are dropped or the result is written; a result written of other records writes its own.
    """
    if not isinstance(iterations, RowSource) or len(iterations) < FORKED_RECORDS or not fork_helps():
        return
    # The children's calls (made here too, should a child fail) reach the records by a weak
    # proxy: a reference from the shares would keep them, and the children, alive forever.
    records = weakref.proxy(iterations)
    shares = [_ForkedMembers(records, names, yielding=True) for names in AHEAD_SHARES]  # the summary first
    _AHEAD[iterations] = shares
    weakref.finalize(iterations, _close, shares)


def _close(shares: list[_ForkedMembers]) -> None:
    for share in shares:
        share.close()


class _ForkedMembers:
    """Members of the iterations object, written into a temporary file by a forked child."""

    def __init__(self, iterations: Sequence[Any], names: Sequence[str], *, yielding: bool = False) -> None:
        self._spool = tempfile.TemporaryFile()
        call = functools.partial(_write_members, iterations, names, self._spool.fileno())
        self._call = fork_call(call, yielding=yielding)

    @classmethod
    @contextlib.contextmanager
    def of(cls, iterations: Sequence[Any], names: Sequence[str]) -> Iterator[_ForkedMembers | None]:
        """The members ``names`` of ``iterations`` under way in a child, for records kept in a
        file from :data:`FORKED_RECORDS` on (else None: this process writes them); the child is
        ended and the file closed on leaving."""
        if not isinstance(iterations, RowSource) or len(iterations) < FORKED_RECORDS or not fork_helps():
            yield None
            return
        forked = cls(iterations, names)
        try:
            yield forked
        finally:
            forked.close()

    def close(self) -> None:
        """End the child if it still runs, and close its file."""
        self._call.cancel()
        self._spool.close()

    def text(self) -> Iterator[str]:
        """The members' text, once the child has written it (or, where it failed, written here)."""
        with open(self._written(), encoding="utf-8", closefd=False) as text:
            while piece := text.read(_TEXT_CHUNK):
                yield piece

    def chunks(self) -> Iterator[bytes]:
        """The members' text in UTF-8, as :meth:`text`."""
        with open(self._written(), "rb", closefd=False) as data:
            while piece := data.read(_TEXT_CHUNK):
                yield piece

    def _written(self) -> int:
        """The file the members are written in, read from its start (once they are written)."""
        self._call.result()
        fd = self._spool.fileno()
        os.lseek(fd, 0, os.SEEK_SET)
        return fd


def _write_members(iterations: Sequence[Any], names: Sequence[str], fd: int) -> None:
    """Write the members ``names`` (the last fields) of ``iterations`` into the file ``fd``, from its start."""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "w", encoding="utf-8", closefd=False) as out:
        for name in names:
            index = ITERATION_FIELDS.index(name)
            out.writelines(_member_text(index, name, _column_blocks(iterations, name)))


def _held_columns(iterations: Sequence[Any]) -> list[list[Any]] | None:
    """Every column of records kept in a file, when they are few (see :data:`HELD_RECORDS`)."""
    if not isinstance(iterations, RowSource) or len(iterations) > HELD_RECORDS:
        return None
    columns: list[list[Any]] = [[] for _ in ITERATION_FIELDS]
    for block in iterations.field_blocks(*ITERATION_FIELDS):
        for column, values in zip(columns, block, strict=True):
            column.extend(values)
    return columns


def _in_blocks(values: list[Any]) -> Iterator[list[Any]]:
    """``values`` a block of :data:`BLOCK_RECORDS` at a time."""
    return (values[start : start + BLOCK_RECORDS] for start in range(0, len(values), BLOCK_RECORDS))


def _column_blocks(iterations: Sequence[Any], name: str) -> Iterator[Sequence[Any]]:
    """The values of the field ``name`` of each of ``iterations``, a block of records at a time."""
    if isinstance(iterations, RowSource):  # records kept in a file: their stored columns
        for (values,) in iterations.field_blocks(name):
            yield values
        return
    value = operator.attrgetter(name)
    for start in range(0, len(iterations), BLOCK_RECORDS):
        yield list(map(value, iterations[start : start + BLOCK_RECORDS]))


_SCALAR_TYPES = frozenset({float, int, str, bool, type(None)})
#: Values whose JSON text msgspec's text tells as json's or not by its characters (see
#: :func:`~tprimat.result.floattext.numbers_text`).
_NUMBERS_OR_NONE = frozenset({float, int, type(None)})
#: How the floats of a column are to be written (see :func:`_float_kind`).
_PLAIN, _REPR, _NON_FINITE = range(3)
_COMPACT = (",", ":")


def values_text(values: Sequence[Any]) -> str:
    """``values`` (one field's, of a block of records) as the items of a compact JSON array, as
    ``json.dumps(..., separators=(",", ":"))`` writes them with non-finite floats as strings.

    Decided over the whole column, in C.  A column of numbers (and None) is msgspec's text,
    respelled where msgspec spells a float otherwise than json
    (:func:`~tprimat.result.floattext.numbers_text`).  Other columns: msgspec's text where it
    spells every value as json does (JSON scalars; floats of the magnitudes it writes as
    ``repr``; ASCII text); json's C encoder where other values have floats with exponents or
    text is not ASCII; values that are not finite are first written as their strings (the one
    case that looks at each value in Python).  A block of one value (a batch size, a figure the
    framework repeats, nulls) is that value's text repeated; sources given as line numbers
    (:class:`~tprimat.contract.records.LineSources`) are written from the numbers.
    """
    if not values:
        return ""
    if type(values) is LineSources:
        return _sources_text(values)
    first = values[0]
    if len(values) > 1 and values[-1] == first and first != 0 and values.count(first) == len(values):
        if len(set(map(type, values))) == 1:  # (1, 1.0 and True are equal; so are zeros of both signs)
            return ",".join(repeat(values_text(values[:1]), len(values)))
    if type(first) in _NUMBERS_OR_NONE:  # a column of numbers, most likely: msgspec's text tells
        numbers = numbers_text(values)
        if numbers is not None:
            return numbers.decode("ascii")
    kinds = set(map(type, values))
    how = _float_kind(values, kinds) if kinds <= _SCALAR_TYPES else _NON_FINITE
    if how == _PLAIN:
        text = _plain_text(values)
        if text is not None:
            return text.decode("ascii")
    if how != _NON_FINITE:
        return json.dumps(values, separators=_COMPACT, allow_nan=False)[1:-1]
    return json.dumps(schema._replace_non_finite(list(values)), separators=_COMPACT, allow_nan=False)[1:-1]


def _sources_text(sources: LineSources) -> str:
    """The texts of ``sources`` as JSON strings, as json writes them: the file's name escaped
    once, the line numbers written by msgspec."""
    quoted = json.dumps(sources.prefix)[:-1]  # the opening quote and the escaped name
    numbers = msgspec.json.encode(sources.lines)[1:-1].decode("ascii")
    return quoted + numbers.replace(",", '",' + quoted) + '"'


def _plain_text(values: Sequence[Any]) -> bytes | None:
    """msgspec's items of ``values`` (JSON scalars whose floats it spells as ``repr``), or None
    where it would spell text otherwise than json (not ASCII, or a character json escapes)."""
    try:
        text = msgspec.json.encode(values)
    except (TypeError, ValueError, OverflowError):  # a value msgspec does not write: json writes it
        return None
    return text[1:-1] if text.isascii() and b"\x7f" not in text else None


def _float_kind(column: Sequence[Any], kinds: set[type]) -> int:
    """How msgspec would write the floats of ``column`` (JSON scalars of the ``kinds``):
    :data:`_PLAIN` where each as ``repr`` does (decided by the least and largest float, in C),
    :data:`_REPR` where some float ``repr`` spells with an exponent, :data:`_NON_FINITE` where
    some is NaN or an infinity (or where their sum passes the largest float: that column goes
    the long way, as well)."""
    if float not in kinds:
        return _PLAIN
    floats = column if len(kinds) == 1 else list(compress(column, map(is_, map(type, column), repeat(float))))
    if not math.isfinite(sum(floats)):
        return _NON_FINITE
    least, largest = min(floats), max(floats)
    if least == 0 and largest > 0:  # zeros (spelled alike) and positive floats: the least of those
        least = min(filter(None, floats))
    if _plain(least, largest):
        return _PLAIN
    magnitudes = list(map(abs, filter(None, floats)))  # zero is spelled alike
    if not magnitudes or (min(magnitudes) >= ALIKE_LEAST and max(magnitudes) < ALIKE_BEYOND):
        return _PLAIN
    return _REPR


def _plain(least: float, largest: float) -> bool:
    """Whether every float from ``least`` to ``largest`` (finite, both of one sign, not zero) is
    spelled alike by msgspec and ``repr`` (False where that is not known)."""
    if least > 0:
        return least >= ALIKE_LEAST and largest < ALIKE_BEYOND
    return largest <= -ALIKE_LEAST and least > -ALIKE_BEYOND
