"""``tprimat tune``: find a backend's fastest configuration on this device, and record how.

The pieces, in the order they act:

* :mod:`tprimat.tune.space` — the knobs (settings that change speed, never
  what is computed) and the candidates, simplest first;
* :mod:`tprimat.tune.prune` — the memory estimator drops what cannot fit;
* :mod:`tprimat.tune.search` — successive halving through the suite
  machinery, resumable after a kill, and the statistical decision;
* :mod:`tprimat.tune.oom` — out-of-memory deaths are infeasible, not failures;
* :mod:`tprimat.tune.preset` — the winner as a preset with every trial.

:func:`prepare` decides everything before a trial runs; :func:`open_directory`
makes (or reopens) the tune directory, refusing to mix two different searches.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat.atomic import atomic_write_text
from tprimat.hardware.platform import trains_on_cpu
from tprimat.memory.capacity import usable_capacity
from tprimat.settings.config import BenchmarkConfig, parse_override
from tprimat.tune.prune import Estimator, Pruned, default_estimator, prune
from tprimat.tune.search import DEFINITION_FILE, Budget, TuneError, TuneSpec, fit_budget
from tprimat.tune.space import Candidate, candidates, parse_space, search_space, tunables_for

__all__ = ["Budget", "Plan", "TuneError", "TuneSpec", "open_directory", "parse_budget", "prepare"]

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_budget(text: str) -> Budget:
    """``24``, ``24-trials`` or ``24 trials`` (trial runs), or a duration: ``90s``, ``20m``, ``1h30m``."""
    value = text.strip().lower()
    trials = re.fullmatch(r"(\d+)(?:\s*-?\s*trials?)?", value)
    if trials:
        if int(trials.group(1)) < 1:
            raise TuneError("--budget must be at least 1 trial")
        return Budget(trials=int(trials.group(1)))
    duration = _DURATION.fullmatch(value)
    if value and duration and any(duration.groups()):
        h, m, s = (float(g) if g else 0.0 for g in duration.groups())
        seconds = h * 3600 + m * 60 + s
        if seconds > 0:
            return Budget(seconds=seconds)
    raise TuneError(f"--budget {text!r}: give a number of trial runs (24, 24-trials) or a duration (90s, 20m, 1h30m)")


@attrs.frozen(kw_only=True)
class Plan:
    """Everything decided before the first trial."""

    spec: TuneSpec
    base: BenchmarkConfig
    device: str | None
    platform: str
    space: dict[str, tuple[Any, ...]]
    invalid: int  # candidates the config or the model refuses
    pruned: tuple[Pruned, ...]
    dropped: tuple[Candidate, ...]  # valid, fitting, but beyond the trial budget
    notes: tuple[str, ...]

    def definition(self) -> dict[str, Any]:
        return {
            **self.spec.to_json(),
            "device": self.device,
            "platform": self.platform,
            "space": {k: list(v) for k, v in self.space.items()},
        }


def prepare(
    registry: Any,
    *,
    backend: str,
    model: str,
    config_file: str | Path | None = None,
    overrides: tuple[str, ...] = (),
    space_items: tuple[str, ...] = (),
    budget: Budget,
    capacity_gib: float | None = None,
    min_iterations: int | None = None,
    final_repeats: int = 3,
    estimator: Estimator | None | bool = True,
) -> Plan:
    """Resolve the base config, the space, the candidates, pruning and the budget.

    ``estimator``: ``True`` for the core's memory estimator (when installed),
    ``None`` for none, or a callable with its signature.
    """
    from tprimat.running.prepare import RunRequest, layered_config, target_platform
    from tprimat.settings.models import get_model

    platform = registry.detect_platform()
    registered = registry.backend(backend)
    request = RunRequest(
        backend=backend, model=model, config_file=str(config_file) if config_file else None, overrides=overrides
    )
    platform, _ = target_platform(platform, registered.spec, None)
    base, _ = layered_config(request, platform)
    notes: list[str] = []
    spec_model = get_model(base.benchmark.model)
    restrict = parse_space(space_items)
    tunables = tunables_for(backend, registered.spec) if not restrict else _or_empty(backend, registered)
    fixed = [".".join(parse_override(item)[0]) for item in overrides]
    space = search_space(base, tunables, restrict=restrict, fixed=fixed, backend=backend)
    valid, invalid = candidates(base, spec_model, space)
    chosen_estimator = default_estimator() if estimator is True else estimator or None
    # Without a GPU the estimate (of device memory) has nothing to be checked against but a given capacity.
    device = None if trains_on_cpu(platform) else platform.device_name
    kept, pruned, prune_notes = prune(
        valid,
        base,
        spec_model,
        # as the pre-flight check: a given capacity, else what detection measured (a MIG device's own)
        capacity_gib=capacity_gib
        or (usable_capacity(device, platform.memory_per_device_gib) if device is not None else None),
        device=device,
        estimator=chosen_estimator,
        trainer=registered.spec.trainer,
    )
    if not kept:
        raise TuneError(
            f"no candidate is left to try: {len(invalid)} refused by the config or "
            f"the model, {len(pruned)} pruned by the memory estimator; widen --space "
            "or change --device-capacity"
        )
    if len(kept) == 1:
        raise TuneError(
            f"only one candidate is left to try ({kept[0].describe(base)}): {len(invalid)} refused by the "
            f"config or the model, {len(pruned)} pruned by the memory estimator; a tune compares "
            "candidates, so widen --space or change --device-capacity"
        )
    eta, finalists, repeats = 2, 2, final_repeats
    chosen, dropped = fit_budget(kept, budget, eta=eta, finalists=finalists, final_repeats=repeats)
    notes = [*notes, *prune_notes]
    if dropped:
        notes.append(f"budget {budget}: the {len(dropped)} least simple candidate(s) were left out")
    spec = TuneSpec(
        backend=backend,
        model=spec_model.name,
        precision=base.precision.dtype,
        overrides=tuple(overrides),
        config=str(config_file) if config_file else None,
        candidates=tuple(chosen),
        budget=budget,
        min_iterations=min_iterations or base.benchmark.warmup_iterations + 3,
        eta=eta,
        finalists=finalists,
        final_repeats=repeats,
        device=platform.device_name,
    )
    return Plan(
        spec=spec,
        base=base,
        device=platform.device_name,
        platform=platform.platform,
        space=space,
        invalid=len(invalid),
        pruned=tuple(pruned),
        dropped=tuple(dropped),
        notes=tuple(notes),
    )


def _or_empty(backend: str, registered: Any) -> dict[str, Any]:
    try:
        return tunables_for(backend, registered.spec)
    except TuneError:
        return {}


def open_directory(plan: Plan, directory: Path) -> tuple[Plan, str]:
    """Create the tune directory or reopen it; returns the plan bound to the directory's copy
    of the base config and the tune's start date.  A directory holding another search is refused."""
    directory.mkdir(parents=True, exist_ok=True)
    spec = plan.spec
    if spec.config:
        copy = directory / "base-config.toml"
        text = Path(spec.config).read_text(encoding="utf-8")
        if copy.exists() and copy.read_text(encoding="utf-8") != text:
            raise TuneError(f"{directory} was tuned with another --config; choose another --output")
        if not copy.exists():
            atomic_write_text(copy, text)
        spec = attrs.evolve(spec, config=str(copy.absolute()))
    plan = attrs.evolve(plan, spec=spec)
    stored_path = directory / DEFINITION_FILE
    definition = plan.definition()
    if stored_path.exists():
        stored = json.loads(stored_path.read_text(encoding="utf-8"))
        started = stored.pop("started_at", "")
        if stored != json.loads(json.dumps(definition)):
            raise TuneError(
                f"{directory} already holds a different search (another backend, model, "
                "space, budget or device); resume it with the same options or choose "
                "another --output"
            )
        return plan, started
    started = datetime.now(UTC).isoformat(timespec="seconds")
    atomic_write_text(stored_path, json.dumps({**definition, "started_at": started}, indent=2) + "\n")
    return plan, started
