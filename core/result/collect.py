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

A record that cannot be physical (:func:`~tprimat.result.plausible.implausible`:
a step time that is not finite or longer than a day, a negative or absurd
count, a memory or energy figure that is negative or not finite) is refused
here, whichever parser read it, and noted as a skipped line with its
``file:line``: one bad number never becomes a result that looks valid.

An :class:`~tprimat.contract.records.IterationBlock` (a run of iteration lines a
parser read at once) is taken as the records it stands for.  A block that these
rules would take record by record as it is (new iterations in ascending order,
every figure plausible, checked a column at a time) is kept as its columns and
moved to the file as such, without a record made per line: a long run's log is
mostly such blocks; one a worker sealed (:class:`~tprimat.result.packing.SealedBlock`: it
checked the block the same way and encoded its columns as the file stores them) is kept, and
moved to the file, still encoded.  A block whose every record these rules would drop as an exact copy
(another rank's copy of iterations taken already: most blocks of a per-rank tree after the first
rank's) is counted as that many duplicates, compared a row at a time with the stored values of
the records it copies, without a record made per line.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Collection, Iterable, Iterator, Reversible, Sequence
from typing import Any, Protocol

import attrs

from tprimat.contract.records import (
    BODY_FIELDS,
    EMPTY_BODY,
    ITERATION_FIELDS,
    MEMORY_FIELDS,
    REPEATED_LINE,
    EvalRecord,
    IterationBlock,
    LogFact,
    ParseIssue,
    RankPeak,
    RepeatedLine,
    body_values,
    is_memory_only,
    iteration_values,
)
from tprimat.result.packing import SealedBlock, record_from
from tprimat.result.plausible import INTS, implausible, plausible_columns
from tprimat.result.schema import IterationRecord
from tprimat.result.spill import BLOCK_RECORDS, ColdRecords, RecordSequence, RowSource, memory_only_row

#: How many skipped-line references a result keeps verbatim (the rest are counted).
MAX_ISSUES_KEPT = 50


#: Comparison keys kept for the records compared last (an iteration's copies, one per rank, come
#: together): a key costs about 200 bytes, so one per record of a long run would add up.
BODIES_KEPT = 4096

#: Records a collector keeps in memory once it has moved some to a file: the copies of an
#: iteration (one per rank, a memory line after an iteration line) come close together in a log.
HOT_RECORDS = 4096

_get_memory = operator.attrgetter(*MEMORY_FIELDS)

_PLACE = {name: place for place, name in enumerate(ITERATION_FIELDS)}
_ITERATION = _PLACE["iteration"]
_PLACES = range(len(ITERATION_FIELDS))
_BODY_PLACES = [_PLACE[name] for name in BODY_FIELDS]
_MEMORY_PLACES = [_PLACE[name] for name in MEMORY_FIELDS]
#: A row's body (see :data:`~tprimat.contract.records.BODY_FIELDS`) and memory figures.
_row_body = operator.itemgetter(*_BODY_PLACES)
_row_memory = operator.itemgetter(*_MEMORY_PLACES)
_iteration_of = operator.itemgetter(_ITERATION)

#: The record's fields that have validators, with their places in a row.
_FIELDS: list[attrs.Attribute] = list(attrs.fields(IterationRecord))
_VALIDATED = [(place, field) for place, field in enumerate(_FIELDS) if field.validator is not None]


def _records_of(block: IterationBlock) -> list[IterationRecord]:
    """The records of ``block``: the record's own validators run over each column (raising as
    making the record would), then the records made without running them again.  A block
    taken a record at a time is another rank's copy of records taken already, in a per-rank
    tree most of them."""
    columns = block.columns
    for place, field in _VALIDATED:
        validator: Any = field.validator
        for value in columns[place]:
            validator(None, field, value)
    return list(map(record_from, zip(*columns, strict=True)))


def _same(value: Any) -> Any:
    """A value for comparison: NaN equals NaN here (two copies of a NaN loss are one line)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, _same(v)) for k, v in value.items()))
    return value


def _bodies_equal(a: tuple, b: tuple) -> bool:
    # Plain tuple equality first (C speed); on a miss, field by field with NaN equal to NaN, to
    # the first field that differs (a memory line's empty body differs at once).
    return a == b or (len(a) == len(b) and all(map(_same_value, a, b)))


def _same_value(x: Any, y: Any) -> bool:
    """Whether two values of a field are equal, NaN equal to NaN (see :func:`_same`)."""
    return x is y or x == y or _same(x) == _same(y)


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
    memory = _memory_merged(old, new)
    if base is previous and memory == old:
        return previous
    return attrs.evolve(base, **dict(zip(MEMORY_FIELDS, memory, strict=True)))


def _memory_merged(old: tuple, new: tuple) -> tuple:
    """The memory figures (:data:`~tprimat.contract.records.MEMORY_FIELDS` order) of two observations
    of an iteration merged: the largest reading of each, a missing one taken from the other."""
    return tuple(b if a is None else a if b is None else max(a, b) for a, b in zip(old, new, strict=True))


def _adds_nothing(old: tuple, new: tuple) -> bool:
    """Whether memory figures ``new`` leave the figures ``old`` as they are when merged with them
    (as :func:`_merge` merges them: then a record of the same body is a copy)."""
    return old == new or _memory_merged(old, new) == old


def _copied(held: list[tuple[Any, ...]], bodies: list[tuple], memories: list[tuple]) -> bool:
    """Whether records of these ``bodies`` and ``memories`` are, one for one, exact copies of the
    records held as the rows ``held``: compared all at once, one by one only if they differ."""
    held_bodies = list(map(_row_body, held))
    if held_bodies != bodies and not all(map(_bodies_equal, held_bodies, bodies)):
        return False
    held_memories = list(map(_row_memory, held))
    return held_memories == memories or all(map(_adds_nothing, held_memories, memories))


def _run(held: Sequence[int], position: int, iterations: Sequence[int], start: int) -> int:
    """How many of ``iterations`` from ``start`` on ``held`` holds from ``position`` on, one after
    the other: all it can, else one (the first alone), else none."""
    if position >= len(held):
        return 0
    count = min(len(held) - position, len(iterations) - start)
    if held[position : position + count] == iterations[start : start + count]:
        return count
    return int(held[position] == iterations[start])


class _Taken:
    """A block of records an :class:`EventCollector` took whole: its first and last iteration
    and its columns (see :class:`~tprimat.contract.records.IterationBlock`); for a block a
    worker sealed (:class:`~tprimat.result.packing.SealedBlock`), the sealed block, its columns
    decoded only if they are read."""

    __slots__ = ("first", "last", "sealed", "_columns")

    def __init__(
        self, first: int, last: int, columns: tuple[list[Any], ...] | None = None, sealed: SealedBlock | None = None
    ) -> None:
        self.first = first
        self.last = last
        self.sealed = sealed
        self._columns = columns

    @property
    def columns(self) -> tuple[list[Any], ...]:
        if self._columns is None:
            assert self.sealed is not None
            self._columns = self.sealed.block().columns
        return self._columns

    def __len__(self) -> int:
        return self.sealed.count if self.sealed is not None else len(self.columns[_ITERATION])


_first_of = operator.attrgetter("first")


def _split(block: _Taken, count: int) -> tuple[_Taken, _Taken]:
    """``block`` as two: its first ``count`` records and the others (``count`` within it)."""
    iterations = block.columns[_ITERATION]
    lower = tuple(column[:count] for column in block.columns)
    upper = tuple(column[count:] for column in block.columns)
    return _Taken(block.first, iterations[count - 1], lower), _Taken(iterations[count], block.last, upper)


def _runs(places: list[int]) -> list[tuple[int, int, int]]:
    """The runs of equal ``places`` (ascending): each as (place, start, stop) of its items."""
    runs = []
    start = 0
    for place, items in itertools.groupby(places):
        stop = start + sum(1 for _ in items)
        runs.append((place, start, stop))
        start = stop
    return runs


def _interleaved(column: Sequence[Any], runs: list[tuple[int, int, int]], values: Sequence[Any]) -> list[Any]:
    """``column`` with each run of ``values`` (see :func:`_runs`) put before its item at the run's
    place, in one pass (a slice at a time)."""
    joined: list[Any] = []
    done = 0
    for place, start, stop in runs:
        joined.extend(column[done:place])
        joined.extend(values[start:stop])
        done = place
    joined.extend(column[done:])
    return joined


@attrs.define
class EventCollector:
    """Accumulates parse events; :attr:`records` is ordered by iteration."""

    #: The records in memory by iteration (not those of blocks taken whole: see :attr:`records`).
    iterations: dict[int, IterationRecord] = attrs.Factory(dict)
    facts: dict[str, LogFact] = attrs.Factory(dict)
    conflicting_facts: list[str] = attrs.Factory(list)
    issues: list[ParseIssue] = attrs.Factory(list)
    evaluations: dict[tuple[int | None, int | None], EvalRecord] = attrs.Factory(dict)
    issue_count: int = 0
    duplicates: int = 0
    replaced: list[int] = attrs.Factory(list)
    rank_memory: dict[int | None, RankPeak] = attrs.Factory(dict)  # peaks the parser read, by rank
    #: Keep at most about this many records in memory, those of lower iterations in a temporary file
    #: (see :mod:`tprimat.result.spill`); None keeps them all in memory.  Once some have moved,
    #: only the :data:`HOT_RECORDS` of the highest iterations stay (see :meth:`_spill`).
    spill_after: int | None = None
    _bodies: dict[int, tuple] = attrs.Factory(dict)  # comparison keys of the kept records
    _cold: ColdRecords | None = None  # the records moved out of memory
    _finished: RecordSequence | None = None  # all records, once :attr:`records` was read
    _taken: list[_Taken] = attrs.Factory(list)  # blocks taken whole, kept as columns (see _add_block)
    _taken_rows: int = 0  # the records they hold
    _highest: int = -1  # the largest iteration taken in so far

    def add(self, event: Any) -> IterationRecord | None:
        """Take one event; return the record if it is a new or replaced iteration.

        An :class:`~tprimat.contract.records.IterationBlock` is taken as the records it stands
        for, and None returned (its records, when wanted one by one, are ``block.records()``).
        """
        if isinstance(event, IterationRecord):
            return self._add_record(event)
        if isinstance(event, IterationBlock):
            self._add_block(event)
            return None
        if isinstance(event, SealedBlock):
            self._add_sealed(event)
            return None
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
            "parsers yield IterationRecord, IterationBlock, EvalRecord, LogFact, ParseIssue, RepeatedLine or RankPeak,"
            f" not {event!r}"
        )

    def _add_record(self, event: IterationRecord) -> IterationRecord | None:
        problem = implausible(event)
        if problem is not None:
            self.add(ParseIssue(source=event.source or f"iteration {event.iteration}", message=problem))
            return None
        previous = self.iterations.get(event.iteration)
        if previous is None and self._taken and event.iteration >= self._taken[0].first:
            previous = self._thaw(event.iteration)
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
        if event.iteration > self._highest:
            self._highest = event.iteration
        limit = self._limit
        if limit is not None and len(self.iterations) + self._taken_rows > limit:
            self._spill()
        return event

    def _add_block(self, block: IterationBlock) -> None:
        """Take the records of ``block``: whole, as its columns, when each is certainly a new
        iteration that the record path would take as it is; else one record at a time.

        Whole: its iterations ascend, all above every iteration taken so far (so no record is a
        copy, a replacement or a completion of another), none is a memory line alone and none
        is refused by :func:`implausible` (see :func:`plausible_columns`).  The block is kept
        as columns until a later record falls within its span (:meth:`_thaw`) or it is moved
        to the file (:meth:`_spill`), so that the records, the counts and the notes are those
        of its records taken one by one.
        """
        columns = block.columns
        iterations = columns[_ITERATION]
        if not iterations:
            return
        if (
            self._finished is None
            and set(map(type, iterations)) == INTS
            and iterations[0] > self._highest
            and all(map(operator.lt, iterations, itertools.islice(iterations, 1, None)))
            and plausible_columns(columns)
        ):
            self._taken.append(_Taken(iterations[0], iterations[-1], columns))
            self._taken_rows += len(iterations)
            self._highest = iterations[-1]
            limit = self._limit
            if limit is not None and len(self.iterations) + self._taken_rows > limit:
                self._spill()
            return
        if self._add_copies(block):
            return
        for record in _records_of(block):
            self._add_record(record)

    def _add_sealed(self, sealed: SealedBlock) -> None:
        """Take a block a worker sealed: whole, still encoded, when its iterations lie above every
        iteration taken so far (the worker checked the rest :meth:`_add_block` checks); else as
        the block it stands for."""
        if self._finished is None and sealed.first > self._highest:
            self._taken.append(_Taken(sealed.first, sealed.last, sealed=sealed))
            self._taken_rows += sealed.count
            self._highest = sealed.last
            limit = self._limit
            if limit is not None and len(self.iterations) + self._taken_rows > limit:
                self._spill()
            return
        self._add_block(sealed.block())

    def _add_copies(self, block: IterationBlock) -> bool:
        """Count the records of ``block`` as duplicates, without making them, when the record path
        would drop each as an exact copy; whether it did (if not, nothing changed).

        Each record is compared with the record held for its iteration, where the record path
        finds it (:meth:`_held_rows`, a run of them at a time): a copy has an equal body (NaN
        equal to NaN, as :func:`_merge` compares) and memory figures that add nothing to those
        held (:func:`_copied`).  A body leaves out the memory figures and compares values
        loosely (``16 == 16.0``), so equal to an accepted record's is not enough: the block's
        columns must also be plausible (:func:`plausible_columns`, which the record's validators
        then pass too, and which holds no memory line alone).  Nothing is thawed or counted
        until every record is known to be a copy: a block that is not all copies (a
        replacement, a memory figure that adds, a new iteration) is taken a record at a time
        from the state it found.
        """
        columns = block.columns
        if self._finished is not None or not plausible_columns(columns):
            return False
        iterations = columns[_ITERATION]
        bodies = list(zip(*(columns[place] for place in _BODY_PLACES), strict=True))
        memories = list(zip(*(columns[place] for place in _MEMORY_PLACES), strict=True))
        start = 0
        while start < len(iterations):
            held = self._held_rows(iterations, start)
            stop = start + len(held)
            if not held or not _copied(held, bodies[start:stop], memories[start:stop]):
                return False
            start = stop
        self.duplicates += len(iterations)
        return True

    def _held_rows(self, iterations: Sequence[int], start: int) -> list[tuple[Any, ...]]:
        """The values (rows) of the records held for ``iterations`` from ``start`` on, found where
        :meth:`_add_record` looks (in memory, in a block taken whole, in the file) without making
        a record or thawing a block: as many as one place holds one after the other (a record in
        memory alone); empty when no record is held for ``iterations[start]``."""
        iteration = iterations[start]
        previous = self.iterations.get(iteration)
        if previous is not None:
            return [iteration_values(previous)]
        taken = self._taken
        if taken and iteration >= taken[0].first:
            block = taken[bisect.bisect_right(taken, iteration, key=_first_of) - 1]
            if iteration <= block.last:  # the record path looks no further than this block
                position = bisect.bisect_left(block.columns[_ITERATION], iteration)
                count = _run(block.columns[_ITERATION], position, iterations, start)
                return list(zip(*(column[position : position + count] for column in block.columns), strict=True))
        cold = self._cold
        if cold is None or cold.highest is None or iteration > cold.highest:
            return []
        stored = cold.run(iteration, len(iterations) - start)
        return stored[: _run(list(map(_iteration_of, stored)), 0, iterations, start)]

    def _thaw(self, iteration: int) -> IterationRecord | None:
        """The record of ``iteration`` if a block taken whole holds it, that block's records
        then held as records (a later event for one of them is taken as the record path takes it)."""
        taken = self._taken
        index = bisect.bisect_right(taken, iteration, key=_first_of) - 1
        if index < 0 or iteration > taken[index].last:
            return None
        block = taken.pop(index)
        self._taken_rows -= len(block)
        records = map(record_from, zip(*block.columns, strict=True))
        self.iterations.update(zip(block.columns[_ITERATION], records, strict=True))
        return self.iterations.get(iteration)

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
        if self._limit is not None and len(self.iterations) + self._taken_rows > self._limit:
            self._spill()
        return event

    @property
    def _limit(self) -> int | None:
        """How many records may be in memory before some move to the file (None: no limit)."""
        if self.spill_after is None or self._cold is None:
            return self.spill_after
        return min(self.spill_after, 2 * HOT_RECORDS)

    def _spill(self) -> None:
        """Move the records held in memory to the file but those of the highest iterations.

        The highest :data:`HOT_RECORDS` stay, or half of ``spill_after`` if that is fewer (and
        the few more that make the moved ones whole blocks of the file).  A log long enough to
        have reached ``spill_after`` records is written to the file whole in the end, so
        holding more of it gains nothing.  Records and blocks taken whole go together, in
        iteration order (a block the cut falls within goes in part, a sealed one whole later),
        so that the file's blocks are whole however the two interleave (:meth:`_move`).
        """
        assert self.spill_after is not None
        keep = min(HOT_RECORDS, self.spill_after // 2)
        count = len(self.iterations) + self._taken_rows - keep
        if count <= 0:
            return
        if count >= BLOCK_RECORDS:  # whole blocks (a few more stay): no block of one record each time
            count -= count % BLOCK_RECORDS
        taken = self._taken
        if taken and taken[0].sealed is not None and len(taken[0]) > count:
            if not self.iterations or taken[0].first < min(self.iterations):
                return  # the lowest is a sealed block the cut falls within: it goes whole, later
        iterations = sorted(self.iterations)
        blocks: list[_Taken] = []
        records = 0  # the lowest records that go
        while count:
            if taken and (records == len(iterations) or taken[0].first < iterations[records]):
                size = len(taken[0])
                if size > count and taken[0].sealed is not None:
                    break  # a sealed block goes whole, next time (a block's more stay meanwhile)
                block = taken.pop(0)
                if size > count:  # the cut falls within the block: its lower part goes
                    block, upper = _split(block, count)
                    taken.insert(0, upper)
                    size = count
                blocks.append(block)
                self._taken_rows -= size
                count -= size
            else:
                records += 1
                count -= 1
        self._move(blocks, iterations[:records])

    def _move(self, blocks: list[_Taken], iterations: list[int]) -> None:
        """Move ``blocks`` (taken whole, in order) and the records in memory of ``iterations``
        (ascending) to the file in iteration order: a sealed block as the worker encoded it,
        the other blocks and the records between sealed ones as one run of columns each.

        No record in memory lies within a block's span (it would have turned the block back
        into records, see :meth:`_thaw`), only between blocks, before or after them.
        """
        if self._cold is None:
            self._cold = ColdRecords()
        rows = [iteration_values(self.iterations.pop(iteration)) for iteration in iterations]
        for iteration in iterations:
            self._bodies.pop(iteration, None)
        done = 0  # the rows moved
        run: list[_Taken] = []  # blocks not sealed, moved with the rows among them
        for block in blocks:
            if block.sealed is None:
                run.append(block)
                continue
            below = bisect.bisect_left(rows, block.first, lo=done, key=_iteration_of)
            self._put_run(run, rows[done:below])
            self._cold.put_sealed(block.sealed)  # as the worker encoded it
            run, done = [], below
        self._put_run(run, rows[done:])

    def _put_run(self, blocks: list[_Taken], rows: list[tuple[Any, ...]]) -> None:
        """Move ``blocks`` (taken whole, in order) and ``rows`` (of records, ascending) to the file
        as one run of columns, in iteration order."""
        assert self._cold is not None
        if not blocks and not rows:
            return
        columns: Sequence[Sequence[Any]]
        if len(blocks) == 1:
            columns = blocks[0].columns
        else:
            columns = [
                list(itertools.chain.from_iterable(block.columns[place] for block in blocks)) for place in _PLACES
            ]
        if rows:
            runs = _runs([bisect.bisect_left(columns[_ITERATION], row[_ITERATION]) for row in rows])
            values = list(zip(*rows, strict=True))
            columns = [_interleaved(column, runs, field) for column, field in zip(columns, values, strict=True)]
        if columns[_ITERATION]:
            self._cold.put_columns(columns)

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
            while self._taken:
                self._thaw(self._taken[-1].first)
            return [self.iterations[i] for i in sorted(self.iterations)]
        if self._finished is None:
            taken, self._taken, self._taken_rows = self._taken, [], 0
            self._move(taken, sorted(self.iterations))
            self._finished = self._cold.finish([])
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
