"""Which runs may stand side by side, and which runs are repeats of each other.

Two runs are comparable when the fields :func:`tprimat.settings.config.fair_fields`
names match — model, methodology, dataset (its fingerprint, or ``mock``),
sequence length, global batch size, precision — and they measured the same
number of iterations.  Runs that share those fields are grouped under the
fingerprint :func:`tprimat.settings.config.config_fingerprint` gives them.

Within a group, runs on the same device model, with the same framework and
GPU count, are repeats of one *system* and are aggregated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from tprimat.compare.load import LoadedRun
from tprimat.result.peaks import find_device
from tprimat.result.schema import Result
from tprimat.settings import fairness
from tprimat.settings.fairness import config_fingerprint

#: The fields that must match, in the order the report lists them: the fair fields of the
#: config, and the number of iterations the statistics stand on.
FAIR_FIELDS = (*fairness.FAIR_FIELDS, "measured_iterations")


def fair_fields_of(result: Result) -> dict[str, Any]:
    """The fields ``result`` shares with every run it may be compared with.

    The same fields as :mod:`tprimat.settings.fairness` (the dataset is
    ``mock`` or identified by content), applied to the result's recorded
    config, plus the number of measured iterations (for convergence runs,
    which stop when they reach it, the target instead).
    """
    config = result.config
    if result.run.dataset == "mock":
        dataset = "mock"
    else:
        dataset = config.dataset_fingerprint or result.run.dataset
    return {
        **fairness.fair_values(
            model=config.model,
            methodology=config.methodology,
            dataset=dataset,
            seq_length=config.seq_length,
            global_batch_size=config.global_batch_size,
            precision=config.precision,
        ),
        "measured_iterations": _measured(result),
    }


def _measured(result: Result) -> int | str:
    """Iterations measured; a convergence run stops at its target, so the target stands in."""
    if result.convergence is not None:
        return f"until eval loss <= {result.convergence.target_log_perplexity:g}"
    return result.summary.measured_iterations


def device_key(result: Result) -> str:
    """Short device name: the peaks-table key when the device is known, else what was captured."""
    name = result.hardware.device_name
    row = find_device(name)
    if row is not None:
        return row.key
    return name or (result.run.platform or "unknown device")


@attrs.frozen(kw_only=True)
class Run:
    """A loaded run with the keys the report uses for it."""

    key: str  # R1, R2, ... in input order
    path: str
    result: Result
    group: str  # A, B, ... in order of first appearance
    system: str  # label of the system it is a repeat of

    @property
    def fields(self) -> dict[str, Any]:
        return fair_fields_of(self.result)


@attrs.frozen(kw_only=True)
class Group:
    id: str
    fields: dict[str, Any]
    fingerprint: str
    run_keys: list[str]


def system_label(result: Result) -> str:
    """``8× MI300X · primus``; a tuned run says so (``· tuned``): it is another setup of the system."""
    framework = result.run.framework or result.run.backend
    world = result.config.world_size
    count = f"{world}× " if world else ""
    tuned = " · tuned" if result.config.methodology == "tuned" else ""
    return f"{count}{device_key(result)} · {framework}{tuned}"


def group_runs(loaded: Sequence[LoadedRun]) -> tuple[list[Run], list[Group]]:
    """Runs keyed R1.. and grouped A.. by their fair fields."""
    groups: dict[str, Group] = {}
    runs: list[Run] = []
    for index, item in enumerate(loaded, start=1):
        fields = fair_fields_of(item.result)
        fingerprint = config_fingerprint(fields)
        group = groups.get(fingerprint)
        if group is None:
            group = Group(
                id=chr(ord("A") + len(groups)) if len(groups) < 26 else f"G{len(groups)}",
                fields=fields,
                fingerprint=fingerprint,
                run_keys=[],
            )
            groups[fingerprint] = group
        key = f"R{index}"
        group.run_keys.append(key)
        runs.append(
            Run(key=key, path=str(item.path), result=item.result, group=group.id, system=system_label(item.result))
        )
    ordered = list(groups.values())
    if len(ordered) > 1:
        runs = [attrs.evolve(r, system=f"{r.system} [{r.group}]") for r in runs]
    return runs, ordered


def differing_fields(groups: Sequence[Group]) -> list[tuple[str, list[Any]]]:
    """Every fair field whose value is not the same in all groups, with each group's value."""
    rows = []
    for name in FAIR_FIELDS:
        values = [g.fields.get(name) for g in groups]
        if len({repr(v) for v in values}) > 1:
            rows.append((name, values))
    return rows


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys (lists and scalars are leaves)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def config_diff(runs: Sequence[Run]) -> list[tuple[str, list[Any]]]:
    """Recorded settings, hardware and software that are not identical across ``runs``."""
    flat = []
    for run in runs:
        r = run.result
        data = {
            # framework settings are compared under their shared names (tprimat.compare.frameworks)
            "config": {k: v for k, v in attrs.asdict(r.config).items() if k not in ("settings", "framework")},
            "settings": r.config.settings,
            "hardware": {k: v for k, v in attrs.asdict(r.hardware).items() if k not in ("captured_at", "hostname")},
            "software": attrs.asdict(r.software),
            "run": {"backend": r.run.backend, "framework": r.run.framework, "platform": r.run.platform},
        }
        flat.append(flatten(data))
    keys = sorted({k for f in flat for k in f})
    rows = []
    for key in keys:
        values = [f.get(key) for f in flat]
        if len({repr(v) for v in values}) > 1:
            rows.append((key, values))
    return rows
