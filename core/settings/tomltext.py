"""TOML text for the configs and presets tprimat writes (tomllib reads TOML but does not write it)."""

from __future__ import annotations

import json
from typing import Any


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (None as an empty string, other objects as their text)."""
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ "
            + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None)
            + " }"
        )
    return json.dumps(str(value))


def toml_table(name: str, values: dict[str, Any]) -> list[str]:
    """The lines of TOML table ``[name]`` (keys holding None left out), then an empty line."""
    lines = [f"[{name}]"]
    lines += [f"{json.dumps(k) if '.' in k else k} = {toml_value(v)}" for k, v in values.items() if v is not None]
    return [*lines, ""]
