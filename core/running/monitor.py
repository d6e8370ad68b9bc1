"""A GPU monitor: power, utilisation, memory and clocks sampled while a run goes.

A background thread asks a *sampler* for every local GPU's readings at a
fixed interval (``monitor.interval_s``).  Samplers, tried in this order:
NVML (``nvidia-ml-py``) or amdsmi when importable, else the command-line
tools ``nvidia-smi``, ``amd-smi`` and ``rocm-smi`` (CSV/JSON first, then their
default text forms, :mod:`tprimat.hardware.smi_text`).  Nothing available means
no samples, and every field derived from them stays absent: a missing power
reading is never a zero.

Energy over a time window comes from the hardware's own energy counter
where the library exposes one (NVML's total energy in mJ, amdsmi's energy
accumulator in counts of its stated resolution): the counters' increase
between samples, summed over the monitored GPUs, spread evenly over the
time between the samples.  Without counters it is the integral of the
summed power, with power taken as linear between samples.  Either way a
window not covered by samples on both sides has no energy, and
:attr:`GpuMonitor.energy_source` says which source (and unit) gave it.  The
raw samples, counters included, are kept (``monitor.jsonl`` in the run
directory) so every joule can be audited.
Parsing of tool output is separate from running the tools, and tested
against real outputs.
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from tprimat.hardware.smi_text import SmiText, parse_nvidia_smi_table, parse_rocm_smi_text

GIB = 2**30
MIB = 2**20


@attrs.frozen(kw_only=True)
class GpuReading:
    """One GPU at one moment; None where the tool does not report a value."""

    index: int
    power_w: float | None = None
    utilization_pct: float | None = None
    mem_used_gib: float | None = None
    mem_total_gib: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    energy_counter: int | None = None  # the hardware's energy counter, raw (it only grows, until a reset)
    energy_counter_unit_j: float | None = None  # joules per count of energy_counter


@attrs.frozen(kw_only=True)
class Sample:
    time_s: float  # time.time() when the readings were taken
    gpus: tuple[GpuReading, ...]


class SamplerUnavailable(Exception):
    """This way of sampling does not work on this machine."""


class Sampler(Protocol):
    name: str  # e.g. "nvml", "amd-smi"

    def read(self) -> list[GpuReading]: ...

    def close(self) -> None: ...


# -- parsing tool output ------------------------------------------------------------------

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _value(text: Any) -> float | None:
    """A number from a tool's cell (``"171 W"``, ``"(300Mhz)"``, ``"[N/A]"`` -> None)."""
    if text is None:
        return None
    if isinstance(text, bool):
        return None
    if isinstance(text, int | float):
        return float(text)
    match = _NUMBER.search(str(text))
    if match is None or "n/a" in str(text).lower() or "not supported" in str(text).lower():
        return None
    return float(match.group())


#: nvidia-smi query fields, and the reading each one fills (header names accepted too).
NVIDIA_SMI_FIELDS = ("index", "power.draw", "utilization.gpu", "memory.used", "memory.total", "clocks.sm", "clocks.mem")
_NVIDIA_ALIASES = {
    "index": "index",
    "power.draw": "power_w",
    "power.draw.instant": "power_w",
    "utilization.gpu": "utilization_pct",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
}


def parse_nvidia_smi_csv(text: str, fields: Sequence[str] = NVIDIA_SMI_FIELDS) -> list[GpuReading]:
    """Readings from ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    With a header line, columns are named by it (``clocks.current.sm [MHz]``);
    without one, by ``fields``.  Memory is reported in MiB by nvidia-smi.
    """
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text)) if row]
    if not rows:
        return []
    names = list(fields)
    if not _NUMBER.fullmatch(rows[0][0]):  # a header line
        names = [re.sub(r"\s*\[.*\]$", "", cell).strip() for cell in rows[0]]
        rows = rows[1:]
    readings = []
    for row in rows:
        values: dict[str, float | None] = {}
        for name, cell in zip(names, row, strict=False):
            key = _NVIDIA_ALIASES.get(name)
            if key is not None:
                values[key] = _value(cell)
        index = _gpu_index(values.get("index"))
        if index is None:
            continue
        readings.append(
            GpuReading(
                index=index,
                power_w=values.get("power_w"),
                utilization_pct=values.get("utilization_pct"),
                mem_used_gib=_scale(values.get("mem_used_mib"), MIB),
                mem_total_gib=_scale(values.get("mem_total_mib"), MIB),
                sm_clock_mhz=values.get("sm_clock_mhz"),
                mem_clock_mhz=values.get("mem_clock_mhz"),
            )
        )
    return readings


