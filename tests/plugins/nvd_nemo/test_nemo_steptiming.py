"""Undoing NeMo's k-step mean of train_step_timing: exact up to the stated bound, refused when impossible."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.plugins.nvd_nemo.steptiming import first_impossible, rounding, undo_window


def _means(times: list[float], k: int) -> list[float]:
    """What NeMo's NamedTimer logs: the mean of the last k times (fewer while it fills)."""
    return [sum(times[max(0, n - k + 1) : n + 1]) / len(times[max(0, n - k + 1) : n + 1]) for n in range(len(times))]


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-3, max_value=500.0), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=8),
    st.booleans(),
)
def test_step_times_come_back_within_the_bound(times, k, logged_as_float32):
    # Older Lightning logged the float64 mean as a float32 tensor.
    means = [_float32(m) if logged_as_float32 else m for m in _means(times, k)]
    undone = undo_window(means, k)
    assert all(abs(a - b) <= undone.error_s for a, b in zip(undone.times_s, times, strict=True))


def test_the_first_k_steps_follow_from_the_running_mean():
    # 8xB200 Llama 3 8B (NeMo 25.04, buffer_size 5): the first three printed means.
    means = [21.367358684539795, 12.817503690719604, 9.97948416074117]
    times = undo_window(means, 5).times_s
    assert times[0] == means[0]
    assert times[1] == pytest.approx(2 * means[1] - means[0], abs=1e-12)
    assert times[2] == pytest.approx(3 * means[2] - 2 * means[1], abs=1e-12)


def test_float32_means_carry_a_wider_bound_than_float64_ones():
    # 107.35490417480469 is a float32 (NeMo 24.07's DLLogger file); 21.367358684539795 is not.
    assert rounding(107.35490417480469, 5) > 1e-6 > rounding(21.367358684539795, 5)


def test_a_time_longer_than_the_interval_between_records_is_impossible():
    index, why = first_impossible([4.3, 4.4], [None, 4.35])
    assert index == 1 and "longer than the 4.350000 s between its record and the previous" in why
    assert first_impossible([4.3, -0.1], [None, None])[0] == 1
    assert first_impossible([4.3, 4.3], [None, 4.3000001]) is None


def test_the_bound_grows_with_the_run_so_a_long_run_is_not_undone():
    """Each step of the recurrence adds the rounding of two means; float32 means round coarsely."""
    from tprimat.plugins.nvd_nemo.nemo1 import MAX_RECOVERY_ERROR

    steady = 107.35490417480469  # a float32 mean of NeMo 24.07's DLLogger file (256xH100 GPT3-175B)
    short = undo_window([steady] * 50, 5).error_s
    long = undo_window([steady] * 200_000, 5).error_s
    assert short < MAX_RECOVERY_ERROR * steady < long
