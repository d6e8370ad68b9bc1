"""The compiled forms of the result's arithmetic on columns, where they are built.

``core/result/_exact.c`` is built at install where a C compiler is found (``setup.py``;
optional: an install without a compiler goes on without it).  Each function here is None where
it is not built, or where ``TPRIMAT_PURE_PYTHON`` asks for Python; the callers then use the
Python form it stands for, to the same results (the tests run both forms):

* :data:`WITHIN` ``(values, least, greatest, floats, nones)``: whether a column's values are all
  ints (or floats), none NaN, within the bounds, or None where allowed; None where an int beyond
  2**53 leaves it to Python (:func:`tprimat.result.plausible.within_in_python`);
* :data:`SCALED_SUMS` ``(batch)``: the exact ``(sum, squares, scale)`` of a batch of floats, or
  None (:func:`tprimat.result.metrics._add_scaled`);
* :data:`FIFTH_DECIMALS` ``(text)``: msgspec's ``0.0000d`` items respelled as ``repr``'s
  ``de-05`` (:func:`tprimat.result.floattext._fifth_decimal_respelled`).

Callers look the names up here when they call them, so that a test can turn one off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tprimat.contract.compiled import compiled_module

_EXACT = compiled_module("tprimat.result._exact")

WITHIN: Callable[[Sequence[Any], float, float, bool, bool], bool | None] | None = (
    None if _EXACT is None else _EXACT.within
)
SCALED_SUMS: Callable[[list[Any]], tuple[int, int, int] | None] | None = None if _EXACT is None else _EXACT.scaled_sums
FIFTH_DECIMALS: Callable[[bytes], bytes] | None = None if _EXACT is None else _EXACT.fifth_decimals
