"""What one trace may cost and hold: the bounds every trace is read under, and what a bad event is.

A trace is untrusted input: a few hundred bytes can nest a value 100,000 levels
deep, and a megabyte of gzip can inflate to gigabytes.  The reader
(:mod:`tprimat.trace.fastread`, :mod:`tprimat.trace.reader`) keeps its time linear
in the decompressed size and its working memory bounded by these limits, and
refuses a trace past one of them with a message that names the limit:

* :data:`MAX_SPAN_BYTES`: the most bytes between two event boundaries: one event
  (so any string or number in it), the metadata before the event array, the
  metadata after it;
* :data:`MAX_INFLATION`: the most a gzip trace may inflate, relative to its
  compressed size (plus :data:`INFLATION_ALLOWANCE_BYTES` for very small files);
* nesting: as deep as the JSON decoder recurses (Python's recursion limit, 1000
  by default; :func:`depth_text`); Kineto's events nest at most about 6 levels.

The kernel-name bounds (:data:`tprimat.trace.categories.MAX_NAME_CHARS`) live with the
rules they protect.  An event whose fields the analysis reads have the wrong type
or an impossible value is not an error: it is skipped and counted
(:func:`describe_event` says what is wrong with it), and the analysis carries a note.
"""

from __future__ import annotations

import math
import sys
from typing import Any

#: Bytes between two event boundaries: an event, the metadata before or after the event array.
MAX_SPAN_BYTES = 32 * 1024 * 1024
#: A gzip trace inflates to at most this many times its compressed size (Kineto's: 10 to 25 times).
MAX_INFLATION = 100
#: ... plus this many bytes, so that a tiny gzip file (whose header weighs more) is not refused.
INFLATION_ALLOWANCE_BYTES = 1024 * 1024
#: Timestamps beyond ±2^53 µs (285 years from the clock's origin) cannot hold whole microseconds.
MAX_ABS_TS_US = float(2**53)
#: A duration above 24 hours is not one a profiler records (a trace covers seconds to minutes).
MAX_DUR_US = 24 * 3600 * 1e6
#: The range of the integer arguments kept (``args.stream``, ``args.correlation``): 64-bit signed.
INT64 = (-(2**63), 2**63 - 1)


class BrokenTrace(Exception):
    """A trace that cannot be read, or is refused by a limit; the reader adds the file's name.

    ``bare``: raised below the decoder (by the gzip stream), so the message does not say yet
    where in the trace it happened; ``limit``: a bound refused it, the data may be fine.
    """

    def __init__(self, message: str, limit: bool = False, bare: bool = False) -> None:
        super().__init__(message)
        self.limit = limit
        self.bare = bare

    def after_events(self, count: int) -> BrokenTrace:
        """This error, placed after the ``count`` events decoded before it."""
        if not self.bare:
            return self
        if self.limit:
            return BrokenTrace(f"refused after {count} events: {self}", limit=True)
        return BrokenTrace(f"truncated or malformed trace after {count} events ({self})")

    def in_head(self) -> BrokenTrace:
        """This error, placed before the event array."""
        if not self.bare:
            return self
        if self.limit:
            return BrokenTrace(f"refused: {self}", limit=True)
        return BrokenTrace(f"not a readable JSON trace ({self})")


def mib(size: int) -> str:
    """``size`` in MiB for messages: ``32 MiB``."""
    return f"{size / (1024 * 1024):g} MiB"


def span_text() -> str:
    return f"the {mib(MAX_SPAN_BYTES)} limit for one event, or for the metadata before or after the events"


def depth_text() -> str:
    """The nesting bound as messages state it."""
    return f"the decoder's nesting limit of about {sys.getrecursionlimit()} levels (Python's recursion limit)"


def inflation_limit(compressed_bytes: int) -> int:
    """The most bytes a gzip trace of ``compressed_bytes`` may inflate to."""
    return MAX_INFLATION * compressed_bytes + INFLATION_ALLOWANCE_BYTES


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: int | float) -> str:
    """A number for a message, however large (an integer may have thousands of digits)."""
    try:
        return f"{float(value):g}"
    except OverflowError:
        return f"an integer of {int(value).bit_length()} bits"


def _number_problem(field: str, value: Any, low: float, high: float) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{field} is {_kind(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{field} is not a finite number"
    if value < low:
        return f"{field} is negative ({_show(value)})" if low == 0 else f"{field} is {_show(value)} µs, below {low:g}"
    if value > high:
        return f"{field} is {_show(value)} µs, above the {high:g} µs limit"
    return None


def describe_event(event: Any) -> str:
    """What makes ``event`` (a decoded JSON value from the event array) one the reader skips.

    The checks are those the typed decoder applies (:class:`tprimat.trace.fastread.Event`):
    ``ph``, ``cat`` and ``name`` strings; ``ts`` and ``dur`` finite numbers, ``ts`` within
    ±:data:`MAX_ABS_TS_US`, ``dur`` from 0 to :data:`MAX_DUR_US`; ``args`` an object.
    """
    if not isinstance(event, dict):
        return f"not an object but {_kind(event)}"
    for field in ("ph", "cat", "name"):
        value = event.get(field)
        if value is not None and not isinstance(value, str):
            return f"{field} is {_kind(value)}"
    problem = _number_problem("ts", event.get("ts"), -MAX_ABS_TS_US, MAX_ABS_TS_US) or _number_problem(
        "dur", event.get("dur"), 0, MAX_DUR_US
    )
    if problem:
        return problem
    args = event.get("args")
    if args is not None and not isinstance(args, dict):
        return f"args is {_kind(args)}"
    return "a field has an unexpected type"


def int_problem(field: str, value: Any) -> str | None:
    """Why ``value`` cannot be the integer argument ``field`` (None: it can; missing is fine)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{field} is {_kind(value)}, not an integer"
    if not INT64[0] <= value <= INT64[1]:
        return f"{field} does not fit in 64 bits"
    return None


__all__ = [
    "INFLATION_ALLOWANCE_BYTES",
    "MAX_ABS_TS_US",
    "MAX_DUR_US",
    "MAX_INFLATION",
    "MAX_SPAN_BYTES",
    "BrokenTrace",
    "describe_event",
    "depth_text",
    "inflation_limit",
    "int_problem",
]
