"""``amd_primus`` profiling: the Megatron window plus Primus's own profiler keys, as experiment overrides.

Primus runs Megatron-LM's training loop with its own ``torch.profiler``
settings: with ``profile`` and ``use_pytorch_profiler`` set, it records
``profile_step_start`` … ``profile_step_end - 1`` on ``profile_ranks`` and
writes ``<exp_root>/tensorboard/primus-megatron-exp[<name>]-rank[<r>].<ts>.pt.trace.json.gz``
(Primus enables TensorBoard by itself when ``profile`` is set; it is set
explicitly here as well).  Shapes and Python stacks are off, as in
Megatron-LM's defaults, so that the profiler costs the same on every backend.
"""

from __future__ import annotations

from typing import Any

from tprimat.contract import LaunchContext, ProfilePlan
from tprimat.plugins.megatron.profiling import window_settings
from tprimat.plugins.megatron.settings import to_overrides

#: The experiment's tensorboard/ folder, wherever the launch puts the Primus workspace below the run directory.
TRACE_GLOBS = ("**/tensorboard/*.pt.trace.json.gz", "**/tensorboard/*.pt.trace.json")
#: Primus's own profiler keys (not Megatron-LM arguments).
PRIMUS_PROFILER = {
    "disable_tensorboard": False,
    "torch_profiler_use_gzip": True,
    "torch_profiler_record_shapes": False,
    "torch_profiler_with_stack": False,
}


def profile_overrides(context: LaunchContext) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The Primus module-config keys for the config's profile window, and the iterations it disturbs."""
    settings, window = window_settings(context.config)
    return {**to_overrides(settings), **PRIMUS_PROFILER}, window.excluded


def profile_plan(context: LaunchContext) -> ProfilePlan:
    overrides, excluded = profile_overrides(context)
    return ProfilePlan(overrides=overrides, trace_globs=TRACE_GLOBS, profiled_iterations=excluded)
