"""The JSON Schema of ``result.json``, generated from the result classes (:mod:`tprimat.result.schema`).

A dashboard, a database loader or a program in another language validates
results with this schema instead of reimplementing the loader.  It is derived
from the attrs classes themselves, so it cannot drift from what tprimat writes
and reads: every field with its type, required unless it has a default,
nothing else allowed (the loader refuses unknown keys too), the numeric
bounds of the fields' validators, and the strict-JSON spelling of non-finite
floats (``"NaN"``, ``"Infinity"``, ``"-Infinity"``).

The one departure from the classes: a result's iterations are written as columns (one array
per field of :class:`~tprimat.contract.records.IterationRecord`, and the framework's own
figures one array per figure name, see :mod:`tprimat.result.iterjson`), and the schema says so.

The package ships the schema as ``result.schema.json`` (a test proves it equals
what the classes give); ``tprimat schema result`` prints it.  What the schema
cannot say (cross-field rules) the loader still checks:
:func:`tprimat.result.schema.load_result` is the full check.
"""

from __future__ import annotations

import copy
import functools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Literal

import attrs

from tprimat.result.schema import NON_FINITE_NAMES, SCHEMA_VERSION, IterationRecord, Result

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SHIPPED_NAME = "result.schema.json"

_SCALARS: dict[type, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"anyOf": [{"type": "number"}, {"enum": list(NON_FINITE_NAMES)}]},
    type(None): {"type": "null"},
}
#: attrs' number validators and the JSON Schema keyword each becomes.
_BOUNDS = {">=": "minimum", ">": "exclusiveMinimum", "<=": "maximum", "<": "exclusiveMaximum"}


class _Builder:
    """Walks the classes from :class:`Result` down, one ``$defs`` entry per class."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}

    def of_type(self, hint: Any) -> dict[str, Any]:
        if hint in _SCALARS:
            return copy.deepcopy(_SCALARS[hint])
        if hint is Any:
            return {}
        if attrs.has(hint):
            return self.of_class(hint)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            return _union([self.of_type(arg) for arg in args])
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (list, Sequence, tuple) and args:
            return {"type": "array", "items": self.of_type(args[0])}
        if origin in (dict, Mapping) and args:
            return {"type": "object", "additionalProperties": self.of_type(args[1])}
        raise TypeError(f"no JSON Schema for the type {hint!r}")

    def of_class(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder: a class met again while being built is referenced
            hints = typing.get_type_hints(cls)
            properties, required = {}, []
            for field in attrs.fields(cls):
                schema = self.of_type(hints[field.name])
                _add_bounds(schema, field.validator)
                properties[field.name] = schema
                if field.default is attrs.NOTHING:
                    required.append(field.name)
            entry: dict[str, Any] = {"type": "object"}
            if cls.__doc__:
                entry["description"] = " ".join(cls.__doc__.split())
            entry.update(properties=properties, required=required, additionalProperties=False)
            self.defs[name] = entry
        return {"$ref": f"#/$defs/{name}"}


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema for any of ``members``: nested ``anyOf`` flattened, plain types as a type list."""
    flat = [branch for m in members for branch in (m["anyOf"] if list(m) == ["anyOf"] else [m])]
    if all(list(branch) == ["type"] for branch in flat):
        return {"type": [branch["type"] for branch in flat]}
    return {"anyOf": flat}


def _add_bounds(schema: dict[str, Any], validator: Any) -> None:
    """The numeric bounds of an attrs validator (``ge``, ``gt``, ``le``, ``lt``, within ``optional``/``and_``)."""
    if validator is None:
        return
    for inner in getattr(validator, "_validators", ()):  # attrs.validators.and_ (a list of validators)
        _add_bounds(schema, inner)
    if hasattr(validator, "validator"):  # attrs.validators.optional
        _add_bounds(schema, validator.validator)
    keyword = _BOUNDS.get(getattr(validator, "compare_op", ""))
    if keyword is None:
        return
    for branch in schema.get("anyOf", [schema]):
        kinds = branch.get("type")
        if {"integer", "number"} & set(kinds if isinstance(kinds, list) else [kinds]):
            branch[keyword] = validator.bound  # JSON Schema applies number bounds to numbers only


@functools.cache
def _generated() -> str:
    builder = _Builder()
    root = builder.of_class(Result)
    schema = {
        "$schema": DIALECT,
        "$id": f"urn:tprimat:result:{SCHEMA_VERSION}",
        "title": f"tprimat result, schema_version {SCHEMA_VERSION}",
        "description": (
            "One run as tprimat writes it (result.json).  Non-finite floats are the strings "
            '"NaN", "Infinity" and "-Infinity".  Generated from tprimat.result.schema.'
        ),
        **root,
        "$defs": dict(sorted(builder.defs.items())),
    }
    schema["$defs"]["Result"]["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    # The iterations are written as columns (tprimat.result.iterjson), not as a list of records.
    schema["$defs"]["Result"]["properties"]["iterations"] = {"$ref": f"#/$defs/{_COLUMNS}"}
    schema["$defs"][_COLUMNS] = _columns(schema["$defs"].pop(IterationRecord.__name__))
    schema["$defs"] = dict(sorted(schema["$defs"].items()))
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


_COLUMNS = "IterationColumns"


def _columns(record: dict[str, Any]) -> dict[str, Any]:
    """The schema of the iterations' columns, from that of one record: each field an array of its values."""
    properties = {name: {"type": "array", "items": item} for name, item in record["properties"].items()}
    figure = record["properties"]["reported"]["additionalProperties"]
    properties["reported"] = {
        "type": "object",
        "description": "The framework's own figures: one array per figure name, null where a record has none.",
        "additionalProperties": {"type": "array", "items": figure},
    }
    return {
        "type": "object",
        "description": (
            "The iteration records as columns: one array per field of a record, in the record's "
            "field order, with one value per record (the loader checks that all have one length; "
            "a column left out holds its field's default)."
        ),
        "properties": properties,
        "required": record["required"],
        "additionalProperties": False,
    }


def result_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a result document of this tprimat's schema version."""
    return json.loads(_generated())


def result_json_schema_text() -> str:
    """The schema as the JSON text shipped in the package (``result.schema.json``)."""
    return _generated()


def shipped_result_json_schema_text() -> str:
    """The ``result.schema.json`` shipped in the installed package."""
    return resources.files("tprimat.result").joinpath(SHIPPED_NAME).read_text(encoding="utf-8")
