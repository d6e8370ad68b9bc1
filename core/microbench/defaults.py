"""Defaults that suit the device ``tprimat microbench`` finds, and progress with an estimate.

On a GPU the defaults measure what a pretraining run uses: bf16 and fp8, 5
warm-up and 30 timed iterations per case, and a sweep of 2 steps each side
of every forward shape.  The same on a CPU takes far more than five minutes
even on the tiny model, and bf16/fp8 matmuls are not what a CPU is built for;
so without a GPU the defaults are the CPU preset's workload (``cpu.toml``:
the tiny model, sequence 256, micro-batch 2), fp32, 1 warm-up and 5 timed
iterations and no sweep.  Every value given on the command line wins.

:class:`CaseProgress` turns the per-case progress lines into lines with a
bar, the cases done out of those planned, the time spent and an estimate of
the time left (the mean time per case so far times the cases left).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from tprimat.hardware.platform import PlatformInfo, trains_on_cpu


@attrs.frozen(kw_only=True)
class DeviceDefaults:
    """The microbench defaults for one kind of device."""

    device: str  # "gpu" | "cpu"
    dtypes: str
    warmup: int
    iterations: int
    sweep_radius: int

    def describe(self) -> str:
        sweep = f"a sweep of {self.sweep_radius} step(s) each side" if self.sweep_radius else "no sweep"
        return f"dtype {self.dtypes}, {self.warmup} warm-up + {self.iterations} timed iterations per case, {sweep}"


GPU_DEFAULTS = DeviceDefaults(device="gpu", dtypes="bf16,fp8", warmup=5, iterations=30, sweep_radius=2)
CPU_DEFAULTS = DeviceDefaults(device="cpu", dtypes="fp32", warmup=1, iterations=5, sweep_radius=0)


def device_kind(requested: str, machine: PlatformInfo) -> str:
    """``gpu`` when the run will use GPUs (``--device cuda``, or ``auto`` on a GPU machine), else ``cpu``.

    ``auto`` is decided as ``tprimat run`` decides it (:func:`~tprimat.hardware.platform.trains_on_cpu`
    on the detected ``machine``), so microbench and run agree on whether a machine has a GPU.
    """
    if requested == "cpu":
        return "cpu"
    if requested == "cuda":
        return "gpu"
    return "cpu" if trains_on_cpu(machine) else "gpu"


def defaults_for(kind: str) -> DeviceDefaults:
    return CPU_DEFAULTS if kind == "cpu" else GPU_DEFAULTS


def _duration(seconds: float) -> str:
    seconds = max(int(round(seconds)), 0)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class CaseProgress:
    """A progress callback that adds a bar, a count and an estimate of the time left to each line."""

    WIDTH = 20

    def __init__(self, total: int, sink: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.sink = sink
        self.clock = clock
        self.start = clock()

    def __call__(self, line: str) -> None:
        self.done += 1
        self.total = max(self.total, self.done)  # more cases than planned: the count says so
        elapsed = self.clock() - self.start
        left = elapsed / self.done * (self.total - self.done)
        filled = round(self.WIDTH * self.done / self.total)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self.sink(f"[{bar}] {self.done}/{self.total} {_duration(elapsed)} elapsed, ~{_duration(left)} left | {line}")
