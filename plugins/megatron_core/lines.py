"""Reading the values of a log line, as every Megatron-core backend prints them.

The pieces every parser of a Megatron-core log is made of: the events a
parser yields (:data:`Event`), the error for a value that cannot be read
(:class:`LineError`), where a line is and the issues and facts it gives
(:class:`StreamEvents`), and the readers of a printed number, ``X/Y`` pair,
``153.81GB/…`` unit list and label (a typed value:
:func:`tprimat.contract.values.typed_value`).  Pure functions of the text.
"""

from __future__ import annotations

import re
from typing import Any

from tprimat.contract.records import LogFact, ParseEvent, ParseIssue

#: What a line parser yields: what ``parse_metrics`` may yield.
Event = ParseEvent


class LineError(ValueError):
    """A value in a log line that cannot be read as what its label says."""


class StreamEvents:
    """What a parser of one log stream says about a line: where it is, an issue, a fact stated once.

    A parser sets ``source`` (the stream's name, for ``file:line`` references) and ``_facts``
    (the facts it stated, by key) in its ``__init__``.
    """

    source: str
    _facts: dict[str, Any]

    def where(self, lineno: int) -> str:
        return f"{self.source}:{lineno}"

    def issue(self, lineno: int, message: str) -> ParseIssue:
        return ParseIssue(source=self.where(lineno), message=message)

    def fact(self, key: str, value: Any, lineno: int) -> LogFact | None:
        """A fact, or None if this stream already stated the same value."""
        if key in self._facts and self._facts[key] == value:
            return None
        self._facts[key] = value
        return LogFact(key=key, value=value, source=self.where(lineno))


def parse_float(text: str) -> float:
    """A float as a log prints it (``1.5E-04``, ``nan``, ``inf``); anything else is an error."""
    # float() alone would also take "1_000" and non-ASCII digits.
    if text.isascii() and "_" not in text:
        try:
            return float(text)
        except ValueError:
            pass
    raise LineError(f"not a number: {text.strip()[:40]!r}")


def parse_int(text: str) -> int:
    if text.isascii() and "_" not in text:
        try:
            return int(text)
        except ValueError:
            pass
    raise LineError(f"not an integer: {text.strip()[:40]!r}")


def parse_pair(text: str) -> tuple[float, float | None]:
    """``X``, ``X/Y`` or ``X (avg Y)``: the instantaneous value and the framework's average."""
    if "(avg" in text:
        first, _, rest = text.partition("(avg")
        return parse_float(first), parse_float(rest.strip().rstrip(")"))
    if "/" in text:
        parts = text.split("/")
        if len(parts) != 2:
            raise LineError(f"expected X/Y: {text.strip()[:40]!r}")
        return parse_float(parts[0]), parse_float(parts[1])
    return parse_float(text), None


def parse_units(text: str, count: int, wanted: tuple[int, ...]) -> list[float]:
    """``153.81GB/102.17GB/255.98GB/60.09%`` -> the numbers at ``wanted``, units dropped.

    The text must hold exactly ``count`` values, so a cut-off segment is an error.
    """
    parts = text.split("/")
    if len(parts) != count:
        raise LineError(f"expected {count} values separated by '/': {text.strip()[:60]!r}")
    return [parse_float(parts[i].strip().rstrip("GiB%")) for i in wanted]


def normal_key(key: str) -> str:
    """A log's label as a record key: ``"throughput per GPU (TFLOP/s/GPU)"`` -> ``throughput_per_gpu_tflop_s_gpu``."""
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")
