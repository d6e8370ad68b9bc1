"""A block whose every record is an exact copy of a record already taken (another rank's copy of
its iterations) is counted as that many duplicates without a record made per line, whether the
records it copies are held in a block taken whole, in memory as records or in the records' file;
the records, counts, notes and skipped lines are exactly those of its records taken one by one.
Anything else in the block (a replacement, a memory figure that adds, an implausible figure) is
taken a record at a time, as before."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.blocks import block_of, blockified
from tprimat.contract.records import IterationBlock, IterationRecord
from tprimat.result import collect, spill
from tprimat.result.collect import EventCollector
from tprimat.result.spill import RecordSequence

NAN = math.nan


def _plain(first: int, count: int, **values) -> list[IterationRecord]:
    return [
        IterationRecord(
            iteration=i,
            step_time_s=0.5 + i / 1000,
            loss=3.0 - i / 1000,
            global_batch_size=16,
            mem_allocated_gib=2.0,
            source=f"rank-7/debug.log:{i}",
            reported={"tflops": 100.0 + i},
            **values,
        )
        for i in range(first, first + count)
    ]


def _copies(records: list[IterationRecord], **change) -> list[IterationRecord]:
    """Another rank's copies of ``records``: read elsewhere, with ``change``."""
    return [attrs.evolve(r, source=f"rank-0/debug.log:{r.iteration + 5}", **change) for r in records]


def _outcome(collector: EventCollector) -> tuple:
    records = collector.records
    return (
        [repr(attrs.astuple(record, recurse=False)) for record in records],
        collector.duplicates,
        collector.replaced,
        collector.notes(),
        collector.issue_count,
        collector.issues,
    )


def _by_record(events: list, spill_after: int | None = None) -> EventCollector:
    """The same events, each block fed as its records (``block.records()``)."""
    collector = EventCollector(spill_after=spill_after)
    for event in events:
        collector.consume(event.records() if isinstance(event, IterationBlock) else [event])
    return collector


@pytest.fixture
def made(monkeypatch):
    """The rows made into records by the collector (a block counted as copies makes none)."""
    rows: list[tuple] = []
    real = collect.record_from

    def counting(row):
        rows.append(row)
        return real(row)

    monkeypatch.setattr(collect, "record_from", counting)
    monkeypatch.setattr(spill, "record_from", counting)
    return rows


@pytest.fixture
def small_file(monkeypatch):
    """Blocks of 4 records in the file, 4 records kept in memory once some moved there."""
    monkeypatch.setattr(spill, "BLOCK_RECORDS", 4)
    monkeypatch.setattr(collect, "BLOCK_RECORDS", 4)
    monkeypatch.setattr(collect, "HOT_RECORDS", 4)


def _check(first: list, copies: list, made: list, spill_after: int | None = None, *, fast: bool) -> EventCollector:
    """Feed ``first`` then ``copies`` by blocks; compare with the records one by one; whether the
    copies made records is ``not fast``."""
    by_block = EventCollector(spill_after=spill_after).consume(first)
    made.clear()
    by_block.consume(copies)
    assert (not made) is fast
    by_record = _by_record([*first, *copies], spill_after)
    assert _outcome(by_block) == _outcome(by_record)
    return by_block


def test_copies_of_a_block_taken_whole_are_counted_without_making_records(made):
    records = _plain(1, 40)
    collector = _check([block_of(records)], [block_of(_copies(records[5:25]))], made, fast=True)
    assert collector.duplicates == 20 and collector.notes() == ["dropped 20 duplicate iteration lines (same values)"]


def test_copies_of_records_in_memory_are_counted_without_making_records(made):
    records = _plain(1, 40)
    collector = _check(records, [block_of(_copies(records[:10])), block_of(_copies(records[30:]))], made, fast=True)
    assert collector.duplicates == 20


def test_copies_spanning_a_block_taken_whole_and_records_in_memory(made):
    records = _plain(1, 40)
    first = [*records[:10], block_of(records[10:])]
    assert _check(first, [block_of(_copies(records[5:15]))], made, fast=True).duplicates == 10


