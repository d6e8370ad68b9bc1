"""Per-step times from NeMo 1's ``train_step_timing``, which can be a mean over the last k steps.

NeMo's ``TimingCallback`` times each training step with a ``NamedTimer``
(``nemo/utils/exp_manager.py``, ``nemo/utils/timers.py``).  With
``exp_manager.step_timing_kwargs.buffer_size`` k > 1 the timer is not reset between
steps: it keeps the last k step times and logs their mean (``reduction: mean``).
NeMo-Launcher's configurations set k = 5.  The logged values are then

    m_n = (t_{n-k+1} + ... + t_n) / k     (over the steps so far while n < k)

and each step time follows from two consecutive means and an earlier step time:

    t_n = n·m_n - (n-1)·m_{n-1}           for n <= k
    t_n = k·(m_n - m_{n-1}) + t_{n-k}     for n > k

This holds only for the means of one timer from its first step with no step
missing; the caller checks that.  :func:`undo_window` computes the recurrence in
exact rational arithmetic, so the only error is the rounding of the printed means
(the shortest repr of a float32 or float64, whichever reproduces the text) and of
NumPy's mean, carried through the recurrence; it is returned as a bound.  The
result is then checked against the clock: a step cannot take longer than the time
between its record and the previous one (the logger prints after the timer stops
and before the next step starts it).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from fractions import Fraction

import attrs

#: The record timestamps print microseconds: their difference may be short by this much.
CLOCK_RESOLUTION_S = 2e-6


@attrs.frozen(kw_only=True)
class Undone:
    """Per-step times recovered from k-step means, with a bound on their error."""

    times_s: list[float]
    error_s: float  # largest |recovered - NeMo's measured step time| the rounding allows


def _ulp32(value: float) -> float:
    """The spacing of float32 numbers at ``value``."""
    _, exponent = math.frexp(value)
    return math.ldexp(1.0, exponent - 24)


def _is_float32(value: float) -> bool:
    try:
        return struct.unpack("f", struct.pack("f", value))[0] == value
    except OverflowError:
        return False


def rounding(value: float, k: int) -> float:
    """A bound on |printed mean - exact mean of the timer's values|.

    Half a unit in the last place of the type that prints ``value`` (float32 when its
    float32 rounding is the value itself, else float64), plus NumPy's rounding of a
    mean of k float64 values (k units of float64 at most).
    """
    magnitude = abs(value)
    half_unit = _ulp32(magnitude) / 2 if _is_float32(value) else math.ulp(magnitude) / 2
    return half_unit + k * math.ulp(magnitude)


def undo_window(means: Sequence[float], k: int) -> Undone:
    """The step times whose running k-step means are ``means`` (the timer's first step first)."""
    if k < 1:
        raise ValueError(f"window of {k} steps")
    exact = [Fraction(m) for m in means]
    bounds = [rounding(m, k) for m in means]
    times: list[Fraction] = []
    errors: list[float] = []
    for n, mean in enumerate(exact, 1):
        if n == 1:
            times.append(mean)
            errors.append(bounds[0])
        elif n <= k:
            times.append(n * mean - (n - 1) * exact[n - 2])
            errors.append(n * bounds[n - 1] + (n - 1) * bounds[n - 2])
        else:
            times.append(k * (mean - exact[n - 2]) + times[n - k - 1])
            errors.append(k * (bounds[n - 1] + bounds[n - 2]) + errors[n - k - 1])
    floats = [float(t) for t in times]
    worst = max((e + math.ulp(abs(t)) for e, t in zip(errors, floats, strict=True)), default=0.0)
    return Undone(times_s=floats, error_s=worst)


def first_impossible(
    times_s: Sequence[float], intervals_s: Sequence[float | None], error_s: float = 0.0
) -> tuple[int, str] | None:
    """The first step (0-based index) whose time cannot be a step time, and why; None if all can.

    ``intervals_s[i]`` is the time between record i and record i-1 (None where unknown).
    """
    for index, (seconds, interval) in enumerate(zip(times_s, intervals_s, strict=True)):
        if not seconds > 0:
            return index, f"it gives {seconds:.6g} s"
        if interval is not None and seconds > interval + error_s + CLOCK_RESOLUTION_S:
            return index, (
                f"it gives {seconds:.6f} s, longer than the {interval:.6f} s between its record and the previous"
            )
    return None
