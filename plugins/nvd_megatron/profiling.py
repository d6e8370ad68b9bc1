"""``nvd_megatron`` profiling: Megatron-LM's own torch-profiler flags over the config's window."""

from __future__ import annotations

from tprimat.contract.plans import LaunchContext, ProfilePlan
from tprimat.trace.window import MEGATRON_TRACE_GLOBS, megatron_profile_args


def profile_plan(context: LaunchContext) -> ProfilePlan:
    """``--profile --use-pytorch-profiler --profile-step-start S --profile-step-end E --profile-ranks R…``."""
    args, window = megatron_profile_args(context.config, str(context.run_dir / "tensorboard"))
    return ProfilePlan(args=args, trace_globs=MEGATRON_TRACE_GLOBS, profiled_iterations=window.excluded)


def nsys_plan(context: LaunchContext) -> ProfilePlan:
    """The same window as a CUDA profiler range, for ``nsys --capture-range=cudaProfilerApi``."""
    args, window = megatron_profile_args(context.config, "", pytorch_profiler=False)
    return ProfilePlan(args=args, profiled_iterations=window.excluded, capture_range=True)
