"""Which runs may stand side by side, and which runs are repeats of each other.

Two runs are comparable when the fields :func:`tprimat.settings.config.fair_fields`
names match — model, methodology, dataset (its fingerprint, or ``mock``),
sequence length, global batch size, precision — and they measured the same
number of iterations.  Runs that share those fields are grouped under the
fingerprint :func:`tprimat.settings.config.config_fingerprint` gives them.

Within a group, runs are repeats of one *system* only when they launched the
same thing: the same device, backend, framework, software, and every recorded
setting (:func:`launch_settings`; the seed, which repeats vary on purpose, and
the cost table, which is not launched, are left out).  Runs that differ in any
of these are different systems, each labelled by what sets it apart
(``1× AMD EPYC · pytorch · micro_batch_size=2``).  ``--group-by KEY[,KEY]``
pools runs by the keys named instead; the report then lists every setting that
differs inside a system (:func:`differences_within`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from tprimat.compare.load import LoadedRun
from tprimat.errors import TprimatError
from tprimat.hardware.devices import find_device
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


#: Recorded values that are not launched settings: where the config came from, fingerprints and
#: tuned-deviation texts (the settings themselves are compared), the seed (repeats vary it on
#: purpose), the price table (read only by reports) and the commit of tprimat itself (the
#: harness, not what was trained).
NOT_LAUNCH_SETTINGS = (
    "config.layers",
    "config.config_fingerprint",
    "config.deviations",
    "settings.benchmark.seed",
    "settings.cost",
    "software.tprimat_commit",
)

#: Short names ``--group-by`` accepts, and the launch-setting key each stands for.
GROUP_BY_NAMES = {
    "platform": "run.platform",
    "device": "device",
    "backend": "run.backend",
    "framework": "run.framework",
    "gpus": "config.world_size",
    "world_size": "config.world_size",
    "methodology": "config.methodology",
    "preset": "config.preset",
    "micro_batch_size": "config.micro_batch_size",
}


def launch_settings(result: Result) -> dict[str, Any]:
    """What a run launched, as dotted keys: device, backend, framework, software, the recorded
    config and framework settings; two runs are repeats of one system only when these are equal."""
    config = result.config
    data = {
        "device": device_key(result),
        "run": {"platform": result.run.platform, "backend": result.run.backend, "framework": result.run.framework},
        "config": {k: v for k, v in attrs.asdict(config).items() if k not in ("settings", "framework")},
        "settings": config.settings,
        "framework": config.framework.shared if config.framework is not None else {},
        "software": attrs.asdict(result.software),
    }
    return {
        key: value
        for key, value in flatten(data).items()
        if not any(key == skip or key.startswith(skip + ".") for skip in NOT_LAUNCH_SETTINGS)
    }


def parse_group_by(text: str | None) -> list[str] | None:
    """``--group-by`` as a list of keys (None: group by every launched setting)."""
    if text is None:
        return None
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise TprimatError(f"--group-by {text!r}: name one or more keys, e.g. --group-by platform,device")
    return keys


def _resolve(key: str, available: set[str]) -> list[str]:
    """The launch-setting keys ``key`` names: a short name, a dotted key, or a unique dotted tail."""
    if key in GROUP_BY_NAMES:
        return [GROUP_BY_NAMES[key]]
    if key in available:
        return [key]
    tails = sorted(k for k in available if k.endswith("." + key))
    if len(tails) == 1:
        return tails
    if tails:
        raise TprimatError(f"--group-by {key!r} is ambiguous: give one of {', '.join(tails)}")
    raise TprimatError(
        f"--group-by {key!r} names no recorded setting; use {', '.join(GROUP_BY_NAMES)}, "
        "a dotted key of the config (e.g. settings.training.micro_batch_size) or a run tag (tags.KEY)"
    )


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _distinguishing(identities: list[dict[str, Any]]) -> list[list[str]]:
    """For systems that would share a label, ``key=value`` texts of what sets each apart."""
    keys = [k for k in dict.fromkeys(k for i in identities for k in i) if len({repr(i.get(k)) for i in identities}) > 1]
    keys.sort(key=lambda k: (not k.startswith("settings."), k))  # the config's own names first
    texts = []
    for identity in identities:
        shown = list(dict.fromkeys(f"{_short(k)}={_text(identity.get(k))}" for k in keys))
        texts.append(shown if len(shown) <= 3 else [*shown[:3], f"+{len(shown) - 3} more"])
    return texts


def _text(value: Any) -> str:
    return "–" if value is None else str(value)


def _label_systems(
    members: dict[tuple[Any, ...], list[int]],
    loaded: Sequence[LoadedRun],
    identities: list[dict[str, Any]],
    group_by: list[list[str]] | None,
) -> dict[tuple[Any, ...], str]:
    """A label per system key: the device · framework label, with what sets it apart from the
    systems that share it; or, for a user grouping, the grouping's own values."""
    labels: dict[tuple[Any, ...], str] = {}
    if group_by is not None:
        for key, indices in members.items():
            identity = identities[indices[0]]
            parts = []
            for names in group_by:
                values = {repr(identity.get(n)): identity.get(n) for n in names}
                shown = "/".join(_text(v) for v in values.values())
                parts.append(f"{_short(names[0])}={shown}")
            labels[key] = " · ".join(parts)
        return labels
    by_base: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for key, indices in members.items():  # key: (fair group, launched settings)
        by_base.setdefault((key[0], system_label(loaded[indices[0]].result)), []).append(key)
    for (_, base), keys in by_base.items():
        if len(keys) == 1:
            labels[keys[0]] = base
            continue
        apart = _distinguishing([identities[members[k][0]] for k in keys])
        for key, texts in zip(keys, apart, strict=True):
            labels[key] = " · ".join([base, *texts])
    seen: dict[tuple[str, str], int] = {}
    for key, label in labels.items():  # what sets systems apart may be cut short: never one label twice
        count = seen[key[0], label] = seen.get((key[0], label), 0) + 1  # per group: [A], [B] tell groups apart
        if count > 1:
            labels[key] = f"{label} #{count}"
    return labels


