"""How every microbenchmark is timed (torch is imported by the callers' code paths only).

One iteration is::

    prepare()        fresh random inputs (normal distribution, never zeros), untimed
    flush()          write a buffer larger than the last-level cache, untimed
    start mark
    phase 1          e.g. the forward
    mark
    phase 2          e.g. the backward
    mark

On a GPU the marks are device events (``torch.cuda.Event(enable_timing=True)``,
which are HIP events on ROCm) recorded on the current stream, so the times
are the device's own and include no host overhead beyond what starves the
device; everything is synchronised once after the loop.  On the CPU the marks
are ``time.perf_counter()`` readings.  The first ``warmup`` iterations are run
and discarded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

MIB = 2**20

#: A flush buffer on a GPU is at least this large: AMD Instinct's Infinity Cache (256 MiB
#: on MI300X) sits behind L2 and is not reported by the device properties.
GPU_MIN_FLUSH_BYTES = 512 * MIB
CPU_DEFAULT_CACHE_BYTES = 32 * MIB


@attrs.frozen(kw_only=True)
class Method:
    """The settings of one measurement, recorded in every result."""

    warmup: int = attrs.field(validator=attrs.validators.ge(0))
    iterations: int = attrs.field(validator=attrs.validators.gt(0))
    flush_bytes: int = attrs.field(validator=attrs.validators.ge(0))
    cache_bytes: int | None = None  # the cache the flush must exceed, as measured or read
    timer: str = ""  # "device events" or "perf_counter"


def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    factor = 1
    for suffix, value in (("K", 2**10), ("M", 2**20), ("G", 2**30)):
        if text.endswith(suffix):
            text, factor = text[:-1], value
            break
    try:
        return int(text) * factor
    except ValueError:
        return None


CPU_CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def cpu_last_level_cache_bytes(sysfs: Path = CPU_CACHE_SYSFS) -> int | None:
    """Size of the highest-level cache of CPU 0 as Linux reports it, or None."""
    best: tuple[int, int] | None = None
    try:
        entries = sorted(sysfs.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            level = int((entry / "level").read_text())
            size = _parse_size((entry / "size").read_text())
        except (OSError, ValueError):
            continue
        if size is not None and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def gpu_cache_bytes(torch: Any, index: int) -> int | None:
    """The L2 size the runtime reports for GPU ``index`` (None if it does not say)."""
    props = torch.cuda.get_device_properties(index)
    value = getattr(props, "L2_cache_size", None)
    return int(value) if value else None


def default_flush_bytes(cache_bytes: int | None, *, gpu: bool) -> int:
    """Twice the cache (at least 512 MiB on a GPU), so that no operand survives a flush."""
    base = 2 * (cache_bytes or CPU_DEFAULT_CACHE_BYTES)
    return max(base, GPU_MIN_FLUSH_BYTES) if gpu else base


def is_gpu(device: Any) -> bool:
    return getattr(device, "type", str(device)).split(":")[0] == "cuda"


def make_flush(torch: Any, device: Any, nbytes: int) -> Callable[[int], None]:
    """A function that overwrites an ``nbytes`` buffer on ``device`` with a nonzero value."""
    if nbytes <= 0:
        return lambda _iteration: None
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)

    def flush(iteration: int) -> None:
        buffer.fill_(1 + iteration % 251)

    return flush


def measure(
    torch: Any,
    device: Any,
    method: Method,
    prepare: Callable[[], Any],
    phases: Sequence[Callable[[Any], Any]],
    flush: Callable[[int], None],
) -> list[list[float]]:
    """Seconds of each phase in each timed iteration: ``result[phase][iteration]``.

    ``prepare()`` makes the inputs; each phase receives the previous phase's
    return value (the first receives ``prepare()``'s).
    """
    gpu = is_gpu(device)
    pending: list[list[Any]] = []
    for iteration in range(method.warmup + method.iterations):
        value = prepare()
        flush(iteration)
        if gpu:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(len(phases) + 1)]
            marks[0].record()
            for phase, mark in zip(phases, marks[1:], strict=True):
                value = phase(value)
                mark.record()
        else:
            import time

            marks = [time.perf_counter()]
            for phase in phases:
                value = phase(value)
                marks.append(time.perf_counter())
        del value
        if iteration >= method.warmup:
            pending.append(marks)
    if gpu:
        torch.cuda.synchronize(device)
        return [[m[p].elapsed_time(m[p + 1]) / 1e3 for m in pending] for p in range(len(phases))]
    return [[m[p + 1] - m[p] for m in pending] for p in range(len(phases))]


def method_for(
    torch: Any,
    device: Any,
    *,
    warmup: int,
    iterations: int,
    flush_bytes: int | None = None,
) -> Method:
    """The method for ``device``: the flush sized from its cache unless given."""
    gpu = is_gpu(device)
    if gpu:
        index = device.index if device.index is not None else torch.cuda.current_device()
        cache = gpu_cache_bytes(torch, index)
    else:
        cache = cpu_last_level_cache_bytes()
    if flush_bytes is None:
        flush_bytes = default_flush_bytes(cache, gpu=gpu)
    return Method(
        warmup=warmup,
        iterations=iterations,
        flush_bytes=flush_bytes,
        cache_bytes=cache,
        timer="device events" if gpu else "perf_counter",
    )