def _gpu_index(value: float | None) -> int | None:
    """A GPU index from a tool's cell: a whole number from 0 up, else None (the row is skipped).

    A fractional or negative cell names no GPU; truncating it would file its readings under
    another GPU's index.
    """
    if value is None or value < 0 or not value.is_integer():
        return None
    return int(value)


def _scale(value: float | None, unit_bytes: int) -> float | None:
    return None if value is None else value * unit_bytes / GIB


_AMD_SMI_COLUMNS = {
    "GPU": "index",
    "POWER": "power_w",
    "GFX_UTIL": "utilization_pct",
    "VRAM_USED": "mem_used",
    "VRAM_TOTAL": "mem_total",
    "GFX_CLOCK": "sm_clock_mhz",
    "MEM_CLOCK": "mem_clock_mhz",
}
#: amd-smi prints memory in "MB" meaning MiB (amdsmi's vram_usage is in MiB).
_AMD_SMI_MEMORY_UNITS = {"MB": MIB, "MIB": MIB, "GB": GIB, "GIB": GIB, "KB": 1024, "B": 1}


def parse_amd_smi_monitor(text: str) -> list[GpuReading]:
    """Readings from ``amd-smi monitor -p -u -m -v`` (columnar text with units)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GPU"]), None)
    if header_at is None:
        return []
    columns = lines[header_at].split()
    readings = []
    for line in lines[header_at + 1 :]:
        cells = re.findall(r"N/A|[-+]?\d+(?:\.\d+)?(?:\s*(?:W|°C|%|MHz|MB|GB|KB|B|MiB|GiB))?", line)
        if len(cells) != len(columns):
            continue
        values: dict[str, float | None] = {}
        for column, cell in zip(columns, cells, strict=True):
            key = _AMD_SMI_COLUMNS.get(column)
            if key is None:
                continue
            number = _value(cell)
            if key in ("mem_used", "mem_total") and number is not None:
                unit = cell.split()[-1].upper() if " " in cell else "MB"
                number = number * _AMD_SMI_MEMORY_UNITS.get(unit, MIB) / GIB
            values[key] = number
        index = _gpu_index(values.get("index"))
        if index is None:
            continue
        readings.append(
            GpuReading(
                index=index,
                power_w=values.get("power_w"),
                utilization_pct=values.get("utilization_pct"),
                mem_used_gib=values.get("mem_used"),
                mem_total_gib=values.get("mem_total"),
                sm_clock_mhz=values.get("sm_clock_mhz"),
                mem_clock_mhz=values.get("mem_clock_mhz"),
            )
        )
    return readings


_ROCM_POWER_KEYS = (
    "Current Socket Graphics Package Power (W)",
    "Average Graphics Package Power (W)",
)


def parse_rocm_smi_json(text: str) -> list[GpuReading]:
    """Readings from ``rocm-smi --showpower --showuse --showmeminfo vram --showclocks --json``."""
    data = json.loads(text)
    readings = []
    for key, card in data.items():
        match = re.fullmatch(r"card(\d+)", key)
        if match is None or not isinstance(card, dict):
            continue
        power = next((_value(card[k]) for k in _ROCM_POWER_KEYS if _value(card.get(k)) is not None), None)
        used = _value(card.get("VRAM Total Used Memory (B)"))
        total = _value(card.get("VRAM Total Memory (B)"))
        readings.append(
            GpuReading(
                index=int(match.group(1)),
                power_w=power,
                utilization_pct=_value(card.get("GPU use (%)")),
                mem_used_gib=None if used is None else used / GIB,
                mem_total_gib=None if total is None else total / GIB,
                sm_clock_mhz=_value(card.get("sclk clock speed:")),
                mem_clock_mhz=_value(card.get("mclk clock speed:")),
            )
        )
    return sorted(readings, key=lambda r: r.index)


# -- samplers --------------------------------------------------------------------------------


def _try(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, or None if the library raises (a reading it cannot give)."""
    try:
        return function(*args)
    except Exception:
        return None


