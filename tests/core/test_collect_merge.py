"""Memory readings complete the record of their iteration; other differences replace it."""

from __future__ import annotations

from tprimat.result.collect import EventCollector
from tprimat.result.schema import IterationRecord


def line(iteration: int, step: float = 1.0, **extra) -> IterationRecord:
    return IterationRecord(iteration=iteration, step_time_s=step, loss=2.0, **extra)


def test_memory_lines_after_the_iteration_line_are_merged_keeping_the_largest():
    collector = EventCollector()
    collector.add(line(1, source="a:1"))
    collector.add(IterationRecord(iteration=1, mem_max_allocated_gib=3.0, source="a:2"))
    collector.add(IterationRecord(iteration=1, mem_max_allocated_gib=2.5, source="a:3"))
    (record,) = collector.records
    assert record.step_time_s == 1.0 and record.mem_max_allocated_gib == 3.0
    assert record.source == "a:1"
    assert collector.replaced == [] and collector.duplicates == 0


def test_memory_before_the_iteration_line_and_duplicates():
    collector = EventCollector()
    collector.add(IterationRecord(iteration=4, mem_reserved_gib=7.0))  # rank 0's file first
    collector.add(line(4, source="rank-7:10"))
    collector.add(line(4, source="rank-0:12"))  # the forwarded copy
    (record,) = collector.records
    assert record.mem_reserved_gib == 7.0 and record.source == "rank-7:10"
    assert collector.duplicates == 1


def test_different_values_still_replace():
    collector = EventCollector()
    collector.add(line(3, 1.0, mem_reserved_gib=5.0))
    collector.add(line(3, 1.5))
    assert collector.records[0].step_time_s == 1.5
    assert collector.replaced == [3]


def test_two_copies_of_a_nan_loss_line_are_one_duplicate():
    collector = EventCollector()
    collector.add(IterationRecord(iteration=2, step_time_s=1.0, loss=float("nan"), source="r7:5"))
    collector.add(IterationRecord(iteration=2, step_time_s=1.0, loss=float("nan"), source="r0:9"))
    assert collector.duplicates == 1 and collector.replaced == []
