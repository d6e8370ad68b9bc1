"""A value printed in a log, typed: the one reader every log parser uses for it.

Training frameworks print their settings and records as text: Megatron-LM's argument dump
(``fp8 ........ None``), DLLogger's stdout records (``lr : 0.0003``), NeMo-Run's table of
resolved arguments (``seq_length=8192,``), a launcher's command line (``--profile true``) and
Megatron-Bridge's YAML config dump (``use_pytorch_profiler: false``).  :func:`typed_value`
reads such a value by one set of rules, in this order:

1. The text is read without its surrounding whitespace.
2. ``True`` and ``False`` are booleans; with ``lower_case=True`` also ``true`` and ``false``
   (JSON, YAML and most command lines spell them so).
3. With ``nulls=True``, ``None`` is None (and with ``lower_case=True``, ``null`` too).
   Without it, the text stays: a parser's fact with the value None reads as "not stated",
   and a log that prints ``None`` for a setting has stated it.
4. An optional sign and digits (``-3``, ``+12``) are an int; one too long for Python to
   convert stays text.
5. With ``floats=True``, a float as Python prints one (``0.0003``, ``1.5E-04``, ``nan``,
   ``inf``, ``-infinity``) is a float: ASCII only, no ``_`` separators (``float()`` alone
   would take ``1_000`` and other scripts' digits, which no framework prints).  With
   ``floats=False``, such text stays text: a reader of sizes and switches keeps ``8192.0``
   as what it is, not a size.
6. Anything else is the text.

Units are never read: ``153.81GB`` is text here; the readers of a field that carries a unit
convert it themselves, naming the unit.
"""

from __future__ import annotations

import re
from typing import Any

_INT_RE = re.compile(r"[-+]?\d+")

_TRUE = {"True": True, "False": False}
_TRUE_LOWER = {**_TRUE, "true": True, "false": False}


def typed_value(text: str, *, nulls: bool = False, lower_case: bool = False, floats: bool = True) -> Any:
    """``text`` as a bool, None, int, float or the text itself, by the rules in the module docstring."""
    value = text.strip()
    booleans = _TRUE_LOWER if lower_case else _TRUE
    if value in booleans:
        return booleans[value]
    if nulls and (value == "None" or (lower_case and value == "null")):
        return None
    if _INT_RE.fullmatch(value):
        try:
            return int(value)
        except ValueError:  # more digits than Python converts: text, not a number
            return value
    if floats and value.isascii() and "_" not in value:
        try:
            return float(value)
        except ValueError:
            pass
    return value
