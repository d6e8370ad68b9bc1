"""Whether an estimate fits its capacity: fits, within the estimator's error, or does not fit.

The estimator's error is measured, not assumed.  In every run whose peak it was checked against
(``docs/memory.md``, "Checked against real logs"), the predicted peak allocated memory was between
1.8 % under and 5.0 % over the measured ``max_memory_allocated``.  So a margin smaller than 5 % of
the predicted peak allocated, either way, cannot tell a run that fits from one that does not: the
verdict is then "within the estimator's error".  Only a larger shortfall is "does not fit", the one
verdict ``tprimat run --strict`` refuses.  ``memory estimate``, the run's pre-flight check and
``--strict`` all take the verdict from :func:`fit_verdict`.
"""

from __future__ import annotations

import enum

from tprimat.memory.estimate import MemoryEstimate

#: The largest relative error of the predicted peak allocated against a measured one, over the runs
#: in docs/memory.md: 5.0 % over (torch backend, Llama 3.1 8B, sequence 4096, one H200); the others
#: are 2.7 % and 2.8 % over (H200) and 1.8 % under (Megatron-core on a GH200).
ESTIMATOR_ERROR = 0.05


class Verdict(enum.Enum):
    """The three answers to "does it fit?"."""

    FITS = "fits"
    WITHIN_ERROR = "within the estimator's error"
    DOES_NOT_FIT = "does not fit"


def error_band_gib(estimate: MemoryEstimate) -> float:
    """The estimator's error for ``estimate``, in GiB: :data:`ESTIMATOR_ERROR` of its peak allocated."""
    return ESTIMATOR_ERROR * estimate.allocated_gib


def fit_verdict(estimate: MemoryEstimate) -> Verdict | None:
    """The verdict on ``estimate`` against its capacity; None when no capacity was given.

    ``fits`` when the margin is at least the error band, ``does not fit`` when the shortfall is
    at least the band, ``within the estimator's error`` between the two.
    """
    if estimate.margin_gib is None:
        return None
    band = error_band_gib(estimate)
    if estimate.margin_gib >= band:
        return Verdict.FITS
    if estimate.margin_gib <= -band:
        return Verdict.DOES_NOT_FIT
    return Verdict.WITHIN_ERROR


def describe_fit(estimate: MemoryEstimate) -> str | None:
    """The verdict in words: against which capacity, by how much, and the error band; None without a capacity."""
    verdict = fit_verdict(estimate)
    if verdict is None or estimate.margin_gib is None or estimate.capacity_gib is None:
        return None
    where = (
        f"{estimate.device} ({estimate.capacity_gib:.2f} GiB)"
        if estimate.device
        else f"{estimate.capacity_gib:.2f} GiB"
    )
    margin = estimate.margin_gib
    by = f"{margin:.2f} GiB to spare" if margin >= 0 else f"{-margin:.2f} GiB short"
    band = f"±{error_band_gib(estimate):.2f} GiB ({ESTIMATOR_ERROR:.0%} of the predicted peak allocated)"
    if verdict is Verdict.FITS:
        return f"fits on {where}: {by}, more than the estimator's error of {band}"
    if verdict is Verdict.DOES_NOT_FIT:
        return f"does NOT fit on {where}: {by}, beyond the estimator's error of {band}"
    return f"within the estimator's error on {where}: {by}, inside {band}: it may or may not fit"
