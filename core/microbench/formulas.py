"""FLOP counts of the measured kernels, one documented formula each.

GEMM
    ``C[m, n] = A[m, k] · B[k, n]`` performs ``m·n·k`` multiply-adds, that is
    ``2·m·n·k`` FLOPs, whatever the operand layout.  A bias add (``m·n``) is
    not counted: the figure is the matmul's work, so that ``F.linear`` with a
    bias and ``torch.matmul`` are divided by the same numerator.

Attention (one head, sequence length ``s``, head dimension ``d``)
    The forward pass computes the scores ``Q·Kᵀ`` (``2·s·s·d`` FLOPs) and the
    weighted values ``P·V`` (``2·s·s·d``): ``4·s²·d`` for full attention,
    that is ``4·d`` FLOPs per attended (query, key) pair.  Softmax, scaling
    and masking are not counted.

    attended pairs per head
        full            ``s²``
        causal          ``s²/2``            (the usual convention: "causal counts half")
        sliding window  ``s·w − w²/2``      (causal band of ``w`` keys, ``w = min(window, s)``)

    The exact counts are ``s(s+1)/2`` and ``s·w − w²/2 + w/2``; both
    conventions drop half of the diagonal, so a window as long as the
    sequence gives exactly the causal figure.

    The backward pass is counted as twice the forward (``dV = Pᵀ·dO``,
    ``dP = dO·Vᵀ``, ``dQ = dS·K``, ``dK = dSᵀ·Q``: four products).  Kernels
    that recompute ``Q·Kᵀ`` in the backward (FlashAttention) do a fifth
    product; it is not counted, because it is an implementation choice, not
    work the model needs.  (FlashAttention's own benchmarks count it: their
    backward TFLOP/s are 1.25× the figure tprimat reports for the same time.)

    With grouped-query attention the FLOPs depend on the number of query
    heads only; the KV groups change memory traffic, not arithmetic.
"""

from __future__ import annotations

from typing import Literal

AttentionVariant = Literal["causal", "full", "sliding"]
ATTENTION_VARIANTS: tuple[AttentionVariant, ...] = ("causal", "full", "sliding")

#: Recorded next to every figure produced with these formulas.
GEMM_FORMULA = "2*m*n*k"
ATTENTION_FORMULA = (
    "fwd = 4*b*heads*d*pairs; pairs: full s^2, causal s^2/2, sliding s*w - w^2/2 (w=min(window,s)); bwd = 2*fwd"
)


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an ``[m, k] × [k, n]`` matrix product: ``2·m·n·k``."""
    for name, value in (("m", m), ("n", n), ("k", k)):
        if value <= 0:
            raise ValueError(f"GEMM dimension {name} must be positive, got {value}")
    return 2 * m * n * k


def effective_window(seq_length: int, window: int | None) -> int:
    """The sliding window actually applied: ``min(window, seq_length)``."""
    if window is None or window <= 0:
        raise ValueError(f"sliding-window attention needs a positive window, got {window}")
    return min(window, seq_length)


def attended_pairs(seq_length: int, variant: AttentionVariant, window: int | None = None) -> float:
    """(query, key) pairs one head attends to, by the convention in the module docstring."""
    if seq_length <= 0:
        raise ValueError(f"seq_length must be positive, got {seq_length}")
    s = seq_length
    if variant == "full":
        return float(s * s)
    if variant == "causal":
        return s * s / 2
    if variant == "sliding":
        w = effective_window(s, window)
        return s * w - w * w / 2
    known = ", ".join(ATTENTION_VARIANTS)
    raise ValueError(f"unknown attention variant {variant!r}; known: {known}")


def attention_flops(
    *,
    batch: int,
    heads: int,
    seq_length: int,
    head_dim: int,
    variant: AttentionVariant,
    window: int | None = None,
    direction: Literal["fwd", "bwd", "fwd+bwd"] = "fwd",
) -> float:
    """FLOPs of scaled-dot-product attention with ``heads`` query heads (module docstring)."""
    forward = 4.0 * batch * heads * head_dim * attended_pairs(seq_length, variant, window)
    if direction == "fwd":
        return forward
    if direction == "bwd":
        return 2.0 * forward
    if direction == "fwd+bwd":
        return 3.0 * forward
    raise ValueError(f"unknown direction {direction!r}; known: fwd, bwd, fwd+bwd")


def tflops(flops: float, seconds: float | None) -> float | None:
    """``flops / seconds / 1e12``, or None when there is no positive time."""
    if seconds is None or seconds <= 0:
        return None
    return flops / seconds / 1e12
