"""Energy from the GPUs' own energy counters (NVML, amdsmi), with wraps, resets and the fallback to power."""

from __future__ import annotations

import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tprimat.running.monitor import (
    ENERGY_COUNTER_MODULUS,
    AmdSmiSampler,
    GpuMonitor,
    GpuReading,
    NvmlSampler,
    counter_increase_j,
    integrate_increments,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_nvml(monkeypatch, counters_mj, power_mw=100_000):
    """A pynvml whose devices report ``counters_mj[i]`` (a list, consumed one per read) as total energy."""
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: len(counters_mj)
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    nvml.nvmlDeviceGetPowerUsage = lambda h: power_mw
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=90, memory=10)
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=2**30, total=2**36)
    nvml.nvmlDeviceGetClockInfo = lambda h, kind: 1000
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda h: counters_mj[h].pop(0)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


def sampled(sampler, times, clock=None):
    clock = clock or Clock()
    monitor = GpuMonitor(sampler, interval_s=1.0, clock=clock)
    for t in times:
        clock.now = t
        monitor.sample_once()
    return monitor


def test_nvml_energy_is_the_counters_rise_not_the_power_samples(monkeypatch):
    # Two GPUs: 500 J/s and 300 J/s by their counters, while the power readings say 100 W each.
    fake_nvml(monkeypatch, [[1_000_000, 1_500_000, 2_000_000], [7_000, 307_000, 607_000]])
    monitor = sampled(NvmlSampler(), (100.0, 101.0, 102.0))
    reading = monitor.samples[0].gpus[0]
    assert (reading.energy_counter, reading.energy_counter_unit_j) == (1_000_000, 1e-3)
    assert monitor.energy_j(100.0, 102.0) == pytest.approx(1600.0)
    # A window inside the samples gets its share of each interval's rise (the average power).
    assert monitor.energy_j(100.5, 101.25) == pytest.approx(800.0 * 0.75)
    assert monitor.energy_source == "nvml energy counter (mJ)"
    # Interpolated, never extrapolated.
    assert monitor.energy_j(99.0, 101.0) is None


def test_nvml_without_the_energy_call_falls_back_to_power(monkeypatch):
    nvml = fake_nvml(monkeypatch, [[0, 0], [0, 0]])
    del nvml.nvmlDeviceGetTotalEnergyConsumption  # pre-Volta GPUs, old libraries
    monitor = sampled(NvmlSampler(), (100.0, 101.0))
    assert monitor.samples[0].gpus[0].energy_counter is None
    assert monitor.energy_j(100.0, 101.0) == pytest.approx(200.0)  # 2 x 100 W for 1 s
    assert monitor.energy_source == "nvml power samples (W, every 1 s)"


def fake_amdsmi(monkeypatch, answers, resolution=15.259):
    """An amdsmi whose one GPU answers ``amdsmi_get_energy_count`` with the next of ``answers``."""
    amd = types.ModuleType("amdsmi")
    amd.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    amd.amdsmi_init = lambda: None
    amd.amdsmi_shut_down = lambda: None
    amd.amdsmi_get_processor_handles = lambda: ["gpu0"]
    amd.amdsmi_get_power_info = lambda h: {"current_socket_power": 700}
    amd.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 99}
    amd.amdsmi_get_gpu_vram_usage = lambda h: {"vram_used": 2048, "vram_total": 196608}
    amd.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100}
    amd.amdsmi_get_energy_count = lambda h: {**answers.pop(0), "counter_resolution": resolution, "timestamp": 1}
    monkeypatch.setitem(sys.modules, "amdsmi", amd)


@pytest.mark.parametrize("key", ["energy_accumulator", "power"])  # ROCm 7 and ROCm 6 names of the counter
def test_amdsmi_energy_is_counts_times_the_resolution_in_microjoules(monkeypatch, key):
    fake_amdsmi(monkeypatch, [{key: 10_000_000}, {key: 60_000_000}])
    monitor = sampled(AmdSmiSampler(), (100.0, 102.0))
    # 50e6 counts x 15.259 uJ = 762.95 J over 2 s (381 W), while the power reading says 700 W.
    assert monitor.energy_j(100.0, 102.0) == pytest.approx(50_000_000 * 15.259e-6)
    assert monitor.energy_source == "amdsmi energy counter (counts x counter_resolution uJ)"


def test_a_counter_that_wraps_keeps_counting(monkeypatch):
    top = ENERGY_COUNTER_MODULUS - 1_000
    fake_nvml(monkeypatch, [[top, 4_000]])
    monitor = sampled(NvmlSampler(), (100.0, 101.0))
    assert monitor.energy_j(100.0, 101.0) == pytest.approx(5.0)  # 1000 + 4000 mJ across the wrap


def test_a_counter_reset_is_never_counted_and_power_fills_in(monkeypatch):
    # The counter restarts from zero (driver reload) between the second and third sample.
    fake_nvml(monkeypatch, [[5_000_000, 5_400_000, 1_000, 401_000]])
    monitor = sampled(NvmlSampler(), (100.0, 101.0, 102.0, 103.0))
    assert monitor.energy_j(100.0, 101.0) == pytest.approx(400.0)  # before the reset: the counter
    assert monitor.energy_j(102.0, 103.0) == pytest.approx(400.0)  # after it: the counter
    assert monitor.energy_j(100.5, 102.5) == pytest.approx(200.0)  # across it: 100 W for 2 s
    assert monitor.energy_source == "nvml energy counter (mJ); nvml power samples (W, every 1 s)"


def test_counter_increase_needs_the_same_gpus_and_units():
    assert counter_increase_j({0: (10, 1e-3)}, {0: (20, 1e-3)}) == pytest.approx(0.01)
    assert counter_increase_j({0: (10, 1e-3)}, {0: (20, 1e-3), 1: (5, 1e-3)}) is None
    assert counter_increase_j({0: (10, 1e-3)}, {0: (20, 2e-3)}) is None
    assert counter_increase_j(None, {0: (20, 1e-3)}) is None


def test_a_gpu_without_a_counter_means_power_for_every_gpu():
    class Mixed:
        name = "mixed"

        def read(self):
            return [
                GpuReading(index=0, power_w=100.0, energy_counter=1_000, energy_counter_unit_j=1e-3),
                GpuReading(index=1, power_w=100.0),
            ]

        def close(self):
            pass

    monitor = sampled(Mixed(), (100.0, 101.0))
    assert monitor.energy_j(100.0, 101.0) == pytest.approx(200.0)
    assert monitor.energy_source == "mixed power samples (W, every 1 s)"


@given(
    st.lists(st.tuples(st.floats(0.01, 10), st.floats(0, 5000)), min_size=2, max_size=30),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_counter_energy_is_additive_over_split_windows_and_bounded(steps, a, b, c):
    series, t = [], 0.0
    for dt, joules in steps:
        series.append((t, joules))
        t += dt
    start, middle, end = sorted(x * series[-1][0] for x in (a, b, c))
    if not start < middle < end:
        return
    whole = integrate_increments(series, start, end)
    parts = integrate_increments(series, start, middle) + integrate_increments(series, middle, end)
    assert whole == pytest.approx(parts, rel=1e-9, abs=1e-6)
    assert 0 <= whole <= sum(j for _, j in series[1:]) + 1e-6
