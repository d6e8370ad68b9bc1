"""What a Megatron-family launch runs with: rendered settings, the framework's kept values, the shared names.

tprimat renders its settings (:mod:`tprimat.plugins.megatron.settings`); the
framework decides the rest.  For Megatron-LM that is its argument parser's
defaults; for Primus, its experiment file and the module and model configs it
extends (:mod:`tprimat.plugins.amd_primus.configtree`).  Both are recorded
with their real values (:class:`~tprimat.contract.plans.FrameworkSettings`).

:data:`MEGATRON_LM_DEFAULTS` lists the defaults of Megatron-LM's
``pretrain_gpt.py`` for the settings that shape a training step and that
tprimat leaves alone.  They are the values Megatron-LM's own ``parse_args`` and
``validate_args`` produced for the shipped plans (``tools/acceptance``, records
in ``tests/fixtures/acceptance/``), and a test keeps this table equal to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Megatron-LM's values (core 0.15, ``pretrain_gpt.py``) for what tprimat does not render.
MEGATRON_LM_DEFAULTS: dict[str, Any] = {
    "gradient_accumulation_fusion": True,
    "masked_softmax_fusion": True,
    "bias_dropout_fusion": True,
    "calculate_per_token_loss": False,
    "attention_softmax_in_fp32": False,
    "apply_query_key_layer_scaling": False,
    "transformer_impl": "transformer_engine",
    "fp8_param_gather": False,
    "use_precision_aware_optimizer": False,
    "apply_residual_connection_post_layernorm": False,
    "reset_position_ids": False,
    "reset_attention_mask": False,
}


#: Every destination :func:`shared_values` reads.
SHARED_SOURCES: tuple[str, ...] = (
    "eod_mask_loss",
    "norm_epsilon",
    "layernorm_epsilon",
    "init_method_std",
    "hidden_dropout",
    "attention_dropout",
    "bf16",
    "fp8",
    "fp8_recipe",
    "fp8_amax_history_len",
    "fp8_amax_compute_algo",
    "attention_backend",
    "use_turbo_attention",
    "cross_entropy_loss_fusion",
    "cross_entropy_fusion_impl",
    "gradient_accumulation_fusion",
    "apply_rope_fusion",
    "bias_swiglu_fusion",
    "recompute_granularity",
    "use_distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
)


def _precision(values: Mapping[str, Any]) -> str:
    if values.get("fp8"):
        return "fp8"
    return "bf16" if values.get("bf16") else "fp32"


def shared_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The shared vocabulary (:mod:`tprimat.settings.shared`) from Megatron destinations.

    ``values`` are every setting the framework runs with (rendered over kept).  A Primus
    run with ``use_turbo_attention`` computes attention with Primus Turbo's kernel,
    whatever ``attention_backend`` says.
    """
    fp8 = bool(values.get("fp8"))
    fused_ce = values.get("cross_entropy_loss_fusion")
    attention = "primus_turbo" if values.get("use_turbo_attention") else values.get("attention_backend")
    return {
        "loss.eod_mask": values.get("eod_mask_loss"),
        # from core 0.16 the model is built from layernorm_epsilon (Primus's norm_epsilon is then inert)
        "norm.epsilon": values.get("layernorm_epsilon", values.get("norm_epsilon")),
        "init.std": values.get("init_method_std"),
        "dropout.hidden": values.get("hidden_dropout"),
        "dropout.attention": values.get("attention_dropout"),
        "precision.dtype": _precision(values),
        "precision.fp8_format": values.get("fp8") if fp8 else None,
        "precision.fp8_recipe": values.get("fp8_recipe") if fp8 else None,
        "precision.fp8_amax_history_len": values.get("fp8_amax_history_len") if fp8 else None,
        "precision.fp8_amax_compute_algo": values.get("fp8_amax_compute_algo") if fp8 else None,
        "attention.kernel": attention,
        "loss.fused_cross_entropy": values.get("cross_entropy_fusion_impl") if fused_ce else False,
        "grad.accumulation_fusion": values.get("gradient_accumulation_fusion"),
        "kernels.fused_rope": values.get("apply_rope_fusion"),
        "kernels.fused_swiglu": values.get("bias_swiglu_fusion"),
        "recompute": values.get("recompute_granularity") or "none",
        "optimizer.distributed": values.get("use_distributed_optimizer"),
        "overlap.grad_reduce": values.get("overlap_grad_reduce"),
        "overlap.param_gather": values.get("overlap_param_gather"),
    }


def megatron_lm_kept(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Megatron-LM's values for what ``settings`` leaves to it.

    ``validate_args`` turns on fp32 gradient accumulation and all-reduce whenever ``--bf16``
    is given; the rest are the parser's defaults.
    """
    kept = {key: value for key, value in MEGATRON_LM_DEFAULTS.items() if key not in settings}
    kept["accumulate_allreduce_grads_in_fp32"] = bool(settings.get("bf16"))
    return kept
