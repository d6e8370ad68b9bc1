"""Model FLOPs per token: Megatron-LM's formula, the one formula tprimat uses.

Every backend's TFLOP/s and MFU come from here, never from a framework's own
printout, so that AMD and NVIDIA runs are divided by the same numerator.

For a dense decoder with ``L`` layers, hidden size ``h``, FFN size ``f``,
``a`` attention heads of dimension ``d``, ``g`` KV groups, sequence length
``s`` and padded vocabulary ``V``, the training FLOPs per token
(forward + backward, no recomputation) are::

    12 · L · h² · [ (1 + g/a + s/(2h)) · (d·a/h)      attention (QKV, scores/values, output)
                   + (f/h) · 3/2                        SwiGLU MLP (3 GEMMs instead of 2)
                   + V / (2·L·h) ]                      logits

The ``s/(2h)`` term is the causal attention term: only half of the score
matrix is computed.  Without the halving it is ``s/h``.  The factor 12 is
3 (forward, weight-gradient and data-gradient GEMMs) × 2 (two stacked GEMMs)
× 2 (a multiply-add is two FLOPs).  See ``docs/metrics.md``.
"""

from __future__ import annotations

from tprimat.settings.models import ModelSpec

#: Recorded in every result next to the figure it produced.
FLOPS_FORMULA = "megatron: 12*L*h^2*[(1+g/a+s/(2h))*(d*a/h) + 1.5*f/h + V/(2*L*h)] per token"
FLOPS_FORMULA_FULL_ATTENTION = (
    "megatron (no causal halving): 12*L*h^2*[(1+g/a+s/h)*(d*a/h) + 1.5*f/h + V/(2*L*h)] per token"
)


def flops_per_token(
    model: ModelSpec,
    seq_length: int,
    *,
    tensor_parallel: int = 1,
    causal: bool = True,
) -> float:
    """Training FLOPs per token of ``model`` at ``seq_length`` (Megatron's formula)."""
    if seq_length <= 0:
        raise ValueError(f"seq_length must be positive, got {seq_length}")
    h = model.hidden_size
    layers = model.num_layers
    heads = model.num_attention_heads
    projection_ratio = model.kv_channels * heads / h
    score_term = seq_length / h / (2 if causal else 1)
    attention = (1 + model.num_query_groups / heads + score_term) * projection_ratio
    mlp = (model.ffn_hidden_size / h) * (1.5 if model.swiglu else 1.0)
    logits = model.padded_vocab_size(tensor_parallel) / (2 * layers * h)
    return 12 * layers * h * h * (attention + mlp + logits)


def formula_name(causal: bool = True) -> str:
    """The formula string recorded next to a FLOPs figure."""
    return FLOPS_FORMULA if causal else FLOPS_FORMULA_FULL_ATTENTION
