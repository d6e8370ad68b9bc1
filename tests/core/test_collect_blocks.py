"""A block of iteration records is collected exactly as its records one by one: the same records,
duplicates, replacements, notes and skipped lines, whether the records stay in memory or move to
a file; and a block of new, plausible iterations is taken whole, without a record made of each."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.compiled import EXACT, compiled_or_skip
from tests.core.blocks import block_of, blockified
from tprimat.contract.records import REPEATED_LINE, IterationBlock, IterationRecord, LogFact, ParseIssue
from tprimat.result import collect, plausible, spill
from tprimat.result.collect import EventCollector, plausible_columns
from tprimat.result.spill import RecordSequence

NAN = math.nan

_steps = st.sampled_from([1.0, 1.5, 2.0, 2, math.inf, 1e6, 0.25])
_memory = st.sampled_from([None, None, 1.0, 2.5, 3, -1.0, NAN, math.inf, True])
_counts = st.sampled_from([None, None, 8, 4096, 0, -3, True, 2**70])


@st.composite
def _record(draw, iteration):
    memory_only = draw(st.booleans()) and draw(st.booleans())
    values = {"iteration": iteration, "source": f"train.log:{draw(st.integers(1, 500))}"}
    values["mem_allocated_gib"] = draw(_memory)
    values["mem_max_reserved_gib"] = draw(_memory)
    if memory_only:
        return IterationRecord(**values)
    values["step_time_s"] = draw(st.one_of(st.none(), _steps))
    values["loss"] = draw(st.sampled_from([None, 2.5, 2.25, NAN]))
    values["global_batch_size"] = draw(st.sampled_from([None, 8, 16, 0, True]))
    values["tokens"] = draw(_counts.filter(lambda v: v is None or v >= 0))
    values["energy_j"] = draw(st.sampled_from([None, 10.0, -1.0, 1e13]))
    values["reported"] = draw(st.sampled_from([{}, {"tflops": 1.5}, {"tflops": 2.5, "note": "x"}]))
    return IterationRecord(**values)


@st.composite
def _run(draw):
    """A run of ascending iterations (mostly plain, as a long run's log), or one record anywhere."""
    start = draw(st.integers(0, 60))
    if draw(st.booleans()):
        return [draw(_record(start))]
    gap = draw(st.sampled_from([1, 1, 2]))
    plain = draw(st.booleans())
    records = []
    for iteration in range(start, start + gap * draw(st.integers(1, 25)), gap):
        if plain:
            records.append(IterationRecord(iteration=iteration, step_time_s=1.0 + iteration / 64, loss=2.0))
        else:
            records.append(draw(_record(iteration)))
    return records


_other = st.sampled_from(
    [REPEATED_LINE, LogFact(key="seq_length", value=4096), ParseIssue(source="train.log:7", message="unreadable")]
)
_events = st.lists(st.one_of(_run(), st.lists(_other, min_size=1, max_size=2)), max_size=14).map(
    lambda parts: [event for part in parts for event in part]
)


def _outcome(collector: EventCollector) -> tuple:
    records = collector.records
    return (
        type(records),
        [repr(attrs.astuple(record, recurse=False)) for record in records],
        collector.duplicates,
        sorted(collector.replaced),
        collector.notes(),
        collector.issue_count,
    )


def _collected(events, spill_after):
    return EventCollector(spill_after=spill_after).consume(events)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=_events,
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    spill_after=st.sampled_from([None, 2, 5, 16, 64]),
    block_records=st.sampled_from([2, 3, 1024]),
)
def test_blocks_collect_as_their_records(events, sizes, spill_after, block_records):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spill, "BLOCK_RECORDS", block_records)
        patch.setattr(collect, "BLOCK_RECORDS", block_records)
        patch.setattr(collect, "HOT_RECORDS", 4)
        expected = _outcome(_collected(events, spill_after))
        assert _outcome(_collected(blockified(events, sizes), spill_after)) == expected


@settings(max_examples=100, deadline=None)
@given(events=_events, sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6))
def test_records_read_between_events_are_those_of_the_records_one_by_one(events, sizes):
    """Events added one at a time and the records read after each (as a live run does)."""
    by_record, by_block = EventCollector(), EventCollector()
    for event in blockified(events, sizes):
        by_block.add(event)
        for one in event.records() if isinstance(event, IterationBlock) else [event]:
            by_record.add(one)
        assert _outcome(by_block) == _outcome(by_record)


def _plain(first: int, count: int) -> list[IterationRecord]:
    return [
        IterationRecord(iteration=i, step_time_s=0.5 + i / 1000, loss=3.0 - i / 1000, reported={"tflops": 100.0 + i})
        for i in range(first, first + count)
    ]


def _no_records(monkeypatch):
    def refused(self):
        raise AssertionError("a block taken whole made records")

    monkeypatch.setattr(IterationBlock, "records", refused)


