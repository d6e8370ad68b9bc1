"""A result's iterations as columns (schema v6): one array per field of :class:`IterationRecord`.

A result document holds its iteration records as an object with one key per field of
the record (``ITERATION_FIELDS``, in that order), each an array with one value per record,
all of one length: ``{"iteration": [1, 2], "step_time_s": [0.51, 0.5], ...}``.  A column is
written and read in one piece, where a list of objects (schema v4 and older) cost a record's
worth of keys and work per iteration.

``reported``, the framework's own figures, is an object of columns too, one array per figure
name (in sorted order), with ``null`` where a record has no such figure:
``{"loss_scale": [1.0, 1.0], "tflops_per_gpu": [301.2, null]}``.  Schema v5 wrote an object
per record, which repeated every name on every iteration: half of a long run's file.  A
record whose figure is None has no such figure (both are ``null``).

This module turns records into such columns (:func:`iteration_columns`), the list of
objects of an older document into columns (:func:`columns_from_objects`) and v5's reported
objects into columns (:func:`reported_columns`), the migrations, and columns back into
validated records (:func:`records_from_columns`), whose errors name the column and the
place in it (``$.iterations.step_time_s[3]``).  A column missing from a document holds its
field's default for every record; ``iteration`` has none and is required.
"""

from __future__ import annotations

import itertools
import operator
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)

from tprimat.contract.records import ITERATION_FIELDS, FigureColumns, IterationRecord
from tprimat.result.packing import figure_columns, record_from

#: Structures one value to a type (the result converter's ``structure``), raising on a bad one.
Structure = Callable[[Any, Any], Any]

_FIELDS = {field.name: field for field in attrs.fields(IterationRecord)}
_HINTS = typing.get_type_hints(IterationRecord)


def _default(name: str) -> Callable[[], Any] | None:
    """A maker of ``name``'s default value, or None for a field without one."""
    default: Any = _FIELDS[name].default
    if default is attrs.NOTHING:
        return None
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory
    return lambda: default  # an immutable value (a number, False, None)


_DEFAULTS = {name: _default(name) for name in ITERATION_FIELDS}


def iteration_columns(records: Sequence[IterationRecord], spell: Callable[[Any], Any]) -> dict[str, list[Any]]:
    """The columns of ``records``, JSON-ready: each value passed through ``spell`` (which writes
    non-finite floats as strict JSON's strings, in nested containers too)."""
    columns: dict[str, Any] = {name: [] for name in ITERATION_FIELDS}
    getter = operator.attrgetter(*ITERATION_FIELDS)
    for record in records:
        for column, value in zip(columns.values(), getter(record), strict=True):
            column.append(value)
    columns["reported"] = reported_columns(columns["reported"])
    return {name: spell(column) for name, column in columns.items()}


