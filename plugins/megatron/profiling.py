"""Profiling for the Megatron family: the config's window as Megatron-LM's own profiler settings.

Megatron-LM (and Primus, which runs its training loop) numbers iterations
from 1 as the log prints them and profiles ``profile_step_start`` …
``profile_step_end - 1``, warming the profiler up during iteration
``profile_step_start - 1``.  tprimat sets ``S = wait + warmup + 1`` and
``E = S + active``: with the defaults (wait 2, warmup 1, active 2) it warms up
in 3, records 4 and 5 and writes the trace during 6, so 3 … 6 are left out of
the statistics.  Megatron's profiler always warms up for exactly one iteration.

The settings are Megatron destinations (:mod:`tprimat.plugins.megatron.settings`),
rendered as flags for ``pretrain_gpt.py``; Primus adds its own keys on top
(``tprimat.plugins.amd_primus.profiling``).
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
from tprimat.plugins.megatron.settings import to_argv

#: Where Megatron-LM's torch profiler writes, relative to the run directory (tensorboard dir = run_dir/tensorboard):
#: older Megatron writes traces into the tensorboard dir, newer into <tensorboard dir>/../torch_profile.
TRACE_GLOBS = ("tensorboard/*.pt.trace.json", "tensorboard/*.pt.trace.json.gz", "torch_profile/rank-*.json.gz")


def megatron_window(config: BenchmarkConfig) -> tuple[int, int, ProfileWindow]:
    """(profile_step_start, profile_step_end, window) for Megatron-LM and Primus (1-based iterations)."""
    check_profile_config(config)
    profile = config.profile
    start = profile.wait + max(profile.warmup, 1) + 1
    end = start + profile.active
    if end > config.benchmark.iterations:
        raise ConfigError(
            f"the profile window ends at iteration {end} but the run has {config.benchmark.iterations} "
            "iterations: lower profile.wait/warmup/active or raise benchmark.iterations"
        )
    window = ProfileWindow(first_recorded=start, last_recorded=end - 1, warmup=1, ranks=tuple(profile.ranks))
    return start, end, window


def window_settings(
    config: BenchmarkConfig, *, pytorch_profiler: bool = True, tensorboard_dir: str | None = None
) -> tuple[dict[str, Any], ProfileWindow]:
    """The profiler's Megatron destinations for the config's window, and the window.

    With ``pytorch_profiler=False`` Megatron opens and closes a CUDA profiler
    range (``cudaProfilerStart``/``Stop``) around the same iterations instead:
    that is what ``nsys --capture-range=cudaProfilerApi`` records.
    """
    start, end, window = megatron_window(config)
    settings: dict[str, Any] = {
        "profile": True,
        "use_pytorch_profiler": pytorch_profiler,
        "profile_step_start": start,
        "profile_step_end": end,
        "profile_ranks": list(window.ranks),
    }
    if tensorboard_dir is not None:
        settings["tensorboard_dir"] = tensorboard_dir
    return settings, window


def profile_plan(context: LaunchContext) -> ProfilePlan:
    """``--profile --use-pytorch-profiler --profile-step-start S --profile-step-end E --profile-ranks R…``."""
    settings, window = window_settings(context.config, tensorboard_dir=str(context.run_dir / "tensorboard"))
    return ProfilePlan(args=tuple(to_argv(settings)), trace_globs=TRACE_GLOBS, profiled_iterations=window.excluded)


def nsys_plan(context: LaunchContext) -> ProfilePlan:
    """The same window as a CUDA profiler range, for ``nsys --capture-range=cudaProfilerApi``."""
    settings, window = window_settings(context.config, pytorch_profiler=False)
    return ProfilePlan(args=tuple(to_argv(settings)), profiled_iterations=window.excluded, capture_range=True)
