"""A result's memory section: the estimate for its config beside the per-rank peaks that were measured.

Measured peaks come from the iteration records (allocator figures the logs
print, device-used memory the monitor sampled), from the log's per-rank
memory lines (read by the backend's ``BackendSpec.memory_peaks``) and, for live runs, from the
monitor's per-GPU samples.  The estimate needs the full benchmark config and a
registered model; without them only the measurements are recorded.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tprimat.contract.records import RankPeak
from tprimat.settings.trainers import Trainer

if TYPE_CHECKING:
    from tprimat.memory.estimate import MemoryEstimate
from tprimat.result.schema import IterationRecord, MemoryReport, Summary
from tprimat.result.spill import record_field_blocks

#: Key for a measurement that names no rank.
UNKNOWN_RANK = "?"


def memory_report(
    *,
    settings: Mapping[str, Any],
    model_name: str,
    trainer: Trainer,
    device_name: str | None,
    capacity_gib: float | None,
    records: Sequence[IterationRecord],
    rank_peaks: Iterable[RankPeak] = (),
    summary: Summary | None = None,
) -> MemoryReport | None:
    """The memory section of a result, or None when nothing was predicted or measured.

    ``trainer`` is the backend's ``BackendSpec.trainer``: the layout the estimate assumes.

    The measured peaks are the largest of the records, the ``summary`` (which may
    carry figures the records do not, e.g. imported results) and the per-rank peaks.
    """
    maps: dict[str, dict[str, float]] = {"max_allocated_gib": {}, "max_reserved_gib": {}, "device_used_gib": {}}
    for peak in rank_peaks:
        key = UNKNOWN_RANK if peak.rank is None else str(peak.rank)
        for quantity, by_rank in maps.items():
            value = getattr(peak, quantity)
            if value is not None:
                by_rank[key] = max(value, by_rank.get(key, value))
    from_records = _record_peaks(records, tuple(maps))
    measured = {
        quantity: _max([from_records[quantity], getattr(summary, f"mem_{quantity}", None)]) for quantity in maps
    }
    for quantity, by_rank in maps.items():
        measured[quantity] = _max([measured[quantity], *by_rank.values()])
    predicted, note = _predict(settings, model_name, trainer, device_name, capacity_gib)
    if predicted is None and all(v is None for v in measured.values()):
        return None
    peak_map = maps["max_allocated_gib"] or maps["device_used_gib"]
    peak_rank = max(peak_map, key=lambda k: peak_map[k]) if peak_map else None
    return MemoryReport(
        predicted_terms_gib={name: gib for name, gib, _ in predicted.terms()} if predicted else {},
        predicted_allocated_gib=predicted.allocated_gib if predicted else None,
        predicted_total_gib=predicted.total_gib if predicted else None,
        capacity_gib=predicted.capacity_gib if predicted else capacity_gib,
        fits=predicted.fits if predicted else None,
        estimator_note=note,
        per_rank_max_allocated_gib=maps["max_allocated_gib"],
        per_rank_max_reserved_gib=maps["max_reserved_gib"],
        per_rank_device_used_gib=maps["device_used_gib"],
        peak_rank=peak_rank,
        measured_peak_allocated_gib=measured["max_allocated_gib"],
        measured_peak_reserved_gib=measured["max_reserved_gib"],
        measured_peak_device_used_gib=measured["device_used_gib"],
    )


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _record_peaks(records: Iterable[IterationRecord], quantities: tuple[str, ...]) -> dict[str, float | None]:
    """The largest ``mem_<quantity>`` of the records, for each quantity, as ``max`` picks it:
    one pass, so that records read back from a file are read once, a block's columns at a time."""
    peaks: dict[str, float | None] = dict.fromkeys(quantities)
    for columns in record_field_blocks(records, *(f"mem_{quantity}" for quantity in quantities)):
        for quantity, column in zip(quantities, columns, strict=True):
            peaks[quantity] = _column_peak(column, peaks[quantity])
    return peaks


def _column_peak(column: Sequence[float | None], best: float | None) -> float | None:
    """``best`` (the peak so far), or the first value of ``column`` that is larger than every one
    before it and ``best``, the values taken in order (None left out)."""
    present: Sequence[float] = cast(Sequence[float], column)
    if None in column:
        present = list(itertools.compress(present, map(operator.is_not, column, itertools.repeat(None))))
    if present and math.isfinite(sum(present)):  # no NaN: max is that value, in C
        largest = max(present)
        return largest if best is None or largest > best else best
    for value in present:
        if best is None or value > best:
            best = value
    return best


def _predict(
    settings: Mapping[str, Any],
    model_name: str,
    trainer: Trainer,
    device_name: str | None,
    capacity_gib: float | None,
) -> tuple[MemoryEstimate | None, str]:
    from tprimat.memory.estimate import MemoryEstimateError, estimate_memory
    from tprimat.settings.config import ConfigError, config_from_dict
    from tprimat.settings.models import UnknownModelError, get_model

    if not settings:
        return None, "no estimate: the result does not carry its full benchmark config"
    try:
        config = config_from_dict(dict(settings))
        model = get_model(model_name)
    except ConfigError as exc:
        return None, f"no estimate: {exc}"
    except UnknownModelError as exc:
        return None, f"no estimate: {exc}"
    try:
        estimate = estimate_memory(config, model, capacity_gib=capacity_gib, device=device_name, trainer=trainer)
    except MemoryEstimateError:
        estimate = estimate_memory(config, model, capacity_gib=capacity_gib, trainer=trainer)
    return estimate, estimate.layout


def log_rank_peaks(reader: Callable[[Path], Sequence[RankPeak]] | None, paths: Iterable[Path]) -> list[RankPeak]:
    """Per-rank peaks the backend's ``memory_peaks`` reader finds in the log files (unreadable files skipped)."""
    peaks: list[RankPeak] = []
    if reader is None:
        return peaks
    for path in paths:
        try:
            peaks.extend(reader(path))
        except OSError:
            continue
    return peaks


def monitor_rank_peaks(samples: Iterable[Any]) -> list[RankPeak]:
    """Per-GPU device-used peaks of the GPU monitor's samples; a GPU's index is taken as the local rank."""
    used: dict[int, float] = {}
    for sample in samples:
        for gpu in sample.gpus:
            if gpu.mem_used_gib is not None:
                used[gpu.index] = max(gpu.mem_used_gib, used.get(gpu.index, gpu.mem_used_gib))
    return [RankPeak(rank=index, device_used_gib=value) for index, value in sorted(used.items())]
