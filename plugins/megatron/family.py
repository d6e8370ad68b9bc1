"""What the three Megatron-family backend declarations share (``BackendSpec`` parts)."""

from __future__ import annotations

from tprimat.contract import LaunchOption, WarmupRule

#: Megatron's iteration 1 is never steady state, for Primus and Megatron-LM alike.
WARMUP = WarmupRule(
    min_iterations=1,
    reason="Megatron's iteration 1 includes start-up (since Megatron-LM 0.16 its timers are not reset after it)",
)

#: What ``tprimat tune`` may search on a Megatron-family backend (None: values from the config).
TUNABLES: dict[str, tuple[object, ...] | None] = {
    "training.micro_batch_size": None,
    "training.recompute": ("none", "selective", "full"),
    "parallel.tensor": None,
    "parallel.pipeline": None,
    "parallel.context": None,
    "parallel.distributed_optimizer": (False, True),
    "parallel.overlap_grad_reduce": (False, True),
    "parallel.overlap_param_gather": (False, True),
}

VERSION_OPTION = LaunchOption(
    name="megatron_version",
    help="Megatron-core version to target, e.g. 0.15 (default: read from the checkout, else 0.15)",
)

MEGATRON_PATH_OPTION = LaunchOption(
    name="megatron_path", env="MEGATRON_PATH", kind="path", help="Megatron-LM checkout (holds pretrain_gpt.py)"
)


#: The ``NVTE_*_ATTN`` values megatron-core's ``LanguageModule._set_attention_backend`` asserts
#: (each unset or equal) and then sets, for each ``--attention-backend``.
ATTENTION_ENV: dict[str, dict[str, str]] = {
    "flash": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "0"},
    "fused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "0"},
    "unfused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "1"},
    "auto": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "1"},
}


def attention_env_conflicts(backend: str, env: dict[str, str]) -> list[str]:
    """The ``NVTE_*_ATTN`` variables of ``env`` that megatron-core's rule refuses for ``backend``.

    The rule is checked against megatron-core itself by ``tests/plugins/megatron/test_corecheck.py``;
    here it stops such a plan before any GPU is spent.
    """
    wanted = ATTENTION_ENV.get(backend, {})
    return [f"{name}={env[name]}" for name, value in wanted.items() if name in env and env[name] != value]
