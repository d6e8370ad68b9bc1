"""What the three Megatron-family backend declarations share (``BackendSpec`` parts)."""

from __future__ import annotations

from tprimat.contract import LaunchOption, WarmupRule

#: Megatron's iteration 1 is never steady state, for Primus and Megatron-LM alike.
WARMUP = WarmupRule(
    min_iterations=1,
    reason="Megatron's iteration 1 includes start-up (since Megatron-LM 0.16 its timers are not reset after it)",
)

VERSION_OPTION = LaunchOption(
    name="megatron_version",
    help="Megatron-core version to target, e.g. 0.15 (default: read from the checkout, else 0.15)",
)

MEGATRON_PATH_OPTION = LaunchOption(
    name="megatron_path", env="MEGATRON_PATH", kind="path", help="Megatron-LM checkout (holds pretrain_gpt.py)"
)
