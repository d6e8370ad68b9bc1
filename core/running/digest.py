"""A plan's digest: one hash of what a backend hands its framework, the key of its acceptance record.

Two launches with the same digest give the framework the same settings and the
same environment, wherever and whenever they are planned: the run directory and
run id, which every launch has its own, are replaced by placeholders, and
``PYTHONPATH`` (where the framework checkout is) is left out.  The records of
what Megatron-LM, Primus and NeMo accepted (``tests/fixtures/acceptance/``,
made by ``tools/acceptance/``) are keyed by it, and the dry run and the result
show it, so a result can be traced to the check its plan passed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tprimat.contract.plans import LaunchPlan

#: Environment variables that say where things are, not how the framework runs.
LOCATION_ENV = frozenset({"PYTHONPATH", "EXP"})


def _placeholders(value: Any, replace: list[tuple[str, str]]) -> Any:
    if isinstance(value, dict):
        return {str(k): _placeholders(v, replace) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_placeholders(v, replace) for v in value]
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        for found, placeholder in replace:
            value = value.replace(found, placeholder)
    return value


def plan_inputs(backend: str, plan: LaunchPlan, *, run_dir: Path, run_id: str) -> dict[str, Any]:
    """What the digest covers: the backend, its rendered framework settings and the environment."""
    replace = [(str(run_dir), "<run>"), (run_id, "<run-id>")]
    rendered = plan.framework.rendered if plan.framework is not None else {"argv": list(plan.argv)}
    env = {k: v for k, v in plan.env.items() if k not in LOCATION_ENV}
    return _placeholders({"backend": backend, "rendered": rendered, "env": env}, replace)


def plan_digest(backend: str, plan: LaunchPlan, *, run_dir: Path, run_id: str) -> str:
    """``sha256:`` and the first 16 hex digits of the canonical JSON of :func:`plan_inputs`."""
    canonical = json.dumps(
        plan_inputs(backend, plan, run_dir=run_dir, run_id=run_id), sort_keys=True, separators=(",", ":"), default=str
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]
