"""What a log parser yields besides iteration records: facts, evaluations and issues.

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


@attrs.frozen(kw_only=True)
class EvalRecord:
    """One evaluation on held-out data, as the log states it (only measured values).

    ``time_s`` is wall time since the run's start (MLPerf ``run_start``) when the
    trainer states it; frameworks that do not print it leave it None.
    """

    iteration: int | None = None  # the training iteration it followed
    samples: int | None = None  # training samples consumed before it
    time_s: float | None = None
    eval_loss: float  # mean cross-entropy per token (nats), i.e. log-perplexity
    eval_sequences: int | None = None
    source: str | None = None  # "file:line"


ParseEvent = IterationRecord | LogFact | ParseIssue | EvalRecord
