"""The workload's global batch against the samples the log counts, pair of iterations by pair."""

from __future__ import annotations

from tprimat.contract.records import IterationRecord
from tprimat.result.workload import Workload, check_workload_declared


def _records(pairs: list[tuple[int, int | None]]) -> list[IterationRecord]:
    return [
        IterationRecord(iteration=i, step_time_s=1.0, consumed_samples=samples, source=f"run.log:{n}")
        for n, (i, samples) in enumerate(pairs, start=1)
    ]


def _problems(pairs: list[tuple[int, int | None]], gbs: int = 16) -> list[str]:
    return check_workload_declared(Workload(global_batch_size=gbs), _records(pairs), {}, {})


def test_samples_that_follow_the_global_batch_are_no_problem():
    assert _problems([(i, 16 * i) for i in range(1, 200)]) == []
    assert _problems([(1, 16), (2, None), (3, 48), (10, 160)]) == []  # gaps and lines without a count


def test_the_first_pair_off_the_global_batch_is_named_once():
    pairs = [(i, 16 * i) for i in range(1, 50)]
    pairs[30] = (31, 16 * 31 + 8)  # 30 -> 31 counts 24 samples, 31 -> 32 counts 8
    (problem,) = _problems(pairs)
    assert "over iterations 30-31, the log counts 24 (run.log:30 -> run.log:31)" in problem


def test_a_restart_that_goes_back_is_not_a_batch_mismatch():
    # Iterations logged again after a restart from a checkpoint: the count goes back with them.
    pairs = [(1, 16), (2, 32), (3, 48), (2, 32), (3, 48), (4, 64)]
    assert _problems(pairs) == []
    assert len(_problems([*pairs, (5, 70)])) == 1


def test_samples_are_compared_a_block_at_a_time_across_the_blocks_edges(monkeypatch):
    from tprimat.result import spill

    monkeypatch.setattr(spill, "BLOCK_RECORDS", 4)
    pairs = [(i, 16 * i) for i in range(1, 30)]
    assert _problems(pairs) == []
    for off in (4, 5, 8, 29):  # the last of a block, the first of the next, at the very end
        spoilt = [*pairs]
        spoilt[off - 1] = (off, 16 * off + 8)
        (problem,) = _problems(spoilt)
        assert f"iterations {off - 1}-{off}, the log counts 24" in problem
