"""Statistics over repeated runs: median, range, bootstrap confidence intervals, ratios.

Each run contributes one value (its own median from :mod:`tprimat.result.metrics`),
so intervals describe run-to-run variation, not iteration-to-iteration noise.
The 95% interval is the percentile bootstrap of the median over runs
(resampling runs with replacement, a fixed seed so that a report is
reproducible).  The ratio between two systems resamples each system's runs
independently and takes the ratio of the two medians.  With a single run
there is no interval, and the report says so.  With few runs the bootstrap
interval is the observed range itself (with two runs it always is): it is then
called what it is, "range of N runs", never a 95% confidence interval
(:func:`interval_kind`).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

import attrs

from tprimat.result.metrics import percentile

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20240917
CONFIDENCE = 0.95


@attrs.frozen(kw_only=True)
class Aggregate:
    """One quantity over the runs of one system."""

    n: int
    median: float
    min: float
    max: float
    ci_low: float | None  # None for a single run
    ci_high: float | None
    values: tuple[float, ...]
    #: What ``ci_low``–``ci_high`` is: "95% CI", or "range of N runs" when the bootstrap
    #: interval is just the observed range (too few runs); None without an interval.
    interval: str | None = None

    @property
    def single_run(self) -> bool:
        return self.n == 1


def interval_kind(bounds: tuple[float, float], extremes: tuple[float, float], runs: str) -> str:
    """ "95% CI" for a bootstrap interval narrower than the ``extremes`` the runs reach, else
    "range of ``runs``": with two runs (and often three to five) the percentile bootstrap
    returns the observed range, which is no confidence interval and is not called one."""
    low, high = bounds
    if low <= extremes[0] and high >= extremes[1]:
        return f"range of {runs}"
    return f"{CONFIDENCE:.0%} CI"


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def _bounds(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    tail = (1 - CONFIDENCE) / 2 * 100
    return percentile(ordered, tail), percentile(ordered, 100 - tail)


def bootstrap_median_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """Percentile-bootstrap 95% interval of the median of ``values`` (None below two values)."""
    data = _finite(values)
    if len(data) < 2:
        return None
    rng = random.Random(seed)
    n = len(data)
    medians = [statistics.median(rng.choices(data, k=n)) for _ in range(resamples)]
    return _bounds(medians)


def aggregate(values: Sequence[float | None], *, interval: bool = True) -> Aggregate | None:
    """Median, min–max and (if ``interval``) bootstrap interval of the finite ``values``."""
    data = _finite(values)
    if not data:
        return None
    ci = bootstrap_median_ci(data) if interval else None
    return Aggregate(
        n=len(data),
        median=statistics.median(data),
        min=min(data),
        max=max(data),
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        values=tuple(data),
        interval=interval_kind(ci, (min(data), max(data)), f"{len(data)} runs") if ci else None,
    )


@attrs.frozen(kw_only=True)
class Ratio:
    """``numerator`` median over ``denominator`` median, with its own interval when both repeat."""

    value: float
    ci_low: float | None
    ci_high: float | None
    note: str | None = None
    #: "95% CI", or "range of the runs' ratios" when the bootstrap reaches the extreme ratios.
    interval: str | None = None


def ratio_of_medians(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Ratio | None:
    """Ratio of the medians and its bootstrap 95% interval (runs resampled per side)."""
    top, bottom = _finite(numerator), _finite(denominator)
    if not top or not bottom or statistics.median(bottom) == 0:
        return None
    value = statistics.median(top) / statistics.median(bottom)
    if len(top) < 2 or len(bottom) < 2:
        sides = []
        if len(top) < 2:
            sides.append("the compared system")
        if len(bottom) < 2:
            sides.append("the baseline")
        return Ratio(value=value, ci_low=None, ci_high=None, note=f"single run for {' and '.join(sides)}: no interval")
    rng = random.Random(seed)
    samples = []
    for _ in range(resamples):
        b = statistics.median(rng.choices(bottom, k=len(bottom)))
        t = statistics.median(rng.choices(top, k=len(top)))
        if b:
            samples.append(t / b)
    low, high = _bounds(samples)
    extremes = (min(top) / max(bottom), max(top) / min(bottom))
    kind = interval_kind((low, high), extremes, f"the runs' ratios ({len(top)} vs {len(bottom)} runs)")
    return Ratio(value=value, ci_low=low, ci_high=high, interval=kind)
