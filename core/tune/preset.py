"""The tune's answer as a preset file, with the provenance of every trial.

The preset is an ordinary tprimat preset (``[preset]``, ``[config]``) that
names the device, backend and model it was found for, so
``benchmark.methodology = "tuned"`` picks it for exactly those (see
:mod:`tprimat.settings.methodology`).  The ``[tune]`` table records how it was found:
dates, software versions, the search space, the budget, the decision and
every trial's result; tprimat itself does not read it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tprimat import __version__
from tprimat.atomic import atomic_write_text
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.tomltext import toml_document
from tprimat.tune.search import Outcome, TuneSpec


def preset_name(device: str | None, backend: str, model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", (device or "unknown-device").lower()).strip("-")
    return f"tuned-{slug}-{backend}-{model}"


def render_preset(
    *,
    spec: TuneSpec,
    outcome: Outcome,
    base: BenchmarkConfig,
    device: str | None,
    platform: str,
    space: dict[str, tuple[Any, ...]],
    started_at: str,
    notes: list[str],
    pruned: list[dict[str, Any]],
) -> str:
    """The preset file's text."""
    assert outcome.winner is not None
    name = preset_name(device, spec.backend, spec.model)
    finished = datetime.now(UTC).isoformat(timespec="seconds")
    counted = sum(1 for t in outcome.trials if t.status != "pending")
    comments = [
        f"Written by `tprimat tune` on {finished}: the configuration of {spec.model} on",
        f"{spec.backend} that measured fastest on {device or 'this device'}, and how it was found.",
        'benchmark.methodology = "tuned" applies [config] for this device, backend and model.',
    ]
    preset = {
        "name": name,
        "devices": [device or "unknown"],
        "platform": platform,
        "backend": spec.backend,
        "model": spec.model,
        "source": f"tprimat tune {__version__}: {counted} trial run(s), successive halving over "
        f"{len(spec.candidates)} candidate(s), budget {spec.budget}; "
        f"{outcome.decision}",
    }
    software: dict[str, Any] = {}
    for trial in outcome.trials:
        if trial.candidate == outcome.winner.id and trial.software:
            software = trial.software
    tune = {
        "started_at": started_at,
        "finished_at": finished,
        "tprimat_version": __version__,
        "precision": spec.precision,
        "base_overrides": list(spec.overrides),
        "budget": str(spec.budget),
        "budget_spent": outcome.budget_spent,
        "trial_seconds": round(outcome.seconds, 1),
        "min_iterations": spec.min_iterations,
        "eta": spec.eta,
        "finalists": spec.finalists,
        "final_repeats": spec.final_repeats,
        "winner": outcome.winner.id,
        "winner_settings": outcome.winner.as_dict(),
        "decision": outcome.decision,
        "notes": notes,
        "software": software,
        "space": {k: list(v) for k, v in space.items()},
        "statistics": {
            cid: {k: v for k, v in stats.items() if k != "ratio_to"} for cid, stats in outcome.statistics.items()
        },
        "candidates": [
            {
                "id": candidate.id,
                "settings": candidate.as_dict(),
                "status": outcome.status.get(candidate.id, "not run"),
            }
            for candidate in spec.candidates
        ],
        "pruned": list(pruned),
        "trials": [
            {
                "id": trial.id,
                "candidate": trial.candidate,
                "round": trial.round,
                "iterations": trial.iterations,
                "repeat": trial.repeat,
                "status": trial.status,
                "tokens_per_s_per_gpu": trial.tokens_per_s_per_gpu,
                "started_at": trial.started_at,
                "finished_at": trial.finished_at,
                "evidence": trial.evidence,
            }
            for trial in outcome.trials
        ],
    }
    data = {
        "preset": preset,
        "config": outcome.winner.config_settings(),  # every knob, so a changed base cannot shift it
        "backends": {backend: {"overrides": values} for backend, values in outcome.winner.switches().items()},
        "tune": tune,
    }
    return toml_document(data, comments=comments)


def write_preset(text: str, folder: Path, name: str) -> Path:
    """Write the preset atomically as ``folder/<name>.toml`` (replacing an earlier tune's)."""
    return atomic_write_text(folder / f"{name}.toml", text)
