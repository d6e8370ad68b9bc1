"""The GPU monitor: real tool outputs parsed, energy integrated, absent tools give absent fields."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tprimat.running.monitor import (
    GIB,
    MIB,
    CommandSampler,
    GpuMonitor,
    GpuReading,
    find_sampler,
    integrate_power,
    parse_amd_smi_monitor,
    parse_nvidia_smi_csv,
    parse_rocm_smi_json,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "smi"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_nvidia_smi_csv_with_header_and_units():
    text = fixture("nvidia-smi_query-gpu_clocks_csv_NeMo_resiliency_notebook_2025-03-07.csv")
    readings = parse_nvidia_smi_csv(text)
    assert [r.index for r in readings] == list(range(8))
    assert readings[0].sm_clock_mhz == 450 and readings[0].mem_clock_mhz == 9000
    assert readings[7].sm_clock_mhz == 2400
    # Not in this query: absent, not zero.
    assert all(r.power_w is None and r.mem_used_gib is None for r in readings)


def test_nvidia_smi_csv_noheader_nounits_in_query_order():
    text = "0, 312.45, 97, 40000, 81559, 1980, 2619\n1, [N/A], 95, 39000, 81559, 1980, 2619\n"
    first, second = parse_nvidia_smi_csv(text)
    assert first.power_w == pytest.approx(312.45)
    assert first.utilization_pct == 97
    assert first.mem_used_gib == pytest.approx(40000 * MIB / GIB)
    assert second.power_w is None


def test_rows_whose_index_names_no_gpu_are_skipped_not_truncated():
    # "1.5" once became GPU 1 (int() truncates), filing its readings under another GPU; "-1" became GPU -1.
    text = "0, 312.45, 97, 40000, 81559, 1980, 2619\n1.5, 300, 95, 39000, 81559, 1980, 2619\n-1, 290, 90, 1, 2, 3, 4\n"
    readings = parse_nvidia_smi_csv(text)
    assert [(r.index, r.power_w) for r in readings] == [(0, pytest.approx(312.45))]
    header = "GPU  POWER\n  0  171 W\n  1.5  175 W\n  N/A  160 W\n"
    assert [(r.index, r.power_w) for r in parse_amd_smi_monitor(header)] == [(0, 171)]


def test_amd_smi_monitor_columns_with_units():
    text = fixture("amd-smi_monitor_-ptumv_8xMI300X_amdsmi-CHANGELOG_excerpt.txt")
    readings = parse_amd_smi_monitor(text)
    assert len(readings) == 8
    assert readings[0].power_w == 171 and readings[7].power_w == 175
    assert readings[0].utilization_pct == 0
    assert readings[0].sm_clock_mhz == 114 and readings[0].mem_clock_mhz == 900
    assert readings[4].mem_used_gib == pytest.approx(284 * MIB / GIB)
    assert readings[0].mem_total_gib == pytest.approx(196300 * MIB / GIB)


def test_amd_smi_monitor_partitioned_device_count():
    text = fixture("amd-smi_monitor_-p-t-v_MI300X_partitioned-32-devices_amdsmi-CHANGELOG_excerpt.txt")
    readings = parse_amd_smi_monitor(text)
    assert [r.index for r in readings] == list(range(32))
    assert readings[0].power_w == 248
    assert all(r.utilization_pct is None for r in readings)  # no -u column in this output


def test_rocm_smi_json_old_key_set():
    readings = parse_rocm_smi_json(fixture("telegraf_mi100_rocm571_rocm-smi_json.json"))
    assert [r.index for r in readings] == [0, 1, 2, 3, 4, 5]
    card0 = readings[0]
    assert card0.power_w == 39.0
    assert card0.utilization_pct == 0
    assert card0.mem_used_gib == pytest.approx(6782976 / GIB)
    assert card0.mem_total_gib == pytest.approx(34342961152 / GIB)
    assert card0.sm_clock_mhz == 300 and card0.mem_clock_mhz == 1200


def test_integrate_power_is_exact_for_piecewise_linear_power():
    series = [(0.0, 100.0), (1.0, 200.0), (2.0, 200.0)]
    assert integrate_power(series, 0.0, 2.0) == pytest.approx(150.0 + 200.0)
    assert integrate_power(series, 0.5, 1.5) == pytest.approx(0.5 * (150 + 200) / 2 + 0.5 * 200)
    # Not covered on both sides: no energy rather than an extrapolated guess.
    assert integrate_power(series, -0.1, 1.0) is None
    assert integrate_power(series, 1.0, 2.1) is None
    assert integrate_power(series[:1], 0.0, 0.0) is None


class FakeSampler:
    name = "fake"

    def __init__(self, watts: list[list[float | None]]) -> None:
        self.watts = watts
        self.calls = 0
        self.closed = False

    def read(self) -> list[GpuReading]:
        row = self.watts[min(self.calls, len(self.watts) - 1)]
        self.calls += 1
        return [GpuReading(index=i, power_w=w, mem_used_gib=float(i + 1)) for i, w in enumerate(row)]

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_monitor_sums_monitored_devices_and_integrates(tmp_path):
    clock = Clock()
    sampler = FakeSampler([[300.0, 310.0, 999.0]] * 3)
    monitor = GpuMonitor(sampler, interval_s=1.0, devices=[0, 1], clock=clock, log_path=tmp_path / "monitor.jsonl")
    for t in (100.0, 101.0, 102.0):
        clock.now = t
        monitor.sample_once()
    # Device 2 is not part of the run: 610 W over 1.5 s.
    assert monitor.energy_j(100.25, 101.75) == pytest.approx(610.0 * 1.5)
    assert monitor.peak_memory_gib(100.0, 102.0) == 2.0
    assert len((tmp_path / "monitor.jsonl").read_text().splitlines()) == 3
    monitor.stop()
    assert sampler.closed


def test_monitor_without_power_readings_has_no_energy():
    clock = Clock()
    monitor = GpuMonitor(FakeSampler([[None, 300.0]]), interval_s=1.0, clock=clock)
    for t in (100.0, 101.0):
        clock.now = t
        monitor.sample_once()
    assert monitor.energy_j(100.0, 101.0) is None


def test_monitor_thread_samples_at_the_interval_and_stops():
    sampler = FakeSampler([[100.0]])
    with GpuMonitor(sampler, interval_s=0.01) as monitor:
        import time

        deadline = time.monotonic() + 5
        while len(monitor.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    calls = sampler.calls
    assert calls >= 3
    import time

    time.sleep(0.05)
    assert sampler.calls == calls  # stopped: no helper outlives the run


def test_no_sampler_means_no_samples():
    monitor = GpuMonitor(None, interval_s=0.1).start()
    assert monitor.sample_once() is None
    assert monitor.energy_j(0, 1) is None
    monitor.stop()
    assert find_sampler("cpu") == (None, [])


def test_command_sampler_parses_tool_output_and_refuses_empty_output():
    text = fixture("amd-smi_monitor_-ptumv_8xMI300X_amdsmi-CHANGELOG_excerpt.txt")
    sampler = CommandSampler("amd-smi", ["amd-smi", "monitor"], parse_amd_smi_monitor, runner=lambda argv: text)
    assert math.isclose(sum(r.power_w for r in sampler.read()), 1400.0)
    from tprimat.running.monitor import SamplerUnavailable

    with pytest.raises(SamplerUnavailable):
        CommandSampler("amd-smi", ["amd-smi"], parse_amd_smi_monitor, runner=lambda argv: None)


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(
    st.lists(st.tuples(st.floats(0.01, 10), st.floats(0, 1000)), min_size=2, max_size=30),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_energy_is_additive_over_split_windows(steps, a, b, c):
    series, t = [], 0.0
    for dt, watts in steps:
        series.append((t, watts))
        t += dt
    start, middle, end = sorted(x * series[-1][0] for x in (a, b, c))
    if not start < middle < end:
        return
    whole = integrate_power(series, start, end)
    parts = integrate_power(series, start, middle) + integrate_power(series, middle, end)
    assert whole == pytest.approx(parts, rel=1e-9, abs=1e-6)
    assert 0 <= whole <= max(w for _, w in series) * (end - start) + 1e-6


def test_nvml_sampler_converts_milliwatts_and_bytes(monkeypatch):
    import sys
    import types

    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 2
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    nvml.nvmlDeviceGetPowerUsage = lambda h: 312_450 if h == "h0" else 1 / 0
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97, memory=40)
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=40 * GIB, total=80 * GIB)
    nvml.nvmlDeviceGetClockInfo = lambda h, kind: 1980 if kind == 1 else 2619
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    from tprimat.running.monitor import NvmlSampler

    first, second = NvmlSampler().read()
    assert first == GpuReading(
        index=0,
        power_w=312.45,
        utilization_pct=97.0,
        mem_used_gib=40.0,
        mem_total_gib=80.0,
        sm_clock_mhz=1980.0,
        mem_clock_mhz=2619.0,
    )
    assert second.power_w is None  # the library failed for this reading: absent, not zero


def test_amdsmi_sampler_prefers_current_power_and_reads_mib(monkeypatch):
    import sys
    import types

    amd = types.ModuleType("amdsmi")
    amd.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    amd.amdsmi_init = lambda: None
    amd.amdsmi_shut_down = lambda: None
    amd.amdsmi_get_processor_handles = lambda: ["a", "b"]
    amd.amdsmi_get_power_info = lambda h: (
        {"current_socket_power": 742, "average_socket_power": 700}
        if h == "a"
        else {"current_socket_power": "N/A", "average_socket_power": 650}
    )
    amd.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": 99, "umc_activity": 40}
    amd.amdsmi_get_gpu_vram_usage = lambda h: {"vram_used": 2048, "vram_total": 196608}
    amd.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == "gfx" else 1300}
    monkeypatch.setitem(sys.modules, "amdsmi", amd)
    from tprimat.running.monitor import AmdSmiSampler

    a, b = AmdSmiSampler().read()
    assert (a.power_w, b.power_w) == (742.0, 650.0)
    assert a.mem_used_gib == 2.0 and a.mem_total_gib == 192.0
    assert (a.utilization_pct, a.sm_clock_mhz, a.mem_clock_mhz) == (99.0, 2100.0, 1300.0)
