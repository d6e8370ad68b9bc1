"""What a log parser yields: per-iteration records, facts read from the log, evaluations and issues.

``parse_metrics`` streams :class:`IterationRecord` objects interleaved with
:class:`LogFact` and :class:`ParseIssue`; the core collects them into a result
(:mod:`tprimat.result`), which stores the records as they are and derives
every other number from them.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import attrs

_nonneg = attrs.validators.optional(attrs.validators.ge(0))


@attrs.frozen(kw_only=True)
class IterationRecord:
    """One training iteration (or one log line covering several, see ``covers_iterations``)."""

    iteration: int = attrs.field(validator=attrs.validators.ge(0))
    step_time_s: float | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.gt(0)))
    tokens: int | None = attrs.field(default=None, validator=_nonneg)
    tokens_per_s_per_gpu: float | None = None  # computed by the core, never by a parser
    loss: float | None = None  # NaN and inf are kept
    lr: float | None = None
    grad_norm: float | None = None
    skipped: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    covers_iterations: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    profiled: bool = False
    global_batch_size: int | None = None  # as logged, cross-checked against the config
    consumed_samples: int | None = None
    mem_allocated_gib: float | None = None  # allocator: live tensors (GiB = 2**30 bytes)
    mem_max_allocated_gib: float | None = None  # allocator peak
    mem_reserved_gib: float | None = None  # allocator: cached by PyTorch
    mem_max_reserved_gib: float | None = None
    mem_device_used_gib: float | None = None  # driver view (nvidia-smi / amd-smi)
    mem_device_total_gib: float | None = None
    mem_rss_gib: float | None = None  # host process resident set (CPU runs)
    energy_j: float | None = None  # GPU energy during the iteration, all local GPUs
    timestamp: str | None = None
    source: str | None = None  # "file:line" it was read from
    reported: dict[str, float | str | None] = attrs.Factory(dict)  # the framework's own figures


#: IterationRecord's field names, in their order (that of its JSON object), and a getter of their
#: values as one tuple: for the core's fast paths that move or write records by the million.
ITERATION_FIELDS = tuple(field.name for field in attrs.fields(IterationRecord))
iteration_values = operator.attrgetter(*ITERATION_FIELDS)

#: The longest step time a record may hold: a day (86400 s).  Logged steps take milliseconds
#: to minutes; anything longer is a misread number (or a clock that jumped), never a step.
MAX_STEP_TIME_S = 86400.0

#: Fields that hold memory readings (merged by maximum across ranks and lines).
MEMORY_FIELDS = tuple(name for name in ITERATION_FIELDS if name.startswith("mem_"))
#: The fields that say what an iteration did: the same iteration read from two ranks' files
#: differs only in where it was read (and its memory readings), and a getter of their values.
BODY_FIELDS = tuple(
    name for name in ITERATION_FIELDS if name not in ("iteration", "source", "timestamp") and name not in MEMORY_FIELDS
)
body_values = operator.attrgetter(*BODY_FIELDS)
#: The body of a record that holds nothing but its iteration number.
EMPTY_BODY = body_values(IterationRecord(iteration=0))


@attrs.frozen(kw_only=True, eq=False)
class IterationBlock:
    """Consecutive iteration records as columns: what a parser yields for a run of iteration lines.

    A long run's log is mostly iteration lines; a parser that reads a run of them at
    once yields one block instead of one :class:`IterationRecord` per line, and the
    core takes its columns in whole (collection, checks, the summary and the result
    file all work on columns).  A block means exactly the records :meth:`records`
    makes, in that order: ``columns`` holds one list per field of
    :data:`ITERATION_FIELDS`, in that order, all of one length, and every row must
    make a valid :class:`IterationRecord` (a parser checks that before yielding it,
    as the record's own validators would).  A ``reported`` column holds one dict
    per record, never shared between records, or (contract 1.4) a :class:`FigureColumns`;
    a ``source`` column may be (contract 1.6) a :class:`LineSources`.
    """

    columns: tuple[list[Any], ...] = attrs.field()

    @columns.validator
    def _check(self, attribute: Any, columns: tuple[list[Any], ...]) -> None:
        if len(columns) != len(ITERATION_FIELDS):
            raise ValueError(f"an iteration block has {len(ITERATION_FIELDS)} columns, not {len(columns)}")
        if len({len(column) for column in columns}) > 1:
            raise ValueError("the columns of an iteration block differ in length")

    def __len__(self) -> int:
        return len(self.columns[0])

    def column(self, name: str) -> list[Any]:
        """The values of one field, in record order."""
        return self.columns[ITERATION_FIELDS.index(name)]

    def rows(self) -> list[tuple[Any, ...]]:
        """Each record's values, in :data:`ITERATION_FIELDS` order."""
        return list(zip(*self.columns, strict=True))

    def records(self) -> list[IterationRecord]:
        """The records the block stands for (validated as any record is)."""
        return [IterationRecord(**dict(zip(ITERATION_FIELDS, row, strict=True))) for row in self.rows()]


class FigureColumns(Sequence[dict[str, Any]]):
    """An :class:`IterationBlock`'s ``reported`` column kept as one list per figure name
    (``names``, and ``columns`` in that order), None where a record has no such figure.

    A parser that reads a run of lines into columns may give its figures so instead of a dict
    per record (which it would make only for the core to take them apart again by name): the
    core stores them so, and the summary and the result file take them by name.  It reads as
    the dicts it stands for, each made when asked for (its names in the order of ``names``,
    the built-in parsers' sorted; a figure that is None left out), so that any user of a
    ``reported`` column may take it as one; a slice is a :class:`FigureColumns` too.
    """

    __slots__ = ("size", "names", "columns")

    def __init__(self, size: int, names: Sequence[str], columns: Sequence[list[Any]]) -> None:
        self.size = size
        self.names = tuple(names)
        self.columns = tuple(columns)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            rows = range(*index.indices(self.size))
            if rows.step == 1:
                return FigureColumns(len(rows), self.names, [column[rows.start : rows.stop] for column in self.columns])
            return FigureColumns(len(rows), self.names, [[column[row] for row in rows] for column in self.columns])
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError("record out of range")
        return {
            name: column[index]
            for name, column in zip(self.names, self.columns, strict=True)
            if column[index] is not None
        }

    def __iter__(self) -> Any:
        if not self.names:
            return (dict() for _ in range(self.size))
        rows = zip(*self.columns, strict=True)
        if not any(None in column for column in self.columns):
            return map(dict, map(zip, itertools.repeat(self.names), rows))
        return ({n: v for n, v in zip(self.names, row, strict=True) if v is not None} for row in rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # compared by its dicts, as a list is


class LineSources(Sequence[str]):
    """An :class:`IterationBlock`'s ``source`` column when every record is a line of one file:
    the file's ``prefix`` (its name and ``:``) and each record's line number (contract 1.6).

    A parser that reads a run of lines at once may give its sources so instead of a text per
    record (which the core would only take apart again to store them as numbers).  It reads as
    the texts it stands for, ``prefix`` followed by the line number, each made when asked for;
    a slice is a :class:`LineSources` too.
    """

    __slots__ = ("prefix", "lines")

    def __init__(self, prefix: str, lines: list[int]) -> None:
        self.prefix = prefix
        self.lines = lines

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return LineSources(self.prefix, self.lines[index])
        return f"{self.prefix}{self.lines[index]}"

    def __iter__(self) -> Any:
        return map(self.prefix.__add__, map(str, self.lines))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # compared by its texts, as a list is


def is_memory_only(record: IterationRecord) -> bool:
    """Whether ``record`` holds nothing but memory readings (a Megatron memory line)."""
    # A step time, which nearly every record has, settles it without comparing the whole body.
    return record.step_time_s is None and body_values(record) == EMPTY_BODY


@attrs.frozen(kw_only=True)
class RankPeak:
    """The largest memory figures one rank reported, in GiB.

    What a backend's ``BackendSpec.memory_peaks`` reads from a log file (its
    framework's allocator or driver lines), and what the GPU monitor sampled;
    the result's memory section puts them beside the estimate.  A log parser
    that reads these lines itself yields one per rank at the end of its stream
    (or of each range of a file), so that a large log is read once: the
    collector merges them with :meth:`merged`, in the order of the file.
    """

    rank: int | None  # None when the line does not say
    max_allocated_gib: float | None = None
    max_reserved_gib: float | None = None
    allocated_gib: float | None = None  # the last "allocated" (live tensors between steps)
    device_used_gib: float | None = None
    device_total_gib: float | None = None

    def merged(self, later: RankPeak) -> RankPeak:
        """This rank's figures and those of a ``later`` report: the larger peak, the later level."""
        return RankPeak(
            rank=self.rank,
            max_allocated_gib=_larger(self.max_allocated_gib, later.max_allocated_gib),
            max_reserved_gib=_larger(self.max_reserved_gib, later.max_reserved_gib),
            allocated_gib=self.allocated_gib if later.allocated_gib is None else later.allocated_gib,
            device_used_gib=_larger(self.device_used_gib, later.device_used_gib),
            device_total_gib=self.device_total_gib if later.device_total_gib is None else later.device_total_gib,
        )


def _larger(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


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


class RepeatedLine:
    """A line that repeats, value for value, the last record its stream yielded for that iteration.

    Interleaved console logs hold each iteration line once per rank; a parser
    reading bytes may recognise a copy without reading it again and yield this
    marker instead of a second, equal :class:`IterationRecord`.  It is only
    yielded where the full record would certainly be dropped as a duplicate
    (same values, same memory readings), so the collector counts it as one and
    the result is the same.  Use the shared :data:`REPEATED_LINE`.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "REPEATED_LINE"

    def __reduce__(self) -> str:
        return "REPEATED_LINE"  # one object, also across processes


REPEATED_LINE = RepeatedLine()

ParseEvent = IterationRecord | IterationBlock | LogFact | ParseIssue | EvalRecord | RepeatedLine | RankPeak
