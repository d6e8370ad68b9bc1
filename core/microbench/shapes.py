"""The model's own GEMM shapes, and a sweep around them.

Every linear layer ``y = x · Wᵀ`` (``x`` is ``[tokens, in]``, ``W`` is
``[out, in]``) runs three GEMMs per training step:

==============  ===================  ============================  =================
pass            expression            ``m × n × k``                  operand layout
==============  ===================  ============================  =================
``fwd``         ``y = x · Wᵀ``        ``tokens × out × in``          ``x @ w.T``
``bwd_data``    ``dx = dy · W``       ``tokens × in × out``          ``dy @ w``
``bwd_weight``  ``dW = dyᵀ · x``      ``out × in × tokens``          ``dy.T @ x``
==============  ===================  ============================  =================

With tensor parallelism ``t`` (Megatron layout) the column-parallel layers
(QKV, MLP up/gate, logits) split ``out`` by ``t`` and the row-parallel ones
(attention output, MLP down) split ``in`` by ``t``.  ``tokens`` is micro-batch
× sequence length (sequence parallelism gathers the full sequence before
these GEMMs, so it does not change them).  The SwiGLU up and gate projections
are one fused GEMM of width ``2·ffn/t``, as Megatron-LM, Primus and NeMo run
them.  The logits GEMM uses the vocabulary padded the way Megatron pads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from tprimat.microbench.formulas import gemm_flops
from tprimat.settings.models import ModelSpec

GemmPass = Literal["fwd", "bwd_data", "bwd_weight"]
GEMM_PASSES: tuple[GemmPass, ...] = ("fwd", "bwd_data", "bwd_weight")

#: The layers of one transformer block plus the output layer, in execution order.
LAYER_NAMES = ("qkv", "attn_out", "mlp_up_gate", "mlp_down", "logits")

#: How the operands of each pass are stored (what the kernel sees).
LAYOUTS: dict[str, str] = {"fwd": "x @ w.T", "bwd_data": "dy @ w", "bwd_weight": "dy.T @ x"}


@attrs.frozen(kw_only=True)
class GemmShape:
    """One GEMM: ``[m, k] × [k, n]``, named by the layer and pass it comes from."""

    name: str  # a LAYER_NAMES entry, or "sweep"
    pass_: GemmPass
    m: int
    n: int
    k: int
    group: Literal["model", "sweep"] = "model"

    @property
    def flops(self) -> int:
        return gemm_flops(self.m, self.n, self.k)

    @property
    def layout(self) -> str:
        return LAYOUTS[self.pass_]

    def key(self) -> tuple[int, int, int, str]:
        return (self.m, self.n, self.k, self.pass_)


class ShapeError(ValueError):
    """A model and parallel layout that do not fit together."""


def _check_tp(model: ModelSpec, tensor_parallel: int) -> None:
    if tensor_parallel <= 0:
        raise ShapeError(f"tensor parallel size must be positive, got {tensor_parallel}")
    for label, value in (
        ("attention heads", model.num_attention_heads),
        ("query groups", model.num_query_groups),
        ("FFN hidden size", model.ffn_hidden_size),
    ):
        if value % tensor_parallel:
            raise ShapeError(
                f"{model.name}: {label} ({value}) are not divisible by tensor parallel size {tensor_parallel}"
            )


def layer_dimensions(model: ModelSpec, tensor_parallel: int = 1) -> dict[str, tuple[int, int]]:
    """``(out, in)`` of each linear layer on one tensor-parallel rank."""
    _check_tp(model, tensor_parallel)
    t = tensor_parallel
    h, d = model.hidden_size, model.kv_channels
    a, g = model.num_attention_heads, model.num_query_groups
    mlp_width = (2 if model.swiglu else 1) * model.ffn_hidden_size
    return {
        "qkv": ((a + 2 * g) * d // t, h),
        "attn_out": (h, a * d // t),
        "mlp_up_gate": (mlp_width // t, h),
        "mlp_down": (h, model.ffn_hidden_size // t),
        "logits": (model.padded_vocab_size(t) // t, h),
    }


def model_gemm_shapes(
    model: ModelSpec,
    *,
    seq_length: int,
    micro_batch_size: int = 1,
    tensor_parallel: int = 1,
    passes: Iterable[GemmPass] = GEMM_PASSES,
) -> list[GemmShape]:
    """The GEMMs one rank runs per layer (and for the logits) in a training step."""
    if seq_length <= 0 or micro_batch_size <= 0:
        raise ShapeError("sequence length and micro-batch size must be positive")
    tokens = micro_batch_size * seq_length
    wanted = tuple(passes)
    shapes = []
    for name, (out, inp) in layer_dimensions(model, tensor_parallel).items():
        for pass_ in wanted:
            if pass_ == "fwd":
                m, n, k = tokens, out, inp
            elif pass_ == "bwd_data":
                m, n, k = tokens, inp, out
            elif pass_ == "bwd_weight":
                m, n, k = out, inp, tokens
            else:
                raise ShapeError(f"unknown GEMM pass {pass_!r}")
            shapes.append(GemmShape(name=name, pass_=pass_, m=m, n=n, k=k))
    return shapes


def sweep_shapes(base: Iterable[GemmShape], *, step: int = 256, radius: int = 2) -> list[GemmShape]:
    """Forward-layout shapes around each base shape, to find the best achievable matmul.

    For every distinct base ``(m, n, k)`` the sweep tries ``n + i·step`` and
    ``k + j·step`` for ``i, j`` in ``[-radius, radius]`` (positive sizes only),
    keeping ``m``.  Base shapes themselves are not repeated.  ``radius=0``
    gives no sweep.
    """
    if step <= 0 or radius < 0:
        raise ShapeError(f"sweep step must be positive and radius non-negative ({step}, {radius})")
    base_list = list(base)
    seen = {(s.m, s.n, s.k) for s in base_list if s.pass_ == "fwd"}
    sweep: list[GemmShape] = []
    for shape in base_list:
        for i in range(-radius, radius + 1):
            for j in range(-radius, radius + 1):
                n, k = shape.n + i * step, shape.k + j * step
                if n <= 0 or k <= 0 or (shape.m, n, k) in seen:
                    continue
                seen.add((shape.m, n, k))
                sweep.append(GemmShape(name="sweep", pass_="fwd", m=shape.m, n=n, k=k, group="sweep"))
    return sweep
