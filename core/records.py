"""What a log parser yields besides iteration records: facts read from the log, and issues.

Parsers stream :class:`~tprimat.schema.IterationRecord` objects interleaved
with these two kinds of event; the core collects them into a result.
"""

from __future__ import annotations

from typing import Any

import attrs

from tprimat.schema import IterationRecord


@attrs.frozen(kw_only=True)
class LogFact:
    """A value the log states about the whole run, e.g. ``global_batch_size = 128``."""

    key: str  # e.g. "global_batch_size", "seq_length", "world_size", "framework_version"
    value: Any
    source: str | None = None  # "file:line"


@attrs.frozen(kw_only=True)
class ParseIssue:
    """A line the parser could not use, or a doubt about one, with where it was."""

    source: str  # "file:line"
    message: str


class RepeatedLine:
    """A line that repeats, value for value, the last record its stream yielded for that iteration.

    Interleaved console logs hold each iteration line once per rank; a parser
    reading bytes may recognise a copy without reading it again and yield this
    marker instead of a second, equal :class:`~tprimat.schema.IterationRecord`.
    It is only yielded where the full record would certainly be dropped as a
    duplicate (same values, same memory readings), so the collector counts it
    as one and the result is the same.  Use the shared :data:`REPEATED_LINE`.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "REPEATED_LINE"

    def __reduce__(self) -> str:
        return "REPEATED_LINE"  # one object, also across processes


REPEATED_LINE = RepeatedLine()

ParseEvent = IterationRecord | LogFact | ParseIssue | RepeatedLine