def group_runs(loaded: Sequence[LoadedRun], group_by: Sequence[str] | None = None) -> tuple[list[Run], list[Group]]:
    """Runs keyed R1.. and grouped A.. by their fair fields; within a group, systems by every
    launched setting, or by the ``group_by`` keys (see :data:`GROUP_BY_NAMES`)."""
    identities = [launch_settings(item.result) for item in loaded]
    resolved = None
    if group_by is not None:  # the user's run tags (`tprimat run --tag KEY=VALUE`) may group runs too
        identities = [
            {**identity, **{f"tags.{k}": v for k, v in item.result.run.tags.items()}}
            for identity, item in zip(identities, loaded, strict=True)
        ]
        available = {k for identity in identities for k in identity}
        resolved = [_resolve(key, available) for key in group_by]
    groups: dict[str, Group] = {}
    runs: list[Run] = []
    group_of: list[str] = []
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
        group_of.append(group.id)
    members: dict[tuple[Any, ...], list[int]] = {}
    for index, identity in enumerate(identities):
        system: tuple[Any, ...]  # (name, value) pairs, or the resolved names' values
        if resolved is None:
            system = tuple(sorted((k, repr(v)) for k, v in identity.items()))
        else:
            system = tuple(repr(identity.get(k)) for names in resolved for k in names)
        members.setdefault((group_of[index], system), []).append(index)
    labels = _label_systems(members, loaded, identities, resolved)
    system_of = {index: labels[key] for key, indices in members.items() for index in indices}
    for index, item in enumerate(loaded):
        runs.append(
            Run(
                key=f"R{index + 1}",
                path=str(item.path),
                result=item.result,
                group=group_of[index],
                system=system_of[index],
            )
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


def differences_within(runs: Sequence[Run]) -> dict[str, list[tuple[str, list[Any]]]]:
    """System label -> the launched settings that are not the same in all its runs (one value per
    run); empty unless ``--group-by`` pooled runs that launched different things."""
    found = {}
    for label in dict.fromkeys(r.system for r in runs):
        members = [r for r in runs if r.system == label]
        identities = [launch_settings(r.result) for r in members]
        keys = dict.fromkeys(k for i in identities for k in i)
        rows = [(k, [i.get(k) for i in identities]) for k in keys if len({repr(i.get(k)) for i in identities}) > 1]
        if rows:
            found[label] = rows
    return found


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