#: NVML's and amdsmi's energy counters are unsigned 64-bit integers.
ENERGY_COUNTER_MODULUS = 2**64
#: NVML reports total energy in millijoules; amdsmi's counter resolution is in microjoules.
NVML_ENERGY_UNIT_J = 1e-3
AMDSMI_RESOLUTION_UNIT_J = 1e-6


class NvmlSampler:
    """NVML through ``pynvml`` (the ``nvidia-ml-py`` package).

    ``nvmlDeviceGetTotalEnergyConsumption`` (Volta and later) is the energy the
    GPU used since the driver was loaded, in mJ.
    """

    name = "nvml"
    counter_source = "nvml energy counter (mJ)"

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            raise SamplerUnavailable(f"NVML: {exc}") from None

    def read(self) -> list[GpuReading]:
        n = self.nvml
        readings = []
        for index, handle in enumerate(self.handles):
            power = _try(n.nvmlDeviceGetPowerUsage, handle)  # milliwatts
            util = _try(n.nvmlDeviceGetUtilizationRates, handle)
            memory = _try(n.nvmlDeviceGetMemoryInfo, handle)
            total_mj = _try(getattr(n, "nvmlDeviceGetTotalEnergyConsumption", _absent), handle)
            readings.append(
                GpuReading(
                    index=index,
                    power_w=None if power is None else power / 1000.0,
                    utilization_pct=None if util is None else float(util.gpu),
                    mem_used_gib=None if memory is None else memory.used / GIB,
                    mem_total_gib=None if memory is None else memory.total / GIB,
                    sm_clock_mhz=_value(_try(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_SM)),
                    mem_clock_mhz=_value(_try(n.nvmlDeviceGetClockInfo, handle, n.NVML_CLOCK_MEM)),
                    energy_counter=_counter(total_mj),
                    energy_counter_unit_j=None if _counter(total_mj) is None else NVML_ENERGY_UNIT_J,
                )
            )
        return readings

    def close(self) -> None:
        _try(self.nvml.nvmlShutdown)


def _absent(*args: Any) -> None:
    """A library function this version of the library lacks."""
    raise AttributeError("not in this library version")


