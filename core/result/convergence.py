"""Evaluation points and time to target, computed by the core from a run's evaluation records.

Parsers only report what the log says (:class:`~tprimat.contract.records.EvalRecord`); here the
core fills in what follows from the config (tokens = samples x sequence length; samples
from the iteration and the global batch where the log gives only the iteration) and finds
the first evaluation at or below the target log-perplexity.  Time to target is that
evaluation's wall time since run start, the MLPerf time-to-train: evaluation time is
included (the clock never pauses) and initialisation before run start is reported apart.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Iterable

import attrs

from tprimat.contract.records import EvalRecord
from tprimat.result.schema import ConvergenceSummary, EvalPoint, IterationRecord
from tprimat.result.spill import record_field_blocks

TRAINER_CLOCK = "wall time since run start as the training program logged it (evaluations included)"
#: The run-clock facts a trainer may state (LogFact keys), passed on to the summary.
RUN_CLOCK_FACTS = ("init_time_s", "run_time_s", "run_started_at")
STEP_CLOCK = (
    "sum of the logged step times up to each evaluation: the log states no wall time, so "
    "evaluation and initialisation time are not included"
)


def eval_points(
    records: Iterable[EvalRecord], *, global_batch_size: int | None, seq_length: int | None
) -> list[EvalPoint]:
    """One :class:`EvalPoint` per record, in training order, with samples and tokens filled in."""
    points = []
    for record in records:
        samples = record.samples
        if samples is None and record.iteration is not None and global_batch_size:
            samples = record.iteration * global_batch_size
        tokens = samples * seq_length if samples is not None and seq_length else None
        points.append(
            EvalPoint(
                iteration=record.iteration,
                samples=samples,
                tokens=tokens,
                time_s=record.time_s,
                eval_loss=record.eval_loss,
                eval_sequences=record.eval_sequences,
                source=record.source,
            )
        )
    return sorted(points, key=lambda p: (p.samples or 0, p.iteration or 0))


def with_step_clock(points: list[EvalPoint], records: Iterable[IterationRecord]) -> tuple[list[EvalPoint], bool]:
    """Fill in ``time_s`` from the step times when the log gives none; True if it did.

    A point's time is the sum, in iteration order, of the step times (× the iterations each
    record covers) of the records up to its iteration: of the first ones, found by bisection,
    their sum taken once for all points where it can be.
    """
    if not points or any(p.time_s is not None for p in points):
        return points, False
    iterations, times = _step_times(records)
    if not iterations:
        return points, False
    # sum() of the first k times, for every k: the running sums where sum() adds in order, one
    # float after the other (a Python that compensates its float sums adds each prefix anew).
    running = list(itertools.accumulate(times)) if _SUM_IN_ORDER else None
    filled = []
    for point in points:
        if point.iteration is None:
            filled.append(point)
            continue
        covered = bisect.bisect_right(iterations, point.iteration)
        total = None
        if covered:
            total = running[covered - 1] if running is not None else sum(times[:covered])
        filled.append(attrs.evolve(point, time_s=total))
    return filled, True


#: Whether ``sum`` adds floats one after the other, rounding each time (1e16 + 1.0 rounds to 1e16):
#: its sum of the first k values is then the running sum's k-th value.
_SUM_IN_ORDER = sum([1e16, 1.0, -1e16]) == 0.0


def _step_times(records: Iterable[IterationRecord]) -> tuple[list[int], list[float]]:
    """The iteration and step time × iterations covered of each record with a step time, sorted
    (by iteration, then time), as two columns: read a block's columns at a time (records kept in a
    file are never made)."""
    iterations: list[int] = []
    times: list[float] = []
    for found, steps, covers in record_field_blocks(records, "iteration", "step_time_s", "covers_iterations"):
        if None in steps:
            timed = list(map(operator.is_not, steps, itertools.repeat(None)))
            found, steps, covers = (list(itertools.compress(column, timed)) for column in (found, steps, covers))
        iterations.extend(found)
        times.extend(map(operator.mul, steps, covers))
    if not all(map(operator.lt, iterations, itertools.islice(iterations, 1, None))):  # not in order already
        ordered = sorted(zip(iterations, times, strict=True))
        iterations, times = list(map(operator.itemgetter(0), ordered)), list(map(operator.itemgetter(1), ordered))
    return iterations, times


def summarize_convergence(
    points: list[EvalPoint],
    *,
    target_log_perplexity: float,
    init_time_s: float | None = None,
    run_time_s: float | None = None,
    run_started_at: str | None = None,
    clock: str | None = TRAINER_CLOCK,
) -> ConvergenceSummary:
    """Time, samples and tokens to the first evaluation whose loss is at or below the target."""
    losses = [p.eval_loss for p in points if p.eval_loss is not None and math.isfinite(p.eval_loss)]
    hit = next((p for p in points if p.eval_loss is not None and p.eval_loss <= target_log_perplexity), None)
    return ConvergenceSummary(
        target_log_perplexity=target_log_perplexity,
        reached=hit is not None,
        evaluations=len(points),
        time_to_target_s=hit.time_s if hit is not None else None,
        samples_to_target=hit.samples if hit is not None else None,
        tokens_to_target=hit.tokens if hit is not None else None,
        init_time_s=init_time_s,
        run_time_s=run_time_s,
        run_started_at=run_started_at,
        best_eval_loss=min(losses) if losses else None,
        final_eval_loss=points[-1].eval_loss if points else None,
        clock=clock if any(p.time_s is not None for p in points) else None,
    )