def test_copies_of_records_in_the_file_read_each_block_of_the_file_once(made, small_file, monkeypatch):
    records = _plain(1, 40)
    first, copies = [block_of(records[:20]), *records[20:]], [block_of(_copies(records[2:10]))]
    collector = EventCollector(spill_after=8).consume(first)
    assert collector._cold is not None and collector._cold.highest >= 10  # iterations 1-16 in the file
    reads = []
    real = spill.RecordFile.read_rows
    monkeypatch.setattr(spill.RecordFile, "read_rows", lambda self, *where: reads.append(where) or real(self, *where))
    made.clear()
    collector.consume(copies)
    monkeypatch.undo()
    assert not made and collector.duplicates == 8
    # Iterations 3 to 10 lie in three blocks of the file (1-4, 5-8, 9-12): each read once.
    assert len(reads) == len(set(reads)) == 3
    assert isinstance(collector.records, RecordSequence)
    assert _outcome(collector) == _outcome(_by_record([*first, *copies], 8))


def test_copies_of_a_nan_loss_are_copies(made, small_file):
    records = _plain(1, 12, lr=NAN)
    records[3] = attrs.evolve(records[3], loss=float("nan"))
    copies = _copies(records)
    copies[3] = attrs.evolve(copies[3], loss=float("nan"))  # another NaN object: equal as a copy
    for first in ([block_of(records)], records, [block_of(records[:6]), *records[6:]]):
        for spill_after in (None, 4):
            assert _check(first, [block_of(copies)], made, spill_after, fast=True).duplicates == 12


def test_a_copy_with_less_or_no_memory_adds_nothing(made):
    records = _plain(1, 10)
    copies = _copies(records[:5], mem_allocated_gib=1.5) + _copies(records[5:], mem_allocated_gib=None)
    assert _check([block_of(records)], [block_of(copies)], made, fast=True).duplicates == 10


def test_a_copy_adding_a_memory_figure_is_taken_as_a_record(made, small_file):
    records = _plain(1, 12)
    copies = _copies(records)
    copies[6] = attrs.evolve(copies[6], mem_reserved_gib=4.0)  # a figure the record lacks
    copies[7] = attrs.evolve(copies[7], mem_allocated_gib=2.5)  # larger than the record's
    for first in ([block_of(records)], records):
        for spill_after in (None, 4):
            collector = _check(first, [block_of(copies)], made, spill_after, fast=False)
            assert collector.duplicates == 10
            held = {r.iteration: r for r in collector.records}
            assert held[7].mem_reserved_gib == 4.0 and held[8].mem_allocated_gib == 2.5


def test_a_block_mixing_copies_and_a_replacement_is_taken_a_record_at_a_time(made, small_file):
    records = _plain(1, 12)
    copies = _copies(records)
    copies[4] = attrs.evolve(copies[4], loss=9.0)  # the job restarted: another value
    for first in ([block_of(records)], records, [block_of(records[:6]), *records[6:]]):
        for spill_after in (None, 4):
            collector = _check(first, [block_of(copies)], made, spill_after, fast=False)
            assert collector.duplicates == 11 and collector.replaced == [5]


@pytest.mark.parametrize(
    "change",
    [
        {"global_batch_size": 16.0},  # equal to 16 in a body, but not a count
        {"mem_allocated_gib": NAN},  # left out of a body, adds nothing when merged, not a figure
        {"mem_allocated_gib": -1.0},
        {"energy_j": None, "mem_rss_gib": math.inf},
    ],
)
def test_a_copy_equal_in_body_but_implausible_is_refused_as_its_record_is(made, change):
    records = _plain(1, 6)
    copies = _copies(records)
    copies[2] = attrs.evolve(copies[2], **change)
    collector = _check([block_of(records)], [block_of(copies)], made, fast=False)
    assert collector.duplicates == 5 and collector.issue_count == 1


def test_a_block_with_one_new_iteration_is_taken_a_record_at_a_time(made):
    records = _plain(1, 10)
    collector = _check([block_of(records[:9])], [block_of(_copies(records))], made, fast=False)
    assert collector.duplicates == 9 and len(collector.records) == 10


def test_a_copy_of_an_iteration_within_a_block_s_span_but_missing_from_it_is_new(made):
    records = [IterationRecord(iteration=i, step_time_s=1.0, loss=2.0) for i in range(1, 20, 2)]  # 1, 3, ... 19
    alike = IterationRecord(iteration=4, step_time_s=1.0, loss=2.0)  # the values of 3 and 5, not in the block
    collector = _check([block_of(records)], [block_of([records[1], alike])], made, fast=False)
    assert collector.duplicates == 1 and len(collector.records) == 11


