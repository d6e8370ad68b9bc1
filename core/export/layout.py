"""Lay one result out for experiment trackers: flattened config, facts, per-iteration series, summary.

Every tracker receives the same :class:`~tprimat.contract.exporter.TrackerRun`,
so a number has one name and one value wherever it is looked at.  Nothing is
computed here: the series are the result's own iteration records (the
``measured`` series marks the iterations its statistics count, chosen by
:func:`tprimat.result.metrics.select_measured`, the function that chose them),
and the summary is the result's summary as written.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from tprimat.contract.exporter import ParamValue, TrackerRun, as_text
from tprimat.contract.records import IterationRecord
from tprimat.result.metrics import select_measured
from tprimat.result.schema import Result, Stats

#: Per-iteration fields exported as series (numbers only; ``reported`` figures are added as ``reported/<key>``).
SERIES_FIELDS = (
    "step_time_s",
    "tokens_per_s_per_gpu",
    "tokens",
    "loss",
    "lr",
    "grad_norm",
    "skipped",
    "global_batch_size",
    "consumed_samples",
    "mem_allocated_gib",
    "mem_max_allocated_gib",
    "mem_reserved_gib",
    "mem_max_reserved_gib",
    "mem_device_used_gib",
    "mem_device_total_gib",
    "mem_rss_gib",
    "energy_j",
)

#: The summary's figures under this prefix, e.g. ``summary/step_time_s/median``, ``summary/mfu``.
SUMMARY = "summary"


def tracker_run(result: Result, source: Path) -> TrackerRun:
    """``result`` (read from ``source``) as every tracker receives it."""
    records = list(result.iterations)
    facts = _facts(result, source)
    summary: dict[str, float] = {}
    for prefix, section in ((SUMMARY, result.summary), ("memory", result.memory), ("convergence", result.convergence)):
        if section is not None:
            _split(section, prefix, summary, facts)
    return TrackerRun(
        run_id=result.run.id,
        name=result.run.id,
        status=result.run.status,
        source=str(source),
        params=dict(_flatten("config", _plain(result.config))),
        facts=facts,
        series=_series(result, records),
        summary=summary,
        labels=tuple(
            label
            for label in (
                result.run.backend,
                result.run.model,
                result.run.platform,
                result.hardware.device_name,
                result.run.status,
            )
            if label
        ),
        started_at=_posix(result.run.started_at),
        finished_at=_posix(result.run.finished_at),
        wall_times={r.iteration: t for r in records if (t := _posix(r.timestamp)) is not None},
    )


# -- config --------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """attrs objects as dicts, recursively (the result's own field names)."""
    if attrs.has(type(value)):
        return {field.name: _plain(getattr(value, field.name)) for field in attrs.fields(type(value))}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, ParamValue]]:
    """Dotted keys for nested tables; lists become JSON text (one value, as the result holds it)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _flatten(f"{prefix}.{key}", item)
    elif isinstance(value, list):
        yield prefix, json.dumps(value, default=str)
    elif isinstance(value, float) and not math.isfinite(value):
        yield prefix, str(value)
    else:
        yield prefix, value


# -- facts ---------------------------------------------------------------------------------


def _facts(result: Result, source: Path) -> dict[str, str]:
    facts = {"tprimat.result": str(source), "tprimat.schema_version": str(result.schema_version)}
    sections = {
        "run": result.run,
        "hardware": result.hardware,
        "software": result.software,
        "provenance": result.provenance,
        "caveats": result.caveats,
    }
    for name, section in sections.items():
        for key, value in _flatten(name, _plain(section)):
            if value is not None:
                facts[key] = as_text(value)
    facts.update(_manifest_facts(source.parent / "manifest.json"))
    return facts


def _manifest_facts(path: Path) -> dict[str, str]:
    """What the run's manifest adds to the result: the command, when it was captured, the environment.

    Hardware and software in the manifest are the result's own (copied into it when the run
    was written); a manifest that cannot be read adds nothing and says so.
    """
    if not path.is_file():
        return {}
    from tprimat.running.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(path)
    except ManifestError as exc:
        return {"manifest.unreadable": str(exc)}
    facts = {"manifest.path": str(path), "manifest.created_at": manifest.created_at}
    if manifest.command:
        facts["manifest.command"] = shlex.join(manifest.command)
    if manifest.platform:
        facts["manifest.platform"] = manifest.platform
    facts.update((f"environment.{name}", value) for name, value in manifest.environment.items())
    return facts


# -- summary -------------------------------------------------------------------------------


def _split(section: Any, prefix: str, numbers: dict[str, float], facts: dict[str, str]) -> None:
    """A result section's numbers into ``numbers`` and its words (sources, formulas, flags) into ``facts``."""
    for field in attrs.fields(type(section)):
        value = getattr(section, field.name)
        key = f"{prefix}/{field.name}"
        if isinstance(value, Stats):
            _stats(key, value, numbers)
        elif isinstance(value, Mapping):
            for name, item in value.items():
                if isinstance(item, Stats):
                    _stats(f"{key}/{name}", item, numbers)
                elif _is_number(item):
                    numbers[f"{key}/{name}"] = float(item)
        elif _is_number(value):
            numbers[key] = float(value)
        elif isinstance(value, str | bool):
            facts[f"{prefix}.{field.name}"] = as_text(value)


def _stats(key: str, stats: Stats, numbers: dict[str, float]) -> None:
    for field in attrs.fields(Stats):
        value = getattr(stats, field.name)
        if value is not None:
            numbers[f"{key}/{field.name}"] = float(value)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- series --------------------------------------------------------------------------------


def _series(result: Result, records: list[IterationRecord]) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        for name in SERIES_FIELDS:
            value = getattr(record, name)
            if value is not None:
                series.setdefault(name, []).append((record.iteration, float(value)))
        for name, value in record.reported.items():
            if _is_number(value):
                series.setdefault(f"reported/{name}", []).append((record.iteration, float(value)))
    if records:
        benchmark = result.config.settings.get("benchmark", {})
        measured, _ = select_measured(
            records,
            warmup_iterations=result.summary.warmup_iterations,
            exclude_profiled=bool(benchmark.get("exclude_profiled", True)),
        )
        counted = {id(record) for record in measured}
        series["measured"] = [(record.iteration, 1.0 if id(record) in counted else 0.0) for record in records]
    evaluations = [(point.iteration, point.eval_loss) for point in result.evaluations]
    eval_loss = [
        (iteration, float(loss)) for iteration, loss in evaluations if iteration is not None and loss is not None
    ]
    if eval_loss:
        series["eval_loss"] = eval_loss
    return series


def _posix(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None
