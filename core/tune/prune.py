"""Pruning before anything runs: candidates the memory estimator says cannot fit are never tried.

The estimator is :func:`tprimat.memory.estimate.estimate_memory` when this
installation has it.  A candidate is pruned only on a definite "does not fit"
(:func:`tprimat.memory.verdict.fit_verdict`: short by more than the estimator's
error); one within the estimator's error or of unknown capacity is kept, and a
run that then dies of out-of-memory is recorded as infeasible instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.models import ModelSpec
from tprimat.tune.space import Candidate, apply

Estimator = Callable[..., Any]


def _does_not_fit(estimate: Any) -> bool:
    """Short by more than the estimator's error; another estimator's answer: its ``fits is False``."""
    from tprimat.memory.estimate import MemoryEstimate
    from tprimat.memory.verdict import Verdict, fit_verdict

    if isinstance(estimate, MemoryEstimate):
        return fit_verdict(estimate) is Verdict.DOES_NOT_FIT
    return estimate.fits is False


@attrs.frozen(kw_only=True)
class Pruned:
    candidate: Candidate
    reason: str
    total_gib: float | None = None


def default_estimator() -> Estimator | None:
    """The core's memory estimator, or None when this installation has none."""
    try:
        from tprimat.memory.estimate import estimate_memory
    except ImportError:
        return None
    return estimate_memory


def prune(
    found: list[Candidate],
    base: BenchmarkConfig,
    model: ModelSpec,
    *,
    capacity_gib: float | None,
    device: str | None,
    estimator: Estimator | None,
    trainer: str = "megatron-core",
) -> tuple[list[Candidate], list[Pruned], list[str]]:
    """``(kept, pruned, notes)``: candidates that may fit, in order, and those that cannot.

    ``trainer`` is the backend's ``BackendSpec.trainer``: the layout the estimate assumes.
    """
    if estimator is None:
        return (
            list(found),
            [],
            [
                "no memory estimator in this installation: nothing was pruned "
                "before running; out-of-memory runs are recorded as infeasible"
            ],
        )
    kept: list[Candidate] = []
    pruned: list[Pruned] = []
    unknown = 0
    for candidate in found:
        config = apply(base, candidate)
        try:
            estimate = estimator(config, model, capacity_gib=capacity_gib, device=device, trainer=trainer)
        except ValueError as exc:  # an unknown device without --device-capacity
            return list(found), [], [f"memory estimator not used: {exc}; give --device-capacity GIB to prune"]
        if _does_not_fit(estimate):
            margin = getattr(estimate, "margin_gib", None)
            pruned.append(
                Pruned(
                    candidate=candidate,
                    total_gib=estimate.total_gib,
                    reason=f"estimated {estimate.total_gib:.1f} GiB per GPU does not fit"
                    + (f" ({-margin:.1f} GiB over)" if margin is not None else ""),
                )
            )
        else:
            unknown += estimate.fits is None
            kept.append(candidate)
    notes = [f"memory estimator: {len(pruned)} of {len(found)} candidate(s) pruned"]
    if unknown:
        notes.append(
            f"memory estimator: device capacity unknown for {unknown} candidate(s); "
            "give --device-capacity to prune them"
        )
    return kept, pruned, notes
