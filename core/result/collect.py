"""Collect a parser's event stream into iterations, facts and issues.

Used for live runs (lines arrive from a running process) and for
``tprimat parse`` (lines come from files) alike.  Lines are often repeated
(the last rank's line is forwarded to rank 0; several ranks log the same
iteration; a job restarted from a checkpoint logs iterations again), so
records are keyed by iteration:

* an exact repeat is dropped and counted;
* a different record for an iteration already seen replaces it (the later
  one is what training kept after a restart) and the replacement is noted;
* except that memory readings are merged, not replaced: Megatron prints an
  iteration's memory on a separate line after the iteration line (one per
  rank), so a record holding only memory fields completes the record of its
  iteration, and for each memory field the largest reading is kept.

A record that cannot be physical (:func:`implausible`: a step time that is not
finite or longer than a day, a negative or absurd count, a memory or energy
figure that is negative or not finite) is refused here, whichever parser read
it, and noted as a skipped line with its ``file:line``: one bad number never
becomes a result that looks valid.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Collection, Iterable, Iterator, Reversible, Sequence
from typing import Any, Protocol

import attrs

from tprimat.contract.records import (
    EMPTY_BODY,
    MAX_STEP_TIME_S,
    MEMORY_FIELDS,
    REPEATED_LINE,
    EvalRecord,
    LogFact,
    ParseIssue,
    RankPeak,
    RepeatedLine,
    body_values,
    is_memory_only,
)
from tprimat.result.schema import IterationRecord
from tprimat.result.spill import BLOCK_RECORDS, ColdRecords, RecordSequence, RowSource, memory_only_row
from tprimat.settings.config import MAX_BATCH_SIZE, MAX_ITERATIONS, MAX_SEQ_LENGTH

#: How many skipped-line references a result keeps verbatim (the rest are counted).
MAX_ISSUES_KEPT = 50


#: Comparison keys kept for the records compared last (an iteration's copies, one per rank, come
#: together): a key costs about 200 bytes, so one per record of a long run would add up.
BODIES_KEPT = 4096

#: Records a collector keeps in memory once it has moved some to a file: the copies of an
#: iteration (one per rank, a memory line after an iteration line) come close together in a log.
HOT_RECORDS = 4096

_get_memory = operator.attrgetter(*MEMORY_FIELDS)

#: The most a memory figure may hold, in GiB: 2**20 GiB (1 PiB), above any device or host.
MAX_MEMORY_GIB = float(2**20)
#: The most energy one iteration may take, in J: 10**12 (a thousand 1 kW GPUs for a day use 8.64e10).
MAX_ENERGY_J = 1e12
_MAX_CONSUMED = MAX_ITERATIONS * MAX_BATCH_SIZE
_MAX_TOKENS = MAX_BATCH_SIZE * MAX_SEQ_LENGTH
#: Count fields of a record, and the least and greatest each may hold (the record's own
#: validators hold the least of iteration, covers_iterations and skipped).
_COUNT_LIMITS = (
    ("iteration", 0, MAX_ITERATIONS),
    ("covers_iterations", 1, MAX_ITERATIONS),
    ("skipped", 0, MAX_ITERATIONS),
    ("global_batch_size", 1, MAX_BATCH_SIZE),
    ("consumed_samples", 0, _MAX_CONSUMED),
    ("tokens", 0, _MAX_TOKENS),
)
_get_counts = operator.attrgetter(*(name for name, _, _ in _COUNT_LIMITS))
_NO_MEMORY = (None,) * len(MEMORY_FIELDS)


def implausible(record: IterationRecord) -> str | None:
    """Why ``record`` cannot be a physical measurement, or None when it can.

    Refused: a step time that is not finite or longer than :data:`MAX_STEP_TIME_S`; a count
    (iteration, iterations covered, skipped steps, global batch, consumed samples, tokens) that
    is negative, not whole or past its limit (the config's limits, :mod:`tprimat.settings.config`);
    a memory or energy figure that is negative, not finite or past its limit.  Losses, learning
    rates and gradient norms are kept as they are (a NaN loss is a real measurement), and so are
    the framework's own ``reported`` figures (secondary, never used for tprimat's numbers).
    """
    # Called for every record a log gives: the usual record passes a few comparisons, unrolled.
    step = record.step_time_s
    if step is not None and not 0 < step <= MAX_STEP_TIME_S:
        what = "longer than a day" if math.isfinite(step) else "not a finite number"
        return f"step time {step:g} s is {what}: not a physical step time"
    iteration, covers, skipped, batch, consumed, tokens = _get_counts(record)
    if (
        type(iteration) is not int
        or not iteration <= MAX_ITERATIONS
        or type(covers) is not int
        or not covers <= MAX_ITERATIONS
        or type(skipped) is not int
        or not skipped <= MAX_ITERATIONS
        or (batch is not None and (type(batch) is not int or not 0 < batch <= MAX_BATCH_SIZE))
        or (consumed is not None and (type(consumed) is not int or not 0 <= consumed <= _MAX_CONSUMED))
        or (tokens is not None and (type(tokens) is not int or not 0 <= tokens <= _MAX_TOKENS))
    ):
        for (name, least, greatest), value in zip(_COUNT_LIMITS, _get_counts(record), strict=True):
            if value is not None and (type(value) is not int or not least <= value <= greatest):
                return f"{name.replace('_', ' ')} {value!r} is not a count from {least} to {greatest}"
    memory = _get_memory(record)
    if memory != _NO_MEMORY:
        for name, value in zip(MEMORY_FIELDS, memory, strict=True):
            if value is not None and not 0 <= value <= MAX_MEMORY_GIB:
                return f"{name} {value!r} is not a memory figure from 0 to {MAX_MEMORY_GIB:g} GiB"
    energy = record.energy_j
    if energy is not None and not 0 <= energy <= MAX_ENERGY_J:
        return f"energy {energy!r} J is not an energy from 0 to {MAX_ENERGY_J:g} J"
    return None


def _same(value: Any) -> Any:
    """A value for comparison: NaN equals NaN here (two copies of a NaN loss are one line)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, _same(v)) for k, v in value.items()))
    return value


