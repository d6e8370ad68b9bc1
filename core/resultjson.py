"""A result document's JSON text, piece by piece, so that writing a long run never holds it whole.

The text is exactly :func:`tprimat.schema.dumps_result`'s (indent 2, strict
JSON): the document without its iterations is encoded once, and each
iteration record is unstructured and encoded on its own, at the depth the
whole-document encoder would have put it.  A run of 40 000 iterations is
written in bounded memory instead of as one dict tree and one string of
hundreds of megabytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs

_MARK = "\x00tprimat-iterations\x00"
_ITEM_INDENT = " " * 4  # "iterations" is a key of the top-level object: its items are two levels in


def iter_result_json(result: Any) -> Iterator[str]:
    """The pieces of ``dumps_result(result)``, in order."""
    from tprimat import schema

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
    separator = ",\n" + _ITEM_INDENT
    for index, record in enumerate(result.iterations):
        data = schema._replace_non_finite(schema._converter.unstructure(record))
        encoded = json.dumps(data, indent=2, allow_nan=False).replace("\n", "\n" + _ITEM_INDENT)
        yield (separator + encoded) if index else encoded
    yield "\n  ]" + after
