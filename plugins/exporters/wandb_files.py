"""Write one run as a Weights & Biases run: config, tags, history by iteration, summary.

Offline by default: the run is written as local run files
(``<dir>/wandb/offline-run-<time>-<id>/``) without logging in or touching the
network, and ``wandb sync <that folder>`` uploads it later.  ``WANDB_MODE=online``
(with ``wandb login`` done) sends it at once.  W&B's own system monitor, code
and requirements capture are switched off: the run records the benchmark's
machine (from the result), not the machine that exported it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tprimat.contract.exporter import ExportTarget, TrackerRun

DEFAULT_PROJECT = "tprimat"

#: Result statuses that end the W&B run as finished (the others end it with exit code 1: failed).
FINISHED = frozenset({"completed", "partial"})


def export(run: TrackerRun, target: ExportTarget) -> str:
    """Write ``run`` with wandb and return where it went."""
    import wandb

    # As given: wandb's Settings also take "dryrun" and "run", which init()'s typed Literal omits.
    mode: Any = os.environ.get("WANDB_MODE") or "offline"
    directory = Path(target.uri or os.environ.get("WANDB_DIR") or ".")
    directory.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(
        silent=True,
        console="off",
        save_code=False,
        disable_git=True,
        x_disable_stats=True,
        x_disable_meta=True,
        x_save_requirements=False,
    )
    handle = wandb.init(
        project=target.experiment or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
        name=run.name,
        dir=str(directory),
        mode=mode,
        job_type="benchmark",
        config={**run.params, **run.facts},
        tags=list(run.labels),
        settings=settings,
        reinit="create_new",
    )
    try:
        by_step: dict[int, dict[str, float]] = {}
        for name, points in run.series.items():
            for step, value in points:
                by_step.setdefault(step, {})[name] = value
        for step in sorted(by_step):
            handle.log(by_step[step], step=step)
        handle.summary.update(dict(run.summary))
        where = handle.settings.sync_dir
    except BaseException:
        handle.finish(exit_code=1)
        wandb.teardown()
        raise
    handle.finish(exit_code=0 if run.status in FINISHED else 1)
    # wandb keeps a service and its threads after finish(); a process that later forks workers
    # (tprimat parses with forked processes only when no other thread runs) needs them gone.
    wandb.teardown()
    if mode == "offline":
        return f"wandb offline run {handle.id} in {where} (upload with: wandb sync {where})"
    return f"wandb run {handle.id}: {handle.url or where}"
