"""Time to target computed by the core from evaluation records."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.contract.records import EvalRecord
from tprimat.result import convergence
from tprimat.result.convergence import STEP_CLOCK, eval_points, summarize_convergence, with_step_clock
from tprimat.result.schema import IterationRecord

RECORDS = [
    EvalRecord(iteration=4, samples=32, time_s=1.5, eval_loss=6.7),
    EvalRecord(iteration=8, samples=64, time_s=2.9, eval_loss=5.2),
    EvalRecord(iteration=12, samples=96, time_s=4.4, eval_loss=4.9),
    EvalRecord(iteration=16, samples=128, time_s=5.8, eval_loss=5.0),
]


def test_first_evaluation_at_or_below_the_target():
    points = eval_points(reversed(RECORDS), global_batch_size=8, seq_length=32)
    assert [p.samples for p in points] == [32, 64, 96, 128]
    summary = summarize_convergence(points, target_log_perplexity=5.2, init_time_s=2.0, run_time_s=6.0)
    assert summary.reached and summary.time_to_target_s == 2.9
    assert (summary.samples_to_target, summary.tokens_to_target) == (64, 64 * 32)
    assert (summary.best_eval_loss, summary.final_eval_loss, summary.evaluations) == (4.9, 5.0, 4)
    assert (summary.init_time_s, summary.run_time_s) == (2.0, 6.0)


def test_missed_target_and_nan_losses():
    points = eval_points([*RECORDS, EvalRecord(iteration=20, eval_loss=math.nan)], global_batch_size=8, seq_length=32)
    assert points[-1].samples == 160  # iteration x global batch where the log gives no samples
    summary = summarize_convergence(points, target_log_perplexity=3.3)
    assert not summary.reached and summary.time_to_target_s is None and summary.samples_to_target is None
    assert summary.best_eval_loss == 4.9 and math.isnan(summary.final_eval_loss)


def test_step_clock_only_without_logged_times():
    untimed = eval_points(
        [EvalRecord(iteration=2, eval_loss=5.0), EvalRecord(iteration=4, eval_loss=4.0)],
        global_batch_size=8,
        seq_length=32,
    )
    steps = [IterationRecord(iteration=i, step_time_s=0.5) for i in range(1, 5)]
    filled, used = with_step_clock(untimed, steps)
    assert used and [p.time_s for p in filled] == [1.0, 2.0]
    summary = summarize_convergence(filled, target_log_perplexity=4.5, clock=STEP_CLOCK)
    assert summary.time_to_target_s == 2.0 and summary.clock == STEP_CLOCK
    timed = eval_points(RECORDS, global_batch_size=8, seq_length=32)
    assert with_step_clock(timed, steps) == (timed, False)


def test_run_summary_line():
    from tprimat.running.live import convergence_text

    points = eval_points(RECORDS, global_batch_size=8, seq_length=32)
    hit = summarize_convergence(points, target_log_perplexity=5.2, init_time_s=2.0)
    assert convergence_text(hit) == "target 5.2 reached at 64 samples in 2.9 s (init 2.0 s, 4 evaluations)"
    miss = summarize_convergence(points, target_log_perplexity=3.3)
    assert convergence_text(miss).startswith("target 3.3 not reached (best eval loss 4.9000)")


def _step_clock_by_definition(points, records):
    """Each point's time by the plain definition: the sum, in iteration order, of the step times
    (× iterations covered) of every timed record up to the point's iteration."""
    steps = sorted((r.iteration, r.step_time_s * r.covers_iterations) for r in records if r.step_time_s is not None)
    filled = []
    for point in points:
        covered = [t for i, t in steps if point.iteration is not None and i <= point.iteration]
        filled.append(
            point if point.iteration is None else attrs.evolve(point, time_s=sum(covered) if covered else None)
        )
    return filled


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 60), st.none() | st.floats(0.001, 1e4), st.integers(1, 3)),
        min_size=1,
        max_size=50,
    ),
    st.lists(st.none() | st.integers(0, 70), min_size=1, max_size=6),
    st.booleans(),
)
def test_the_step_clock_is_the_sum_of_the_step_times_up_to_each_evaluation(rows, at, running):
    """Whether the sums are the running sums (``running``: where ``sum`` adds in order) or each
    point's own, they are those of ``sum`` over each point's step times."""
    records = [IterationRecord(iteration=i, step_time_s=s, covers_iterations=c) for i, s, c in rows]
    points = eval_points([EvalRecord(iteration=i, eval_loss=3.0) for i in at], global_batch_size=8, seq_length=32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(convergence, "_SUM_IN_ORDER", running and convergence._SUM_IN_ORDER)
        filled, used = with_step_clock(points, records)
    if not any(r.step_time_s is not None for r in records):
        assert (filled, used) == (points, False)
        return
    assert used and filled == _step_clock_by_definition(points, records)
