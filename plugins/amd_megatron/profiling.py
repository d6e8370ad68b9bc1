"""``amd_megatron`` profiling: ROCm Megatron-LM's torch-profiler flags over the config's window."""

from __future__ import annotations

from tprimat.contract.plans import LaunchContext, ProfilePlan
from tprimat.trace.window import MEGATRON_TRACE_GLOBS, megatron_profile_args


def profile_plan(context: LaunchContext) -> ProfilePlan:
    """``--profile --use-pytorch-profiler --profile-step-start S --profile-step-end E --profile-ranks R…``."""
    args, window = megatron_profile_args(context.config, str(context.run_dir / "tensorboard"))
    return ProfilePlan(args=args, trace_globs=MEGATRON_TRACE_GLOBS, profiled_iterations=window.excluded)

