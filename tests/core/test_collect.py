import pytest

from tprimat.contract.records import LogFact, ParseIssue, is_memory_only
from tprimat.result.collect import MAX_ISSUES_KEPT, EventCollector
from tprimat.result.schema import IterationRecord


def test_exact_repeats_from_other_ranks_are_dropped():
    c = EventCollector()
    assert c.add(IterationRecord(iteration=1, step_time_s=1.0, source="rank-0.log:10")) is not None
    assert c.add(IterationRecord(iteration=1, step_time_s=1.0, source="rank-7.log:10")) is None
    assert c.duplicates == 1 and len(c.records) == 1
    assert c.notes() == ["dropped 1 duplicate iteration lines (same values)"]


def test_restarted_iterations_keep_the_later_values():
    c = EventCollector().consume(
        [IterationRecord(iteration=i, step_time_s=1.0) for i in (1, 2, 3)]
        + [IterationRecord(iteration=2, step_time_s=1.5)]
    )
    assert [r.step_time_s for r in c.records] == [1.0, 1.5, 1.0]
    assert "kept the later): 2" in c.notes()[0]


def test_facts_keep_the_first_value_and_note_conflicts():
    c = EventCollector().consume(
        [
            LogFact(key="global_batch_size", value=128, source="a:1"),
            LogFact(key="global_batch_size", value=64, source="a:9"),
        ]
    )
    assert c.fact("global_batch_size") == 128 and c.fact("missing", 7) == 7
    assert "global_batch_size: 128 (a:1) vs 64 (a:9)" in c.notes()[0]


def test_issues_are_capped_but_counted():
    c = EventCollector().consume(ParseIssue(source=f"f:{i}", message="garbage") for i in range(MAX_ISSUES_KEPT + 5))
    assert len(c.issues) == MAX_ISSUES_KEPT and c.issue_count == MAX_ISSUES_KEPT + 5
    assert c.notes()[-1] == "... and 5 more skipped lines"


def test_other_objects_are_a_programming_error():
    with pytest.raises(TypeError):
        EventCollector().add("iteration 1")


def test_a_record_is_memory_only_when_it_holds_nothing_but_memory_readings():
    assert is_memory_only(IterationRecord(iteration=5, mem_allocated_gib=3.0, source="log:9"))
    assert is_memory_only(IterationRecord(iteration=5))
    assert not is_memory_only(IterationRecord(iteration=5, step_time_s=1.0, mem_allocated_gib=3.0))
    # No step time, but something other than memory: not a memory line.
    assert not is_memory_only(IterationRecord(iteration=5, loss=2.5))
    assert not is_memory_only(IterationRecord(iteration=5, reported={"tflops_per_gpu": 400.0}))
    assert not is_memory_only(IterationRecord(iteration=5, covers_iterations=10))