def _bodies_equal(a: tuple, b: tuple) -> bool:
    # Plain tuple equality first (C speed); NaNs, which never equal themselves, only on a miss.
    return a == b or tuple(map(_same, a)) == tuple(map(_same, b))


class TimedRecords(Collection[IterationRecord], Reversible[IterationRecord], Protocol):
    """What :func:`timed_records` gives: records read in order, or from the last one back."""


class _TimedRecords(Collection[IterationRecord], RowSource):
    """The records of a :class:`~tprimat.result.spill.RecordSequence` that are not memory lines
    alone, read again on each pass (never held); their fields are read from the stored rows
    (:func:`~tprimat.result.spill.record_fields`) without making records."""

    def __init__(self, records: RecordSequence) -> None:
        self._records = records

    def rows(self) -> Iterator[tuple[Any, ...]]:
        return itertools.filterfalse(memory_only_row, self._records.rows())

    def fields(self, *names: str) -> Iterator[tuple[Any, ...]]:
        return self._records.fields(*names, timed=True)

    def field_blocks(self, *names: str) -> Iterator[list[Sequence[Any]]]:
        return self._records.field_blocks(*names, timed=True)

    def __iter__(self) -> Iterator[IterationRecord]:
        return itertools.filterfalse(is_memory_only, self._records)

    def __reversed__(self) -> Iterator[IterationRecord]:
        return itertools.filterfalse(is_memory_only, reversed(self._records))

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, record: object) -> bool:
        return any(r is record or r == record for r in self)


def timed_records(records: Sequence[IterationRecord]) -> TimedRecords:
    """The records that are not memory lines alone (see :func:`is_memory_only`), in order: a list,
    or for records read back from a file, a collection that reads them again on each pass."""
    if isinstance(records, RecordSequence):
        return _TimedRecords(records)
    return [r for r in records if not is_memory_only(r)]


def _merge(
    previous: IterationRecord, event: IterationRecord, previous_body: tuple | None = None
) -> IterationRecord | None:
    """One record from two observations of an iteration, or None if they disagree."""
    if previous_body is None:
        previous_body = body_values(previous)
    event_body = body_values(event)
    if event_body == EMPTY_BODY or _bodies_equal(previous_body, event_body):
        base = previous
    elif previous_body == EMPTY_BODY:
        base = event
    else:
        return None
    old, new = _get_memory(previous), _get_memory(event)
    if base is previous and old == new:
        return previous
    memory = {}
    for name, a, b in zip(MEMORY_FIELDS, old, new, strict=True):
        memory[name] = b if a is None else a if b is None else max(a, b)
    if base is previous and tuple(memory.values()) == old:
        return previous
    return attrs.evolve(base, **memory)


