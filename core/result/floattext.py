"""Floats as ``repr`` spells them, written by msgspec's C encoder and respelled in C.

msgspec writes a float with the same digits as ``repr`` (the shortest that read back as that
float) but, below 0.0001 and from 1e16 on, not the same way (as measured on msgspec 0.22):

============================  =====================  ===========================
magnitude                     ``repr``               msgspec
============================  =====================  ===========================
0.0001 up to 1e16 (excluded)  ``0.000123``           ``0.000123`` (alike)
0.00001 up to 0.0001          ``1.23e-05``           ``0.0000123``
0.000001 up to 0.00001        ``1.23e-06``           ``1.23e-6``
below 0.000001 (not zero)     ``1.23e-07``           ``1.23e-7`` (alike from e-10)
1e16 and beyond               ``1.23e+16``           ``1.23e16``
============================  =====================  ===========================

(negative floats as their magnitude; zeros alike).  So msgspec's text of a column of floats
becomes json's (``json.dumps`` spells a float as ``repr``) by fixes over the whole text, each a
C pass (a replacement by fixed text, or a split and a join), never a Python call per value:

- exponents: every ``e`` becomes ``e+``, then ``e+-`` becomes ``e-0``, then ``e-0`` followed by
  two digits becomes ``e-`` again;
- an item ``0.0000d...`` (the one form msgspec gives floats of the second band): the text is
  split around each such item's first digit and its other digits, and joined again with
  ``0.0000`` left out, a ``.`` after the first digit (taken away again where no other digit
  follows) and ``e-05`` after the last.

This costs a small multiple of msgspec's own, the most for floats of the second band (the split
makes objects for each), and much less than json's encoder, which formats each float through
``repr``.  :func:`numbers_text` writes a column of numbers (and None) so.  For NaN, the
infinities (msgspec writes ``null``) and values other than numbers and None there is no
answer (None): json's encoder is the way for those; and none at all where the installed
msgspec spells floats at those edges otherwise (checked once, on :data:`_PROBES`).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from tprimat.result import compiled

#: The magnitudes (at least the first, below the second) whose floats msgspec spells as ``repr``
#: does, zeros too: the band of the table above that needs no respelling.
ALIKE_LEAST, ALIKE_BEYOND = 1e-4, 1e16
#: A negative exponent of two or three digits, once a ``0`` is put before every one.
_PADDED_LONG_EXPONENT = re.compile(rb"e-0(?=\d\d)")
#: An item msgspec writes ``0.0000d...`` (not within a float such as ``10.00001``): its first
#: digit and the others, which ``repr`` writes ``d.ddde-05``.  Led by the literal ``0.0000``,
#: which the regex engine finds by a fast scan (led by the look-behind, it tries every place).
_FIFTH_DECIMAL = re.compile(rb"0\.0000(?<=[^\d.]0\.0000)(\d)(\d*)")
#: Floats at the edges of each band and of each form of exponent, of both signs: where the
#: installed msgspec spells them otherwise than the fixes expect, there is no text.
_PROBES = [
    sign * float(magnitude)
    for sign in (1.0, -1.0)
    for magnitude in (
        "5e-324 2.2250738585072014e-308 1e-100 9.9e-10 1e-09 1.5e-09 1.2345e-06 9.999999999999999e-06 1e-05 "
        "2e-05 1.5e-05 9.999999999999999e-05 0.0001 0.5 0 9999999999999998 1e16 1.5e16 1e100 1.7976931348623157e308"
    ).split()
]


def numbers_text(values: Sequence[Any]) -> bytes | None:
    """The items of a compact JSON array of ``values`` (numbers and None), exactly as
    ``json.dumps(list(values), separators=(",", ":"))[1:-1]`` writes them, from msgspec's text;
    None where that is not sure: a value of another kind (text, a bool, a nested value), NaN
    or an infinity, or an installed msgspec that spells floats otherwise than this module knows.

    Told by msgspec's text itself, by C scans of it instead of passes over the values: a text
    of digits, points, signs, exponents, commas and ``null`` alone holds no text, ``true``,
    ``false`` or nested value; msgspec writes NaN and the infinities as ``null``, so a text
    whose every ``n`` is that of a None's ``null`` holds none of them.  A float msgspec spells
    otherwise than ``repr`` holds an exponent or is written ``0.0000d...``: such a text is
    respelled (:func:`respelled`; ``10.00001``, which holds ``0.0000`` too, is left as it is).
    """
    try:
        text = msgspec.json.encode(values if isinstance(values, list | tuple) else list(values))
    except (TypeError, ValueError, OverflowError):  # a value msgspec does not write (json may)
        return None
    if text.translate(None, _NUMBER_BYTES) != b"[]":
        return None
    if b"n" in text and not _finite_or_none(values) and text.count(b"n") != values.count(None):
        return None
    if (b"." in text or b"e" in text) and not spelling_known():  # floats, of a msgspec not known
        return None
    if b"e" in text or b"0.0000" in text:
        return respelled(text)[1:-1]
    return text[1:-1]


def _finite_or_none(values: Sequence[Any]) -> bool:
    """Whether every value is a finite float, an int or None, told in one compiled pass where
    built (then every ``null`` of msgspec's text is a None's); False where not known."""
    within = compiled.WITHIN
    if within is None or not isinstance(values, list | tuple):
        return False
    return within(values, -sys.float_info.max, sys.float_info.max, True, True) is True


#: The characters of msgspec's text of numbers and nulls.
_NUMBER_BYTES = b"0123456789.-+e,nul"


def respelled(text: bytes) -> bytes:
    """msgspec's JSON text of finite floats (ints and nulls may be among them) with each float
    spelled as ``repr`` spells it, where :func:`spelling_known`: the fixes of the module's table
    touch nothing but the floats."""
    if b"e" in text:  # every exponent signed, every negative one of two digits at least
        text = _PADDED_LONG_EXPONENT.sub(b"e-", text.replace(b"e", b"e+").replace(b"e+-", b"e-0"))
    if b"0.0000" in text:
        text = (compiled.FIFTH_DECIMALS or _fifth_decimal_respelled)(text)  # compiled: 4 ns a byte, not 200 an item
    return text


def _fifth_decimal_respelled(text: bytes) -> bytes:
    """``text`` with each item ``0.0000dddd`` respelled ``d.ddde-05`` (``0.0000d``: ``de-05``)."""
    parts = _FIFTH_DECIMAL.split(text)  # around each item: its first digit, its other digits
    items = len(parts) // 3
    pieces = [b"."] * (5 * items + 1)
    pieces[0::5] = parts[0::3]  # what is between those items, their signs included
    pieces[1::5] = parts[1::3]
    pieces[3::5] = parts[2::3]
    pieces[4::5] = [b"e-05"] * items
    text = b"".join(pieces)
    return text if all(parts[2::3]) else text.replace(b".e-05", b"e-05")  # no other item has ".e"


@functools.cache
def spelling_known() -> bool:
    """Whether the installed msgspec spells :data:`_PROBES` as the fixes expect (checked once)."""
    return respelled(msgspec.json.encode(_PROBES)) == json.dumps(_PROBES, separators=(",", ":")).encode()
