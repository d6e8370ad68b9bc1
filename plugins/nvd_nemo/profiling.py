"""``nvd_nemo`` profiling: NeMo 2's profiler callbacks, as overrides of the generated recipe script.

NeMo's ``nemo.lightning.pytorch.callbacks.PytorchProfilerCallback(start_step,
end_step, warmup_steps, active_steps, trace_dir)`` starts ``torch.profiler``
at the 0-based global step ``start_step`` and writes
``<trace_dir>/device/rank-<r>.json`` on every rank (it has no rank filter;
tprimat keeps the configured ranks when it collects traces).  For Nsight
Systems, ``NsysCallback(start_step, end_step, ranks)`` opens and closes a CUDA
profiler range over the same steps instead.

The plan's ``overrides`` carry the callback as data under ``"callbacks"``
(``{"target": ..., "kwargs": {...}}``); :func:`recipe_lines` renders the exact
Python lines equivalent to what the generated script (``nemo_pretrain.py``,
``add_callbacks``) does with them: it reads the callbacks from
``nemo_settings.json`` (``"profile"``), imports each target, creates the trace
directory (the callback refuses a missing one) and appends it to
``recipe.trainer.callbacks``.

NeMo's ``global_step`` is 0-based, the parsed records number iterations
``global_step + 1``: ``profiled_iterations`` is in the records' numbering.
"""

from __future__ import annotations

from typing import Any

from tprimat.contract import (
    BenchmarkConfig,
    ConfigError,
    LaunchContext,
    ProfilePlan,
    ProfileWindow,
    check_profile_config,
)

PYTORCH_CALLBACK = "nemo.lightning.pytorch.callbacks.PytorchProfilerCallback"
NSYS_CALLBACK = "nemo.lightning.pytorch.callbacks.NsysCallback"
TRACE_DIR = "torch_profile"  # below the run directory
TRACE_GLOBS = (f"{TRACE_DIR}/device/rank-*.json",)


def nemo_window(config: BenchmarkConfig) -> tuple[int, int, ProfileWindow]:
    """(start_step, end_step, window) for NeMo's profiler callback (0-based global steps).

    The profiler starts at ``start_step = wait`` and stops at
    ``end_step = wait + warmup + active``.
    """
    check_profile_config(config)
    profile = config.profile
    start = profile.wait
    end = start + profile.warmup + profile.active
    if end >= config.benchmark.iterations:
        raise ConfigError(
            f"the profile window ends at step {end} but the run has {config.benchmark.iterations} steps "
            "(0-based): lower profile.wait/warmup/active or raise benchmark.iterations"
        )
    window = ProfileWindow(
        first_recorded=start + profile.warmup,
        last_recorded=end - 1,
        warmup=profile.warmup,
        ranks=tuple(profile.ranks),
    )
    return start, end, window


def profile_plan(context: LaunchContext) -> ProfilePlan:
    start, end, window = nemo_window(context.config)
    callback = {
        "target": PYTORCH_CALLBACK,
        "kwargs": {
            "start_step": start,
            "end_step": end,
            "warmup_steps": context.config.profile.warmup,
            "active_steps": context.config.profile.active,
            "trace_dir": str(context.run_dir / TRACE_DIR),
        },
    }
    return ProfilePlan(
        overrides={"callbacks": [callback], "profile_ranks": list(window.ranks)},
        trace_globs=TRACE_GLOBS,
        profiled_iterations=record_iterations(window.excluded),
    )


def record_iterations(steps: tuple[int, ...]) -> tuple[int, ...]:
    """0-based global steps as the iteration numbers of the parsed records (global_step + 1)."""
    return tuple(step + 1 for step in steps)


def nsys_plan(context: LaunchContext) -> ProfilePlan:
    """A CUDA profiler range over the same steps, for ``nsys --capture-range=cudaProfilerApi``."""
    start, end, window = nemo_window(context.config)
    callback = {
        "target": NSYS_CALLBACK,
        "kwargs": {"start_step": start, "end_step": end, "ranks": list(window.ranks), "gen_shape": False},
    }
    return ProfilePlan(
        overrides={"callbacks": [callback]}, profiled_iterations=record_iterations(window.excluded), capture_range=True
    )


def recipe_lines(plan: ProfilePlan, recipe: str = "recipe") -> list[str]:
    """Python lines that add the plan's callbacks to a NeMo-Run recipe (``recipe.trainer.callbacks``).

    The generated script must already ``import nemo_run as run``.
    """
    lines: list[str] = []
    for callback in plan.overrides.get("callbacks", []):
        module, _, name = callback["target"].rpartition(".")
        kwargs = ", ".join(f"{key}={_literal(value)}" for key, value in callback["kwargs"].items())
        lines.append(f"from {module} import {name}")
        if callback["kwargs"].get("trace_dir"):
            lines.append("import os")
            lines.append(f"os.makedirs({_literal(callback['kwargs']['trace_dir'])}, exist_ok=True)")
        lines.append(f"if {recipe}.trainer.callbacks is None:")
        lines.append(f"    {recipe}.trainer.callbacks = []")
        lines.append(f"{recipe}.trainer.callbacks.append(run.Config({name}, {kwargs}))")
    return lines


def _literal(value: Any) -> str:
    return repr(value)