def test_a_block_of_new_plausible_iterations_is_taken_as_columns():
    collector = EventCollector()
    collector.consume(_plain(1, 5))
    with pytest.MonkeyPatch.context() as patch:
        _no_records(patch)
        collector.consume([block_of(_plain(6, 100)), block_of(_plain(106, 50))])
    assert [r.iteration for r in collector.records] == list(range(1, 156))
    assert collector.records[-1] == _plain(155, 1)[0]
    assert collector.duplicates == 0 and not collector.replaced and not collector.notes()


def test_blocks_taken_whole_go_to_the_file_as_columns(monkeypatch):
    monkeypatch.setattr(spill, "BLOCK_RECORDS", 16)
    monkeypatch.setattr(collect, "BLOCK_RECORDS", 16)
    monkeypatch.setattr(collect, "HOT_RECORDS", 32)
    records = _plain(0, 1000)
    collector = EventCollector(spill_after=100)
    with pytest.MonkeyPatch.context() as patch:
        _no_records(patch)
        collector.consume(blockified(records, [7, 40, 100, 3]))
        assert collector._cold is not None and collector._cold.blocks
    found = collector.records
    assert isinstance(found, RecordSequence)
    assert list(found) == records


def test_a_later_copy_memory_line_or_restart_finds_the_records_of_a_block():
    records = _plain(1, 40)
    memory = IterationRecord(iteration=10, mem_allocated_gib=3.5)
    copy = records[19]
    restarted = attrs.evolve(records[29], loss=9.0)
    by_record = EventCollector().consume([*records, memory, copy, restarted])
    with pytest.MonkeyPatch.context() as patch:
        _no_records(patch)
        by_block = EventCollector().consume([block_of(records)])
    by_block.consume([memory, copy, block_of([restarted])])
    assert _outcome(by_block) == _outcome(by_record)
    assert by_block.duplicates == 1 and by_block.replaced == [30]
    assert by_block.records[9].mem_allocated_gib == 3.5 and by_block.records[29].loss == 9.0


_ODD_VALUES = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(),
    st.sampled_from([True, False, None, 2**53, 2**53 + 1, -(2**53), 0.0, -0.0, 1e12, 1e12 + 1, "1", 2**80]),
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_ODD_VALUES, min_size=1, max_size=8),
    st.sampled_from(plausible._COLUMN_LIMITS),
    st.booleans(),
)
def test_the_compiled_check_of_a_column_is_the_python_one(values, limits, as_tuple):
    within = compiled_or_skip(EXACT).within
    _, least, greatest, kinds, optional = limits
    column = tuple(values) if as_tuple else values
    found = within(column, float(least), float(greatest), float in kinds, optional)
    python = plausible.within_in_python(column, kinds, least, greatest, optional)
    assert found is None or found == python
    if found is None:
        assert any(type(value) is int and abs(value) > 2**53 for value in values)


@pytest.mark.usefixtures("within_form")
@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"step_time_s": math.inf}, "an infinite step time"),
        ({"step_time_s": 2e5}, "a step longer than a day"),
        ({"step_time_s": None}, "no step time: maybe a memory line alone"),
        ({"tokens": True}, "a bool is not a count"),
        ({"global_batch_size": 0}, "a batch of none"),
        ({"consumed_samples": 2**80}, "past the limit"),
        ({"mem_reserved_gib": NAN}, "a NaN memory figure"),
        ({"mem_reserved_gib": -0.5}, "a negative memory figure"),
        ({"energy_j": math.inf}, "infinite energy"),
        ({"mem_rss_gib": True}, "a bool memory figure (plausible, but not certain from its type)"),
    ],
)
def test_a_block_with_any_doubt_is_taken_a_record_at_a_time(change, why):
    records = _plain(1, 10)
    records[4] = attrs.evolve(records[4], **change)
    block = block_of(records)
    assert not plausible_columns(block.columns), why
    by_block = EventCollector().consume([block])
    assert _outcome(by_block) == _outcome(EventCollector().consume(records))


@pytest.mark.usefixtures("within_form")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 50).flatmap(_record), min_size=1, max_size=6))
def test_columns_found_plausible_hold_only_plausible_records_with_a_step_time(records):
    if plausible_columns(block_of(records).columns):
        assert all(collect.implausible(r) is None and r.step_time_s is not None for r in records)


def test_plausible_columns_agree_with_implausible_on_plain_values():
    records = _plain(1, 10)
    assert plausible_columns(block_of(records).columns)
    assert all(collect.implausible(record) is None for record in records)
    with_memory = [attrs.evolve(r, mem_allocated_gib=1.5 * r.iteration, energy_j=7, tokens=4096) for r in records]
    assert plausible_columns(block_of(with_memory).columns)


