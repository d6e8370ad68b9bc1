"""Writing a result: its JSON text, piece by piece, so that writing a long run never holds it whole.

The text is exactly :func:`tprimat.result.schema.dumps_result`'s (indent 2, strict
JSON): the document without its iterations is encoded once, and each
iteration record is unstructured and encoded on its own, at the depth the
whole-document encoder would have put it.  A run of 40 000 iterations is
written in bounded memory instead of as one dict tree and one string of
hundreds of megabytes.

Iteration records are encoded a thousand at a time by msgspec, in C, from
their fields' columns; the few floats msgspec spells otherwise than json (those
with an exponent) go to it as their ``repr`` text; a batch msgspec would still write otherwise (a NaN or an infinity,
spelled as a string in tprimat's JSON; non-ASCII text, which json escapes)
goes record by record: a record is flat but for its ``reported`` figures, so
it is encoded by two calls of json's C encoder (its scalars, then
``reported``), and one the C encoder refuses goes the general way.

A long run's records are encoded by two processes: a forked child encodes the
second half while this process encodes and writes the first (both cores busy
at the end of ``tprimat parse``); the text is the same as one process's.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Sequence
from itertools import chain, compress, repeat, starmap
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from operator import is_
from pathlib import Path
from typing import Any, cast

import attrs
import msgspec

from tprimat.atomic import atomic_write_text
from tprimat.contract.records import ITERATION_FIELDS, IterationRecord, iteration_values
from tprimat.result import schema
from tprimat.result.childtext import TextInChild
from tprimat.result.packing import record_from
from tprimat.result.spill import RecordSequence

_CONTAINERS = frozenset({dict, list})
_MARK = "\x00tprimat-iterations\x00"
_ITEM_INDENT = " " * 4  # "iterations" is a key of the top-level object: its items are two levels in


def write_result(result: Any, path: str | Path) -> Path:
    """Write ``result`` to ``path`` atomically (never a half-written file), in bounded memory."""
    return atomic_write_text(path, iter_result_json(result))


def iter_result_json(result: Any) -> Iterator[str]:
    """The pieces of ``dumps_result(result)``, in order."""
    iterations = result.iterations
    starts = range(0, len(iterations), BATCH_RECORDS)
    # The second half of a long run's records is encoded by a child process, started first:
    # it works while this process builds the rest of the document and encodes the first half.
    half = len(starts) // 2 if len(iterations) >= FORK_MIN_RECORDS else len(starts)
    rest = TextInChild.start(functools.partial(_batches_text, iterations, starts[half:])) if starts[half:] else None
    try:
        yield from _document_text(result, starts[:half] if rest is not None else starts, rest)
    finally:
        if rest is not None:
            rest.close()


def _document_text(result: Any, starts: Sequence[int], rest: TextInChild | None) -> Iterator[str]:
    """The document's pieces: its records are the batches that begin at ``starts``, then ``rest``'s text."""
    skeleton = schema.result_to_dict(attrs.evolve(result, iterations=[]))
    if not result.iterations or skeleton.get("iterations") != []:
        yield schema.dumps_result(result)
        return
    skeleton["iterations"] = _MARK
    text = json.dumps(skeleton, indent=2, allow_nan=False) + "\n"
    marker = json.dumps(_MARK)
    before, found, after = text.partition(marker)
    if not found or marker in after:
        yield schema.dumps_result(result)
        return
    yield before + "[\n" + _ITEM_INDENT
    yield from _batches_text(result.iterations, starts)
    if rest is not None:
        yield from rest.pieces()
    yield "\n  ]" + after


def _batches_text(iterations: Sequence[Any], starts: Sequence[int]) -> Iterator[str]:
    """The text of the records in the batches that begin at ``starts``, each after its separator
    (but the very first record's)."""
    for start in starts:
        if isinstance(iterations, RecordSequence):  # the stored columns, no record made but where needed
            columns = iterations.column_slice(start, min(start + BATCH_RECORDS, len(iterations)))
            encoded = _columns_text(columns)
            if encoded is None:
                rows = zip(*columns, strict=True)
                encoded = _ITEM_SEPARATOR.join(_record_text(record_from(row), schema) for row in rows)
        else:
            batch = iterations[start : start + BATCH_RECORDS]
            encoded = _batch_text(batch)
            if encoded is None:
                encoded = _ITEM_SEPARATOR.join(_record_text(record, schema) for record in batch)
        yield (_ITEM_SEPARATOR + encoded) if start else encoded


#: From this many iteration records on, a forked child encodes the second half of them
#: while this process encodes and writes the first (see :class:`TextInChild`).
FORK_MIN_RECORDS = 8 * 1024


def _record_text(record: Any, schema: Any) -> str:
    """One iteration record at the iterations' depth, by json's own encoders."""
    encoded = _flat_record(record)
    if encoded is None:
        data = _finite(schema._get_converter().unstructure(record), schema._unstructure_float)
        encoded = _encode(data, 2)
    return encoded


_RECORD_FIELDS = ITERATION_FIELDS
_RECORD_SCALARS = _RECORD_FIELDS[:-1]
_record_values = iteration_values
_SCALAR_TYPES = frozenset({float, int, str, bool, type(None)})
#: The fast path writes ``reported`` after the scalars, where the whole-document encoder puts it.
_REPORTED_LAST = _RECORD_FIELDS[-1] == "reported"


def _flat_record(record: Any) -> str | None:
    """An :class:`IterationRecord` at the iterations' depth, or None to encode it the general way.

    The text of :func:`_encode` for the record's unstructured dict: its scalars by one C
    encoder call, its ``reported`` scalars by another.  None for anything the general way
    spells differently: a non-finite float (written as a string), a ``reported`` value that
    is not a scalar, or a record of another class.
    """
    if type(record) is not IterationRecord or not _REPORTED_LAST:
        return None
    *values, reported = _record_values(record)
    if not all(type(value) in _SCALAR_TYPES for value in reported.values()):
        return None
    try:
        head = "".join(_c_encoder(2)(dict(zip(_RECORD_SCALARS, values, strict=True)), 0))
        figures = "".join(_c_encoder(3)(reported, 0)) if reported else ""
    except ValueError:  # NaN or an infinity
        return None
    if not figures:
        return _OPEN + head[1:-1] + _EMPTY_REPORTED
    return _OPEN + head[1:-1] + _REPORTED + figures[1:-1] + _REPORTED_END


# The pieces of a record's text around what the C encoder writes (fields three levels in).
_OPEN = "{\n" + "  " * 3
_EMPTY_REPORTED = ",\n" + "  " * 3 + '"reported": {}\n    }'
_REPORTED = ",\n" + "  " * 3 + '"reported": {\n' + "  " * 4
_REPORTED_END = "\n" + "  " * 3 + "}\n    }"


#: Iteration records encoded by one msgspec call (see :func:`_batch_text`): enough to spread a
#: call's cost, few enough that a batch's text stays around a megabyte.
BATCH_RECORDS = 1024
_ITEM_SEPARATOR = ",\n" + _ITEM_INDENT
#: A record's fields in their order, for msgspec (which writes an attrs class's fields sorted).
_Row = msgspec.defstruct("_Row", [(name, Any) for name in _RECORD_FIELDS], gc=False)
_ROW_TYPES = _SCALAR_TYPES | {dict}
#: Python spells a float with an exponent (``1e-05``, ``1e+16``) below this magnitude or from the
#: next one on, where msgspec writes ``0.00001`` and ``1e16``: such a float is given to msgspec as
#: its ``repr``, as json spells it.  msgspec writes every other finite float as ``repr`` does.
_PLAIN_LEAST, _PLAIN_BEYOND = 1e-4, 1e16


def _batch_text(records: Sequence[Any]) -> str | None:
    """``records`` as :func:`_record_text` writes them, joined by the items' separator, or None.

    msgspec encodes and indents the whole batch in C; a float it would spell otherwise than
    ``repr`` goes to it as its ``repr`` (see :func:`_spelled_column`).  None (the records go one
    by one) for what msgspec would still write otherwise: a record of another class or holding
    a value that is not a JSON scalar, a NaN or an infinity (msgspec writes null), text json
    escapes (non-ASCII, DEL).
    """
    if set(map(type, records)) != {IterationRecord}:
        return None
    return _columns_text(list(zip(*map(_record_values, records), strict=True)))


def _columns_text(columns: list[Sequence[Any]]) -> str | None:
    """:func:`_batch_text` of the records whose columns (each field's values, in ``ITERATION_FIELDS``
    order) are ``columns``."""
    if not _REPORTED_LAST or not columns or not columns[0]:
        return None
    # Every check below runs over whole columns in C: a record costs no Python loop of its own.
    *scalars, reported = columns
    if set(map(type, reported)) != {dict}:
        return None
    figures = list(chain.from_iterable(map(dict.values, reported)))
    found = [*map(_spelled_column, scalars), _spelled_column(figures)]
    if any(column is None for column in found):
        return None
    spelled = cast(list[Sequence[Any]], found)
    if spelled[-1] is not figures:  # a figure goes as its repr: the dicts are made again with it
        respelled = iter(spelled[-1])
        reported = [dict(zip(figure, respelled, strict=False)) for figure in reported]  # each its own
    try:
        # The records as the items of an object's member: indented four spaces in, as they go.
        text = msgspec.json.encode({"i": list(starmap(_Row, zip(*spelled[:-1], reported, strict=True)))})
    except (TypeError, ValueError, OverflowError):
        return None
    if b"\x7f" in text or not text.isascii():
        return None
    text = msgspec.json.format(text, indent=2)
    # '{\n  "i": [\n    {...},\n    {...}\n  ]\n}': the records, without what is around them.
    return text[len(_AROUND_HEAD) : -len(_AROUND_TAIL)].decode("ascii")


_AROUND_HEAD, _AROUND_TAIL = b'{\n  "i": [\n    ', b"\n  ]\n}"


def _spelled_column(column: Sequence[Any]) -> Sequence[Any] | None:
    """``column`` (one field's values) as msgspec is to encode it: each float that Python spells
    with an exponent as :class:`msgspec.Raw` of its ``repr``; the column itself when none is.
    None for a value msgspec would not write as json does: not a JSON scalar, a NaN, an infinity
    (or floats whose sum passes the largest float: those records go the general way, as well)."""
    kinds = set(map(type, column))
    if not kinds <= _SCALAR_TYPES:
        return None
    if float not in kinds:
        return column
    floats = column if len(kinds) == 1 else list(compress(column, map(is_, map(type, column), repeat(float))))
    if not math.isfinite(sum(floats)):
        return None
    least, largest = min(floats), max(floats)
    if least == 0 and largest > 0:  # zeros (spelled alike) and positive floats: the least of those
        least = min(filter(None, floats))
    if _plain(least, largest):  # all of one sign and spelled alike: no float looked at in Python
        return column
    magnitudes = list(map(abs, filter(None, floats)))  # zero is spelled alike
    if not magnitudes or (min(magnitudes) >= _PLAIN_LEAST and max(magnitudes) < _PLAIN_BEYOND):
        return column
    # Every float of the column as its repr: msgspec writes the others so too.
    if len(kinds) == 1:
        return list(map(msgspec.Raw, map(repr, column)))
    return [msgspec.Raw(repr(value)) if type(value) is float else value for value in column]


def _plain(least: float, largest: float) -> bool:
    """Whether every float from ``least`` to ``largest`` (finite, both of one sign, not zero) is
    spelled alike by msgspec and ``repr`` (False where that is not known)."""
    if least > 0:
        return least >= _PLAIN_LEAST and largest < _PLAIN_BEYOND
    return largest <= -_PLAIN_LEAST and least > -_PLAIN_BEYOND


def _finite(value: Any, spell: Any) -> Any:
    """``schema._replace_non_finite`` for a freshly unstructured value, changing only what differs."""
    if isinstance(value, dict):
        for key, item in value.items():
            kind = type(item)
            if kind is float:
                if item - item != 0.0:  # NaN or an infinity
                    value[key] = spell(item)
            elif kind is dict or kind is list:
                value[key] = _finite(item, spell)
        return value
    if isinstance(value, list):
        return [_finite(item, spell) for item in value]
    if isinstance(value, float):
        return spell(value)
    return value


def _encode(value: Any, level: int) -> str:
    """``json.dumps(value, indent=2, allow_nan=False)`` for a value at nesting ``level``.

    The same text as the standard encoder, which runs in Python once ``indent``
    is set: here runs of scalar items are encoded by its C encoder, with the
    newline and indentation of their level as the item separator.
    """
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        pieces: list[str] = []
        run: dict[str, Any] = {}
        for key, item in value.items():
            if item and type(item) in _CONTAINERS:
                if run:
                    pieces.append(_scalars(level, run))
                    run = {}
                pieces.append(f"{encode_basestring_ascii(key)}: {_encode(item, level + 1)}")
            else:
                run[key] = item
        if run:
            pieces.append(_scalars(level, run))
        inner = "\n" + "  " * (level + 1)
        return "{" + inner + ("," + inner).join(pieces) + "\n" + "  " * level + "}"
    if isinstance(value, list) and value:
        inner = "\n" + "  " * (level + 1)
        return "[" + inner + ("," + inner).join(_encode(item, level + 1) for item in value) + "\n" + "  " * level + "]"
    # Scalars, empty containers, anything unusual: the standard encoder, re-indented.
    return json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n" + "  " * level)


def _scalars(level: int, items: dict[str, Any]) -> str:
    """``items`` (no non-empty containers among them) as the lines of an object at ``level``."""
    return "".join(_c_encoder(level)(items, 0))[1:-1]


@functools.cache
def _c_encoder(level: int) -> Any:
    """json's C encoder whose item separator is the newline and indentation of ``level``'s items.

    Made once per level: ``JSONEncoder.encode`` would build a new one for every call.
    """
    fallback = json.JSONEncoder(allow_nan=False, separators=(",\n" + "  " * (level + 1), ": "))
    if c_make_encoder is None:  # a Python without the C accelerator
        return lambda value, _level: [fallback.encode(value)]
    return c_make_encoder(
        None, fallback.default, encode_basestring_ascii, None, ": ", ",\n" + "  " * (level + 1), False, False, False
    )
