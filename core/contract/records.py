"""What a log parser yields besides iteration records: facts read from the log, and issues.

Parsers stream :class:`~tprimat.result.schema.IterationRecord` objects interleaved
with these two kinds of event; the core collects them into a result.
"""

from __future__ import annotations

from typing import Any

import attrs

from tprimat.result.schema import IterationRecord


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


ParseEvent = IterationRecord | LogFact | ParseIssue
