"""One vocabulary for the framework settings that decide what a training step computes, or how fast.

Megatron-LM, Primus, NeMo and the torch backend each spell the same choice
differently (``eod_mask_loss`` in Megatron-LM's arguments and Primus's
experiment, the data module's ``eod_mask_loss`` in NeMo, ``norm_epsilon`` vs
``layernorm_epsilon``).  Every backend reports, for every launch, the value
of each setting below under its shared name
(:attr:`tprimat.contract.plans.FrameworkSettings.shared`), so two runs can be
compared setting by setting whatever their framework.

Each setting is one of two kinds:

* ``math``: it changes what is computed (the loss, the parameters' update, the
  numbers' format).  An ``iso`` launch makes it equal on every backend, and
  ``tprimat compare`` refuses runs that differ in one, naming it.
* ``speed``: the same mathematics, computed another way (a fused kernel, a
  different attention implementation, recomputation, sharded optimizer state,
  overlapped communication).  Runs may differ; the report shows the values
  and a tuned run records each change as a deviation.

``docs/backends.md`` holds this table with the framework documentation each
decision rests on; a test keeps the two the same.
"""

from __future__ import annotations

from typing import Literal

import attrs

Kind = Literal["math", "speed"]


@attrs.frozen(kw_only=True)
class SharedSetting:
    """One setting of the shared vocabulary."""

    name: str
    kind: Kind
    meaning: str
    #: The framework documentation the kind rests on.
    reference: str


def _table(*settings: SharedSetting) -> dict[str, SharedSetting]:
    return {setting.name: setting for setting in settings}


#: Every shared setting, in the order reports list them.
SHARED_SETTINGS: dict[str, SharedSetting] = _table(
    SharedSetting(
        name="loss.eod_mask",
        kind="math",
        meaning="tokens at document boundaries (EOD) are left out of the loss",
        reference="Megatron-LM arguments.py: --eod-mask-loss 'Mask loss for the end of document tokens'",
    ),
    SharedSetting(
        name="norm.epsilon",
        kind="math",
        meaning="epsilon added inside every RMSNorm",
        reference="Megatron-core TransformerConfig.layernorm_epsilon; Hugging Face rms_norm_eps",
    ),
    SharedSetting(
        name="init.std",
        kind="math",
        meaning="standard deviation of the normal initialisation of the weights",
        reference="Megatron-core TransformerConfig.init_method_std",
    ),
    SharedSetting(
        name="dropout.hidden",
        kind="math",
        meaning="dropout probability after attention and MLP",
        reference="Megatron-core TransformerConfig.hidden_dropout",
    ),
    SharedSetting(
        name="dropout.attention",
        kind="math",
        meaning="dropout probability on the attention weights",
        reference="Megatron-core TransformerConfig.attention_dropout",
    ),
    SharedSetting(
        name="precision.dtype",
        kind="math",
        meaning="number format of the matrix multiplications: bf16, fp8 (with bf16 elsewhere) or fp32",
        reference="Megatron-LM --bf16/--fp8-format; NeMo MegatronMixedPrecision",
    ),
    SharedSetting(
        name="precision.fp8_format",
        kind="math",
        meaning="FP8 encoding (e4m3 or hybrid), null without FP8",
        reference="Transformer Engine recipe.Format; Megatron-core TransformerConfig.fp8",
    ),
    SharedSetting(
        name="precision.fp8_recipe",
        kind="math",
        meaning="FP8 scaling recipe (delayed, tensorwise, mxfp8, blockwise), null without FP8",
        reference="Megatron-core TransformerConfig.fp8_recipe",
    ),
    SharedSetting(
        name="precision.fp8_amax_history_len",
        kind="math",
        meaning="delayed scaling: how many steps of amax history set each scale",
        reference="Transformer Engine DelayedScaling.amax_history_len",
    ),
    SharedSetting(
        name="precision.fp8_amax_compute_algo",
        kind="math",
        meaning="delayed scaling: how the scale is taken from the history (max, most_recent)",
        reference="Transformer Engine DelayedScaling.amax_compute_algo",
    ),
    SharedSetting(
        name="attention.kernel",
        kind="speed",
        meaning="attention implementation family (flash, fused, unfused, auto, ...): exact attention every way",
        reference="Megatron-core AttnBackend; Transformer Engine DotProductAttention backends",
    ),
    SharedSetting(
        name="loss.fused_cross_entropy",
        kind="speed",
        meaning="the output layer's cross-entropy computed by one fused kernel",
        reference="Megatron-core TransformerConfig.cross_entropy_loss_fusion",
    ),
    SharedSetting(
        name="grad.accumulation_fusion",
        kind="speed",
        meaning="weight gradients accumulated into fp32 main_grad inside the GEMM instead of after it",
        reference="Megatron-core ModelParallelConfig.gradient_accumulation_fusion",
    ),
    SharedSetting(
        name="kernels.fused_rope",
        kind="speed",
        meaning="rotary position embedding applied by a fused kernel",
        reference="Megatron-core TransformerConfig.apply_rope_fusion",
    ),
    SharedSetting(
        name="kernels.fused_swiglu",
        kind="speed",
        meaning="bias and SwiGLU activation applied by a fused kernel",
        reference="Megatron-core TransformerConfig.bias_activation_fusion",
    ),
    SharedSetting(
        name="recompute",
        kind="speed",
        meaning="activation recomputation: none, selective (attention core) or full",
        reference="Megatron-core TransformerConfig.recompute_granularity",
    ),
    SharedSetting(
        name="optimizer.distributed",
        kind="speed",
        meaning="optimizer state sharded across data-parallel ranks",
        reference="Megatron-core DistributedDataParallelConfig.use_distributed_optimizer",
    ),
    SharedSetting(
        name="overlap.grad_reduce",
        kind="speed",
        meaning="gradient reduction overlapped with the backward pass",
        reference="Megatron-core DistributedDataParallelConfig.overlap_grad_reduce",
    ),
    SharedSetting(
        name="overlap.param_gather",
        kind="speed",
        meaning="parameter all-gather overlapped with the forward pass",
        reference="Megatron-core DistributedDataParallelConfig.overlap_param_gather",
    ),
)

#: The names of the settings that change what a step computes.
MATH_SETTINGS: tuple[str, ...] = tuple(name for name, s in SHARED_SETTINGS.items() if s.kind == "math")


def unknown_names(values: dict[str, object]) -> list[str]:
    """Names in ``values`` that are not in the vocabulary (a backend's mistake)."""
    return sorted(set(values) - set(SHARED_SETTINGS))