@pytest.mark.parametrize(
    "iterations", [[5, 4, 6], [5, 5, 6], [3, 4, 5]], ids=["descending", "repeated", "below-the-highest"]
)
def test_a_block_not_above_every_iteration_taken_is_taken_a_record_at_a_time(iterations):
    before = _plain(1, 4)
    records = [attrs.evolve(_plain(i, 1)[0], loss=1.0) for i in iterations]
    by_block = EventCollector().consume([*before, block_of(records)])
    by_record = EventCollector().consume([*before, *records])
    assert _outcome(by_block) == _outcome(by_record)


def test_an_empty_block_is_nothing():
    collector = EventCollector().consume([block_of([])])
    assert collector.records == [] and not collector.notes()


def test_a_block_is_refused_once_the_records_were_read_from_the_file(monkeypatch):
    monkeypatch.setattr(collect, "HOT_RECORDS", 2)
    collector = EventCollector(spill_after=4).consume(_plain(1, 10))
    assert isinstance(collector.records, RecordSequence)
    with pytest.raises(RuntimeError):
        collector.add(block_of(_plain(20, 3)))


def test_records_logged_between_blocks_go_to_the_file_with_them(monkeypatch):
    """A parser reads a line now and then on its own between its runs: the file's blocks still
    follow one another (the records are read back as they are, not merged anew)."""
    monkeypatch.setattr(spill, "BLOCK_RECORDS", 16)
    monkeypatch.setattr(collect, "BLOCK_RECORDS", 16)
    monkeypatch.setattr(collect, "HOT_RECORDS", 32)
    monkeypatch.setattr(spill.ColdRecords, "_merged", lambda *_: pytest.fail("blocks overlap"))
    records = _plain(1, 31 * 20)
    events = []
    for start in range(0, len(records), 31):
        events += [block_of(records[start : start + 30]), records[start + 30]]
    collector = EventCollector(spill_after=100).consume(events)
    found = collector.records
    assert list(found) == records
    assert collector._cold._in_order
    assert all(part.count > 1 for part in found._parts)  # no record alone in a block of the file


@pytest.mark.parametrize(
    ("field", "value"),
    [("iteration", -1), ("step_time_s", 0.0), ("step_time_s", float("nan")), ("skipped", -2), ("covers_iterations", 0)],
)
def test_a_block_taken_a_record_at_a_time_is_refused_as_its_records_would_be(field, value):
    """A block that is not taken whole makes its records: one its parser should never have
    yielded (a row the record's validators refuse) is refused as that record is."""
    from tprimat.contract import IterationBlock, IterationRecord
    from tprimat.contract.records import ITERATION_FIELDS, iteration_values

    rows = [iteration_values(IterationRecord(iteration=i, step_time_s=1.0)) for i in (5, 6)]
    columns = [list(column) for column in zip(*rows, strict=True)]
    columns[ITERATION_FIELDS.index(field)][1] = value
    collector = EventCollector()
    collector.add(IterationRecord(iteration=9, step_time_s=1.0))  # the block is not above it: records
    with pytest.raises(ValueError):
        collector.add(IterationBlock(columns=tuple(columns)))


@pytest.mark.parametrize("spill_after", [None, 8])
def test_sealed_blocks_are_taken_as_the_blocks_they_stand_for(spill_after, monkeypatch):
    """A block a worker sealed is kept (and moved to the file) encoded: the records, the counts
    and the notes are those of the same blocks taken as blocks, with a later copy, a
    replacement and a block that falls below the others among them."""
    from tprimat.result.packing import SealedBlock, pack, unpack

    def records(first: int, count: int, loss: float = 2.0) -> list[IterationRecord]:
        return [
            IterationRecord(iteration=i, step_time_s=1.0 + i / 64, loss=loss, source=f"run.log:{i}")
            for i in range(first, first + count)
        ]

    events = [
        block_of(records(1, 6)),
        block_of(records(7, 9)),
        records(3, 1)[0],  # a copy of a record a sealed block holds
        block_of(records(16, 5)),
        block_of(records(10, 3, loss=3.0)),  # a restart: replacements, below the blocks before
        block_of(records(21, 12)),
    ]
    sealed = unpack(pack(events, seal_records=4))
    assert sum(isinstance(event, SealedBlock) for event in sealed) >= 8
    as_blocks = EventCollector(spill_after=spill_after).consume(events)
    moved = []
    real_put = spill.ColdRecords.put_sealed
    monkeypatch.setattr(
        spill.ColdRecords, "put_sealed", lambda cold, block: moved.append(block) or real_put(cold, block)
    )
    as_sealed = EventCollector(spill_after=spill_after).consume(sealed)
    assert [attrs.astuple(r) for r in as_sealed.records] == [attrs.astuple(r) for r in as_blocks.records]
    assert as_sealed.notes() == as_blocks.notes()
    assert (as_sealed.duplicates, as_sealed.replaced) == (as_blocks.duplicates, as_blocks.replaced)
    assert bool(moved) == (spill_after is not None)  # moved to the file as the worker encoded them