def _counter(value: Any) -> int | None:
    """A raw counter value, or None when the library gave none (or not an integer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class AmdSmiSampler:
    """AMD SMI's Python library (``amdsmi``, shipped with ROCm).

    ``amdsmi_get_energy_count`` gives the energy accumulator in counts and the
    counter's resolution in µJ per count (the key is ``energy_accumulator``;
    ROCm 6 releases called it ``power``).
    """

    name = "amdsmi"
    counter_source = "amdsmi energy counter (counts x counter_resolution uJ)"

    def __init__(self) -> None:
        try:
            import amdsmi

            amdsmi.amdsmi_init()
            self.amdsmi = amdsmi
            self.handles = list(amdsmi.amdsmi_get_processor_handles())
        except Exception as exc:
            raise SamplerUnavailable(f"amdsmi: {exc}") from None
        if not self.handles:
            raise SamplerUnavailable("amdsmi: no GPU")

    def read(self) -> list[GpuReading]:
        a = self.amdsmi
        readings = []
        for index, handle in enumerate(self.handles):
            power = _try(a.amdsmi_get_power_info, handle) or {}
            watts = next(
                (
                    _value(power.get(k))
                    for k in ("current_socket_power", "average_socket_power", "socket_power")
                    if _value(power.get(k)) is not None
                ),
                None,
            )
            activity = _try(a.amdsmi_get_gpu_activity, handle) or {}
            vram = _try(a.amdsmi_get_gpu_vram_usage, handle) or {}
            gfx = _try(a.amdsmi_get_clock_info, handle, a.AmdSmiClkType.GFX) or {}
            mem = _try(a.amdsmi_get_clock_info, handle, a.AmdSmiClkType.MEM) or {}
            count, unit_j = _amdsmi_energy(_try(getattr(a, "amdsmi_get_energy_count", _absent), handle) or {})
            readings.append(
                GpuReading(
                    index=index,
                    power_w=watts,
                    utilization_pct=_value(activity.get("gfx_activity")),
                    mem_used_gib=_scale(_value(vram.get("vram_used")), MIB),  # amdsmi: MiB
                    mem_total_gib=_scale(_value(vram.get("vram_total")), MIB),
                    sm_clock_mhz=_value(gfx.get("clk")),
                    mem_clock_mhz=_value(mem.get("clk")),
                    energy_counter=count,
                    energy_counter_unit_j=unit_j,
                )
            )
        return readings

    def close(self) -> None:
        _try(self.amdsmi.amdsmi_shut_down)


def _amdsmi_energy(found: dict[str, Any]) -> tuple[int | None, float | None]:
    """The counter and joules per count from ``amdsmi_get_energy_count``'s answer (None, None: not given)."""
    count = _counter(found.get("energy_accumulator", found.get("power")))
    resolution = _value(found.get("counter_resolution"))
    if count is None or resolution is None or resolution <= 0:
        return None, None
    return count, resolution * AMDSMI_RESOLUTION_UNIT_J


class CommandSampler:
    """A vendor command-line tool run once per sample, its output parsed."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        parse: Callable[[str], list[GpuReading]],
        runner: Callable[[Sequence[str]], str | None] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.parse = parse
        self.runner = runner or _run_tool
        if runner is None and shutil.which(self.argv[0]) is None:
            raise SamplerUnavailable(f"{self.argv[0]} not found")
        try:
            first = self.read()
        except Exception as exc:
            raise SamplerUnavailable(f"{name}: {exc}") from None
        if not first:
            raise SamplerUnavailable(f"{name}: no GPU readings")

    def read(self) -> list[GpuReading]:
        text = self.runner(self.argv)
        if not text:
            return []
        try:
            return self.parse(text)
        except (ValueError, KeyError, json.JSONDecodeError):
            return []

    def close(self) -> None:
        pass


def _run_tool(argv: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def nvidia_smi_sampler(**kw: Any) -> CommandSampler:
    return CommandSampler(
        "nvidia-smi",
        ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
        lambda text: parse_nvidia_smi_csv(text),
        **kw,
    )


def amd_smi_sampler(**kw: Any) -> CommandSampler:
    return CommandSampler("amd-smi", ["amd-smi", "monitor", "-p", "-u", "-m", "-v"], parse_amd_smi_monitor, **kw)


def rocm_smi_sampler(**kw: Any) -> CommandSampler:
    return CommandSampler(
        "rocm-smi",
        ["rocm-smi", "--showpower", "--showuse", "--showmeminfo", "vram", "--showclocks", "--json"],
        parse_rocm_smi_json,
        **kw,
    )


def readings_from_text(found: SmiText | None) -> list[GpuReading]:
    """Readings from a human-readable tool output (:mod:`tprimat.hardware.smi_text`); MiB become GiB."""
    if found is None:
        return []
    return [
        GpuReading(
            index=gpu.index,
            power_w=gpu.power_w,
            utilization_pct=gpu.utilization_pct,
            mem_used_gib=_scale(gpu.memory_used_mib, MIB),
            mem_total_gib=_scale(gpu.memory_total_mib, MIB),
        )
        for gpu in found.gpus
    ]


def nvidia_smi_table_sampler(**kw: Any) -> CommandSampler:
    """``nvidia-smi``'s default table, where the CSV query is refused (old drivers, restricted containers)."""
    return CommandSampler(
        "nvidia-smi (table)", ["nvidia-smi"], lambda text: readings_from_text(parse_nvidia_smi_table(text)), **kw
    )