def test_interleaved_records_and_blocks_go_to_the_file_in_whole_blocks(small_file, monkeypatch):
    """A per-rank tree's first rank: a memory line, then a run of iteration lines that it
    completes (taken as records), and now and then a run taken whole: the file holds whole
    blocks, in order, not a block per run."""
    monkeypatch.setattr(spill.ColdRecords, "_merged", lambda *_: pytest.fail("blocks overlap"))
    records = _plain(1, 200)
    events = []
    for start in range(0, 200, 10):
        run = records[start : start + 10]
        if start % 30:
            events.append(IterationRecord(iteration=run[0].iteration, mem_reserved_gib=3.0))
        events.append(block_of(run))
    collector = EventCollector(spill_after=16).consume(events)
    found = collector.records
    assert isinstance(found, RecordSequence)
    assert [part.count for part in found._parts][:-1] == [4] * (len(found._parts) - 1)
    assert _outcome(collector) == _outcome(_by_record(events, 16))


_kinds = st.sampled_from(["copy", "copy", "copy", "nan", "less", "more", "replace", "float", "new"])


@st.composite
def _events(draw):
    """Runs of records taken (as blocks or records), then copies of some of them (most exact),
    as blocks of a few, in any order."""
    count = draw(st.integers(1, 30))
    records = _plain(1, count)
    events = list(blockified(records, draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))))
    if draw(st.booleans()):
        events = [r for e in events for r in (e.records() if isinstance(e, IterationBlock) else [e])]
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(1, count))
        copies = []
        for record in records[start - 1 : start - 1 + draw(st.integers(1, 12))]:
            kind = draw(_kinds)
            change = {
                "copy": {},
                "nan": {"mem_allocated_gib": NAN},
                "less": {"mem_allocated_gib": 1.0},
                "more": {"mem_allocated_gib": 3.0},
                "replace": {"loss": 7.0},
                "float": {"global_batch_size": 16.0},
                "new": {"iteration": record.iteration + count},
            }[kind]
            copies.append(attrs.evolve(record, source=f"rank-0:{record.iteration}", **change))
        copies.sort(key=lambda r: r.iteration)
        events.extend(blockified(copies, draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))))
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events(), spill_after=st.sampled_from([None, 2, 5, 16]), block_records=st.sampled_from([2, 3, 1024]))
def test_blocks_of_copies_collect_as_their_records(events, spill_after, block_records):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spill, "BLOCK_RECORDS", block_records)
        patch.setattr(collect, "BLOCK_RECORDS", block_records)
        patch.setattr(collect, "HOT_RECORDS", 4)
        expected = _outcome(_by_record(events, spill_after))
        assert _outcome(EventCollector(spill_after=spill_after).consume(events)) == expected


def test_a_per_rank_tree_reads_the_same_with_and_without_counting_copies_by_block(registry, tmp_path, monkeypatch):
    """The per-rank tree of the Primus fixture (``bench/logshapes.py``): most of the last rank's
    lines are copies of rank 0's; with records moved to the file early, the result is the one the
    record path gives."""
    import importlib.util

    from tprimat.parse import logs
    from tprimat.result.schema import dumps_result

    bench = Path(__file__).resolve().parents[2] / "bench" / "logshapes.py"
    spec = importlib.util.spec_from_file_location("logshapes", bench)
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    tree = shapes.build_tree(tmp_path / "tree", 4)  # long enough for runs of lines read as blocks
    monkeypatch.setattr(logs, "SPILL_AFTER_RECORDS", 64)
    monkeypatch.setattr(collect, "HOT_RECORDS", 16)
    counted = []
    real = EventCollector._add_copies

    def spied(self, block):
        counted.append(real(self, block))
        return counted[-1]

    monkeypatch.setattr(EventCollector, "_add_copies", spied)
    fast = dumps_result(logs.parse_logs([tree], registry=registry, workers=1).result)
    assert any(counted) and "dropped" in fast
    monkeypatch.setattr(EventCollector, "_add_copies", lambda self, block: False)
    assert dumps_result(logs.parse_logs([tree], registry=registry, workers=1).result) == fast


@pytest.fixture(scope="module")
def registry():
    from tprimat.contract.registry import Registry

    return Registry.from_environment()
