"""TOML text for the configs and presets tprimat writes, through ``tomli-w`` (``tomllib`` only reads TOML).

tomli-w does the quoting and escaping (keys that are not bare, every Unicode
character, control characters), so whatever is written reads back with
``tomllib`` as the same data.  What it leaves to the caller is done here:

* TOML has no null.  A key holding None is left out, in tables and in inline
  tables alike; None inside an array is refused (:class:`TomlValueError`, naming
  where it is), because leaving it out would shift the array's other values.
* Objects that are not TOML values (a path, an enum) are written as their text.
* Comment lines before the first table (tomli-w writes data only).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import tomli_w

_SCALARS = (str, bool, int, float, datetime.date, datetime.time)


class TomlValueError(ValueError):
    """Data TOML cannot hold (a None inside an array)."""


def toml_document(data: Mapping[str, Any], *, comments: Sequence[str] = ()) -> str:
    """``data`` (tables nest as mappings) as TOML text, preceded by ``comments`` as ``#`` lines."""
    header = "".join(f"# {line}".rstrip() + "\n" for line in comments)
    body = tomli_w.dumps(_plain(data, "")) if data else ""
    return header + ("\n" if header and body else "") + body


def _plain(value: Any, where: str) -> Any:
    """``value`` with None left out of mappings and non-TOML objects turned into text."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}" if where else str(k)) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if item is None:
                raise TomlValueError(f"{where}[{index}] is None, which TOML cannot hold inside an array")
        return [_plain(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, _SCALARS):
        return value
    return str(value)