def rocm_smi_text_sampler(**kw: Any) -> CommandSampler:
    """``rocm-smi``'s key/value text, where its JSON is missing or unreadable."""
    return CommandSampler(
        "rocm-smi (text)",
        ["rocm-smi", "--showpower", "--showuse", "--showmeminfo", "vram"],
        lambda text: readings_from_text(parse_rocm_smi_text(text)),
        **kw,
    )


SAMPLERS: dict[str, tuple[Callable[[], Sampler], ...]] = {
    "nvidia": (NvmlSampler, nvidia_smi_sampler, nvidia_smi_table_sampler),
    "amd": (AmdSmiSampler, amd_smi_sampler, rocm_smi_sampler, rocm_smi_text_sampler),
}


def find_sampler(platform: str | None) -> tuple[Sampler | None, list[str]]:
    """The first sampler that works for ``platform``, and why the others did not."""
    tried: list[str] = []
    for factory in SAMPLERS.get(platform or "", ()):
        try:
            return factory(), tried
        except SamplerUnavailable as exc:
            tried.append(str(exc))
    return None, tried


# -- the monitor -----------------------------------------------------------------------------


class GpuMonitor:
    """Samples a :class:`Sampler` on a daemon thread; integrates energy over time windows."""

    def __init__(
        self,
        sampler: Sampler | None,
        *,
        interval_s: float,
        devices: Iterable[int] | None = None,
        log_path: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self.devices = None if devices is None else frozenset(devices)
        self.log_path = log_path
        self.clock = clock
        self.samples: list[Sample] = []
        self.errors = 0
        self.energy_sources: set[str] = set()  # what energy_j used so far (see energy_source)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def source(self) -> str | None:
        return None if self.sampler is None else self.sampler.name

    def start(self) -> GpuMonitor:
        """Take a first sample now (before the job starts), then sample on a thread."""
        if self.sampler is not None and self._thread is None:
            self.sample_once()
            self._thread = threading.Thread(target=self._loop, name="tprimat-gpu-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after a last sample (after the job ended), and release the tool."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
            self.sample_once()
        if self.sampler is not None:
            self.sampler.close()

    def __enter__(self) -> GpuMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample_once(self) -> Sample | None:
        """Take one sample now (the thread calls this every interval)."""
        if self.sampler is None:
            return None
        try:
            readings = self.sampler.read()
        except Exception:
            self.errors += 1
            return None
        if self.devices is not None:
            readings = [r for r in readings if r.index in self.devices]
        if not readings:
            return None
        sample = Sample(time_s=self.clock(), gpus=tuple(readings))
        with self._lock:
            self.samples.append(sample)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(attrs.asdict(sample)) + "\n")
        return sample

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def _power_series(self) -> list[tuple[float, float]]:
        with self._lock:
            samples = list(self.samples)
        series = []
        for sample in samples:
            powers = [g.power_w for g in sample.gpus]
            if powers and all(p is not None for p in powers):
                series.append((sample.time_s, float(sum(powers))))  # type: ignore[arg-type]
        return series

    def _counter_series(self) -> list[tuple[float, float | None]]:
        with self._lock:
            samples = list(self.samples)
        series: list[tuple[float, float | None]] = []
        before: dict[int, tuple[int, float]] | None = None
        for sample in samples:
            now = _counters(sample)
            series.append((sample.time_s, counter_increase_j(before, now)))
            before = now
        return series

    def energy_j(self, start_s: float, end_s: float) -> float | None:
        """Joules drawn by the monitored GPUs between two ``time.time()`` instants.

        From the energy counters when every sample around the window has them
        and none was reset inside it, else from the power samples.  None
        unless samples exist at or before ``start_s`` and at or after
        ``end_s``: energy is interpolated, never extrapolated.
        """
        energy = integrate_increments(self._counter_series(), start_s, end_s)
        if energy is not None:
            named = getattr(self.sampler, "counter_source", None)  # NVML's and amdsmi's say source and unit
            self.energy_sources.add(named or f"{self.source} energy counter (counts x energy_counter_unit_j J)")
            return energy
        energy = integrate_power(self._power_series(), start_s, end_s)
        if energy is not None:
            self.energy_sources.add(f"{self.source} power samples (W, every {self.interval_s:g} s)")
        return energy

    @property
    def energy_source(self) -> str | None:
        """Where the energies :meth:`energy_j` gave came from, with the unit ("; " between several)."""
        return "; ".join(sorted(self.energy_sources)) or None

    def peak_memory_gib(self, start_s: float, end_s: float) -> float | None:
        """The highest device-used memory of any monitored GPU seen within the window."""
        with self._lock:
            inside = [s for s in self.samples if start_s <= s.time_s <= end_s]
        values = [g.mem_used_gib for s in inside for g in s.gpus if g.mem_used_gib is not None]
        return max(values) if values else None


def _counters(sample: Sample) -> dict[int, tuple[int, float]] | None:
    """GPU index -> (energy counter, joules per count) of a sample; None if a GPU has no counter."""
    found = {}
    for gpu in sample.gpus:
        if gpu.energy_counter is None or gpu.energy_counter_unit_j is None:
            return None
        found[gpu.index] = (gpu.energy_counter, gpu.energy_counter_unit_j)
    return found


def counter_increase_j(
    before: dict[int, tuple[int, float]] | None, after: dict[int, tuple[int, float]] | None
) -> float | None:
    """Joules the GPUs' energy counters rose between two samples (GPU index -> (counter, J per count)).

    None when either sample lacks a counter, the GPUs differ, a counter's unit
    changed, or a counter went down and is not a wrap: a 64-bit counter wraps
    to a small value, so a decrease whose wrapped difference is under half the
    counter's range is a wrap; anything else is a reset (a driver reload or
    GPU reset), across which nothing is known.
    """
    if before is None or after is None or before.keys() != after.keys():
        return None
    total = 0.0
    for index, (count, unit_j) in after.items():
        previous, previous_unit_j = before[index]
        if unit_j != previous_unit_j:
            return None
        rise = count - previous
        if rise < 0:
            rise += ENERGY_COUNTER_MODULUS
            if rise >= ENERGY_COUNTER_MODULUS // 2:
                return None  # a reset, not a wrap
        total += rise * unit_j
    return total


def integrate_increments(series: Sequence[tuple[float, float | None]], start_s: float, end_s: float) -> float | None:
    """Energy over [start_s, end_s] from (time, joules since the previous point; None: unknown) points.

    Each increment is spread evenly over its interval (the average power
    between two counter readings), so a window covering part of an interval
    gets that part's share.  None when the points do not cover the window or
    an interval it overlaps is unknown.
    """
    if end_s <= start_s or len(series) < 2 or series[0][0] > start_s or series[-1][0] < end_s:
        return None
    total = 0.0
    for (t0, _), (t1, joules) in zip(series, series[1:], strict=False):
        overlap = min(end_s, t1) - max(start_s, t0)
        if overlap <= 0:
            continue
        if joules is None:
            return None
        total += joules * overlap / (t1 - t0)
    return total


def integrate_power(series: Sequence[tuple[float, float]], start_s: float, end_s: float) -> float | None:
    """Integral of piecewise-linear power (time, watts) over [start_s, end_s], in joules."""
    if end_s <= start_s or len(series) < 2:
        return None
    if series[0][0] > start_s or series[-1][0] < end_s:
        return None

    times = [t for t, _ in series]

    def power_at(t: float) -> float:
        i = max(1, bisect.bisect_left(times, t))
        (t0, p0), (t1, p1) = series[i - 1], series[i]
        return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)

    first, last = bisect.bisect_right(times, start_s), bisect.bisect_left(times, end_s)
    points = [(start_s, power_at(start_s)), *series[first:last], (end_s, power_at(end_s))]
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(points, points[1:], strict=False))