@attrs.define
class EventCollector:
    """Accumulates parse events; :attr:`records` is ordered by iteration."""

    iterations: dict[int, IterationRecord] = attrs.Factory(dict)
    facts: dict[str, LogFact] = attrs.Factory(dict)
    conflicting_facts: list[str] = attrs.Factory(list)
    issues: list[ParseIssue] = attrs.Factory(list)
    evaluations: dict[tuple[int | None, int | None], EvalRecord] = attrs.Factory(dict)
    issue_count: int = 0
    duplicates: int = 0
    replaced: list[int] = attrs.Factory(list)
    rank_memory: dict[int | None, RankPeak] = attrs.Factory(dict)  # peaks the parser read, by rank
    #: Keep at most about this many records in memory, the older ones in a temporary file
    #: (see :mod:`tprimat.result.spill`); None keeps them all in memory.  Once some have moved,
    #: only the newest :data:`HOT_RECORDS` stay (see :meth:`_spill`).
    spill_after: int | None = None
    _bodies: dict[int, tuple] = attrs.Factory(dict)  # comparison keys of the kept records
    _cold: ColdRecords | None = None  # the records moved out of memory
    _finished: RecordSequence | None = None  # all records, once :attr:`records` was read

    def add(self, event: Any) -> IterationRecord | None:
        """Take one event; return the record if it is a new or replaced iteration."""
        if isinstance(event, IterationRecord):
            return self._add_record(event)
        if isinstance(event, LogFact):
            known = self.facts.get(event.key)
            if known is not None and known.value != event.value:
                self.conflicting_facts.append(
                    f"{event.key}: {known.value!r} ({known.source}) vs {event.value!r} ({event.source})"
                )
            self.facts.setdefault(event.key, event)
            return None
        if isinstance(event, EvalRecord):
            # Keyed like iterations: a repeat (another rank, a restart) replaces the earlier line.
            self.evaluations[(event.iteration, event.samples)] = event
            return None
        if isinstance(event, RepeatedLine):
            self.duplicates += 1
            return None
        if isinstance(event, RankPeak):
            peak = self.rank_memory.get(event.rank)
            self.rank_memory[event.rank] = event if peak is None else peak.merged(event)
            return None
        if isinstance(event, ParseIssue):
            self.issue_count += 1
            if len(self.issues) < MAX_ISSUES_KEPT:
                self.issues.append(event)
            return None
        raise TypeError(
            f"parsers yield IterationRecord, EvalRecord, LogFact, ParseIssue, RepeatedLine or RankPeak, not {event!r}"
        )

    def _add_record(self, event: IterationRecord) -> IterationRecord | None:
        problem = implausible(event)
        if problem is not None:
            self.add(ParseIssue(source=event.source or f"iteration {event.iteration}", message=problem))
            return None
        previous = self.iterations.get(event.iteration)
        if previous is None:
            cold = self._cold
            # An iteration above all those in the file (nearly every one) is not there.
            if cold is not None and (
                self._finished is not None or (cold.highest is not None and event.iteration <= cold.highest)
            ):
                return self._add_to_cold(event)
        else:
            body = self._bodies.get(event.iteration)
            if body is None:
                if len(self._bodies) >= BODIES_KEPT:  # the iterations compared long ago are done
                    self._bodies.clear()
                body = self._bodies[event.iteration] = body_values(previous)
            merged = _merge(previous, event, body)
            if merged is not None:
                if merged is previous:
                    if not is_memory_only(event):
                        self.duplicates += 1
                    return None
                self.iterations[event.iteration] = merged
                self._bodies.pop(event.iteration, None)
                return merged
            self.replaced.append(event.iteration)
        self.iterations[event.iteration] = event
        self._bodies.pop(event.iteration, None)
        limit = self._limit
        if limit is not None and len(self.iterations) > limit:
            self._spill()
        return event

    def _add_to_cold(self, event: IterationRecord) -> IterationRecord | None:
        """:meth:`add` for a record whose iteration is not in memory: it may be in the file."""
        assert self._cold is not None
        if self._finished is not None:
            raise RuntimeError("records were taken from this collector: it takes no more")
        where = self._cold.find(event.iteration)
        if where is not None:
            previous = self._cold.record(where)
            merged = _merge(previous, event)
            if merged is previous:  # a copy: the record stays where it is
                if not is_memory_only(event):
                    self.duplicates += 1
                return None
            self._cold.drop(where)
            if merged is None:
                self.replaced.append(event.iteration)
            else:
                event = merged
        self.iterations[event.iteration] = event
        if self._limit is not None and len(self.iterations) > self._limit:
            self._spill()
        return event

    @property
    def _limit(self) -> int | None:
        """How many records may be in memory before some move to the file (None: no limit)."""
        if self.spill_after is None or self._cold is None:
            return self.spill_after
        return min(self.spill_after, 2 * HOT_RECORDS)

    def _spill(self) -> None:
        """Move the records in memory to the file but the newest (the last taken in).

        The newest :data:`HOT_RECORDS` stay, or half of ``spill_after`` if that is fewer (and
        the few more that make the moved ones whole blocks of the file).  A
        log long enough to have reached ``spill_after`` records is written to the file
        whole in the end, so holding more of it gains nothing.
        """
        assert self.spill_after is not None
        if self._cold is None:
            self._cold = ColdRecords()
        count = len(self.iterations) - min(HOT_RECORDS, self.spill_after // 2)
        if count >= BLOCK_RECORDS:  # whole blocks (a few more stay): no block of one record each time
            count -= count % BLOCK_RECORDS
        moved = list(itertools.islice(self.iterations, count))
        for start in range(0, len(moved), BLOCK_RECORDS):  # a block at a time: few copies at once
            batch = moved[start : start + BLOCK_RECORDS]
            self._cold.put([self.iterations.pop(iteration) for iteration in batch])
        for iteration in moved:
            self._bodies.pop(iteration, None)

    def consume(self, events: Iterable[Any]) -> EventCollector:
        """Take every event of ``events`` (copies of lines, most of an interleaved log's, only counted)."""
        add = self.add
        repeated = 0
        for event in events:
            if event is REPEATED_LINE:
                repeated += 1
            else:
                add(event)
        self.duplicates += repeated
        return self

    @property
    def rank_peaks(self) -> list[RankPeak]:
        """The memory peaks the parser read, one per rank (a line without a rank first)."""
        return sorted(self.rank_memory.values(), key=lambda r: -1 if r.rank is None else r.rank)

    @property
    def records(self) -> Sequence[IterationRecord]:
        """The records, ordered by iteration: a list, or a :class:`~tprimat.result.spill.RecordSequence`
        when some were moved to a file (after which the collector takes no more records)."""
        if self._cold is None:
            return [self.iterations[i] for i in sorted(self.iterations)]
        if self._finished is None:
            self._finished = self._cold.finish(list(self.iterations.values()))
            self.iterations.clear()
            self._bodies.clear()
        return self._finished

    @property
    def eval_records(self) -> list[EvalRecord]:
        """Evaluations in training order."""
        return sorted(self.evaluations.values(), key=lambda e: (e.samples or 0, e.iteration or 0))

    def fact(self, key: str, default: Any = None) -> Any:
        found = self.facts.get(key)
        return found.value if found is not None else default

    def notes(self) -> list[str]:
        """Provenance notes describing what the collector dropped, replaced or doubted."""
        notes = []
        if self.duplicates:
            notes.append(f"dropped {self.duplicates} duplicate iteration lines (same values)")
        if self.replaced:
            shown = ", ".join(str(i) for i in sorted(set(self.replaced))[:20])
            notes.append(
                f"iterations logged again with other values (kept the later): {shown}"
                + (" ..." if len(set(self.replaced)) > 20 else "")
            )
        for conflict in self.conflicting_facts:
            notes.append(f"log states different values for {conflict}; kept the first")
        for issue in self.issues:
            notes.append(f"skipped {issue.source}: {issue.message}")
        if self.issue_count > len(self.issues):
            notes.append(f"... and {self.issue_count - len(self.issues)} more skipped lines")
        return notes