def reported_columns(reported: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """``reported`` (one dict per record) as one column per figure name, in sorted order, None
    where a record has none; a name whose every value is None is left out (:func:`figure_columns`)."""
    columns = figure_columns(reported)
    return {name: columns[name] for name in sorted(columns)}


def reported_from_columns(columns: Any, count: int) -> list[dict[str, Any]]:
    """The reported figures of ``count`` records, one dict each, from their columns (see the
    module); what is not an object of arrays of ``count`` values raises :class:`ValueError`."""
    if not isinstance(columns, dict):
        raise ValueError("expected an object with one array per figure name")
    for name, values in columns.items():
        if not isinstance(values, list) or len(values) != count:
            found = f"{len(values)} values" if isinstance(values, list) else "not an array"
            raise ValueError(f"figure {name!r}: {found} where 'iteration' has {count}")
    return list(FigureColumns(count, list(columns), list(columns.values())))  # a dict of its own each


def columns_from_objects(objects: Any) -> Any:
    """The columns of the records of an older document, given as a list of objects.

    A key an object lacks takes its field's default (as it did when such an object was
    read); what is not a list of objects of the record's keys raises :class:`ValueError`
    naming the place, ``$.iterations[3]``.
    """
    if not isinstance(objects, list):
        raise ValueError("expected an array of iteration records @ $.iterations")
    columns: dict[str, list[Any]] = {name: [] for name in ITERATION_FIELDS}
    for index, item in enumerate(objects):
        if not isinstance(item, dict):
            raise ValueError(f"expected an object @ $.iterations[{index}]")
        extra = sorted(set(item) - _FIELDS.keys(), key=str)
        if extra:
            raise ValueError(f"extra fields found ({', '.join(map(str, extra))}) @ $.iterations[{index}]")
        for name, column in columns.items():
            if name in item:
                column.append(item[name])
                continue
            make = _DEFAULTS[name]
            if make is None:
                raise ValueError(f"required field missing @ $.iterations[{index}].{name}")
            column.append(make())
    return columns


def records_from_columns(data: Any, structure: Structure) -> list[IterationRecord]:
    """The records whose columns are ``data``, each value checked as the record's own type and
    validators check it; a bad one raises a cattrs validation error naming its column and index."""
    if not isinstance(data, dict):
        raise ValueError("expected an object with one array per field of an iteration record")
    extra = set(data) - _FIELDS.keys()
    if extra:
        raise ValueError(f"extra columns found ({', '.join(sorted(map(str, extra)))})")
    if "iteration" not in data:
        raise _in_column("iteration", KeyError("iteration"))
    count = len(data["iteration"]) if isinstance(data["iteration"], list) else 0
    columns: list[Sequence[Any]] = []
    for name in ITERATION_FIELDS:
        if name not in data:
            make = _DEFAULTS[name]
            columns.append([make() for _ in range(count)] if make is not None else [])
            continue
        values = data[name]
        if name == "reported":
            try:
                values = reported_from_columns(values, count)
            except ValueError as exc:
                raise _in_column(name, exc) from None
        if not isinstance(values, list):
            raise _in_column(name, ValueError("expected an array"))
        if len(values) != count:
            raise _in_column(name, ValueError(f"{len(values)} values where 'iteration' has {count}"))
        columns.append(_checked(name, _structured(name, values, structure)))
    return list(map(record_from, zip(*columns, strict=True)))


def _in_column(name: str, exc: Exception) -> ClassValidationError:
    """``exc`` as the error of the column ``name`` of the iterations."""
    exc.__notes__ = [AttributeValidationNote(f"Structuring column {name}", name, list)]
    return ClassValidationError("While structuring the iterations' columns", [exc], IterationRecord)


def _at(name: str, index: int, exc: Exception) -> ClassValidationError:
    """``exc`` as the error of the value at ``index`` of the column ``name``."""
    exc.__notes__ = [IterableValidationNote(f"Structuring {name} @ index {index}", index, _HINTS[name])]
    return _in_column(name, IterableValidationError(f"While structuring column {name}", [exc], list))


def _accepted(hint: Any) -> frozenset[type]:
    """The types whose values a column of ``hint`` keeps as they are (none for a container)."""
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = {type(None) if member is None else member for member in members}
    return frozenset(kinds) if kinds <= {int, float, str, bool, type(None)} else frozenset()


_ACCEPTED = {name: _accepted(_HINTS[name]) for name in ITERATION_FIELDS}
_NON_FINITE_TEXT = frozenset({"NaN", "Infinity", "-Infinity"})


def _structured(name: str, values: list[Any], structure: Structure) -> list[Any]:
    """``values`` structured as the field ``name``'s type: the list itself where every value is
    already of that type (the common case, decided over the whole column), else value by value."""
    accepted = _ACCEPTED[name]
    if accepted and set(map(type, values)) <= accepted:
        return values
    if name == "reported" and _plain_figures(values):
        return values
    hint = _HINTS[name]
    structured = []
    for index, value in enumerate(values):
        try:
            structured.append(value if type(value) in accepted else structure(value, hint))
        except Exception as exc:  # noqa: BLE001  (each converter error, named by its place)
            raise _at(name, index, exc) from None
    return structured


def _plain_figures(values: list[Any]) -> bool:
    """Whether ``values`` are objects whose figures are kept as read (floats, null, text that
    does not name a non-finite float)."""
    if set(map(type, values)) != {dict}:
        return False
    figures = list(itertools.chain.from_iterable(map(dict.values, values)))
    kinds = set(map(type, figures))
    if not kinds <= {float, str, type(None)}:
        return False
    return str not in kinds or _NON_FINITE_TEXT.isdisjoint(figure for figure in figures if type(figure) is str)


def _checked(name: str, values: list[Any]) -> list[Any]:
    """``values``, once each passed the field ``name``'s validator (a bound: over the whole
    column in C; any other validator, value by value)."""
    field = _FIELDS[name]
    validator: Any = field.validator
    if validator is None:
        return values
    inner = getattr(validator, "validator", None)  # attrs.validators.optional(inner)
    bound = inner if inner is not None else validator
    compare = getattr(bound, "compare_func", None)
    if compare is not None:
        present = values if inner is None else [value for value in values if value is not None]
        if all(map(compare, present, itertools.repeat(bound.bound))):
            return values
    for index, value in enumerate(values):
        try:
            validator(None, field, value)
        except Exception as exc:  # noqa: BLE001
            raise _at(name, index, exc) from None
    return values
