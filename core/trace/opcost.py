"""FLOPs and bytes of one PyTorch operator call, from the shapes and dtypes the profiler recorded.

A trace collected with ``record_shapes=True`` gives every CPU operator its
``Input Dims`` (one shape per input, a list of shapes for a tensor list), its
``Input type`` (the dtype of each tensor input, or ``Scalar``, ``TensorList``
…) and, in recent PyTorch, its ``Concrete Inputs`` (the values of scalar
arguments as text: ``"True"``, ``"[-1]"``, ``"0.125"``).  From these, each call of
a known operator is given one documented cost (``docs/traces.md``, "Per-operator
roofline"):

GEMM (``aten::mm``, ``addmm``, ``_addmm_activation``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``, ``_scaled_mm``)
    FLOPs ``2·M·N·K × batch`` (:func:`tprimat.microbench.formulas.gemm_flops`); a bias or
    ``beta·C`` add is not counted.  ``linear(x, W)``: ``M`` = the product of ``x``'s
    leading dimensions, ``K`` = its last, ``N`` = ``W``'s first.  ``matmul``
    follows ``torch.matmul``'s broadcasting (a 1-D operand counts as one row or column).

Attention (SDPA and its flash / memory-efficient / cuDNN forms, ``_flash_attention_*``,
``_efficient_attention_*``, flash-attn's ``flash_attn::_flash_attn_forward/backward``)
    forward FLOPs ``2·(b·h)·pairs·(d_qk + d_v)``, that is ``4·b·h·d·pairs`` when the query and
    value head dimensions agree (the formula of :mod:`tprimat.microbench.formulas`); pairs per
    head: ``s_q·s_k`` without a mask, ``s²/2`` causal ("causal counts half"), ``s·w − w²/2``
    for a causal window of ``w`` keys; backward ``2 ×`` forward.  ``h`` counts query heads
    (grouped-query attention changes bytes, not FLOPs).  An explicit mask counts as full
    attention (the kernel computes every score).  Bytes: forward reads Q, K, V and writes O;
    backward reads Q, K, V, O, dO and writes dQ, dK, dV.

Normalisation, softmax, element-wise and reductions
    bytes only (no FLOPs): every tensor input read once, the output written once.  The output
    is shaped like the input (normalisation, softmax; the backward of a normalisation also
    writes the gradients of its weight and bias), the broadcast of the tensor inputs
    (element-wise; in-place operators write their first input; ``copy_`` reads its source
    and writes its destination; ``fill_``/``zero_`` only write), or the input less the
    reduced dimensions (reductions, from the recorded ``dim``).  Small outputs that no
    input records (saved statistics, indices) are not counted; strides, broadcast re-reads
    and caches are not modelled.

An operator outside these tables is "unknown op"; a known one whose cost the
recorded arguments do not determine (no shapes recorded, tensor-list dtypes,
variable-length attention, an unrecorded ``is_causal`` …) carries the reason.
Nothing is guessed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from tprimat.microbench.formulas import attended_pairs, gemm_flops

#: Bytes per element of each tensor dtype as the profiler writes it in ``Input type``.
DTYPE_BYTES: dict[str, float] = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::Float4_e2m1fn_x2": 1,  # two 4-bit values per element
    "long int": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "unsigned int": 4,
    "unsigned long": 8,
    "c10::complex<double>": 16,
    "c10::complex<float>": 8,
    "c10::complex<c10::Half>": 4,
}

#: Short dtype names for tables.
DTYPE_SHORT: dict[str, str] = {
    "double": "fp64",
    "float": "fp32",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8e4m3",
    "c10::Float8_e5m2": "fp8e5m2",
    "c10::Float8_e4m3fnuz": "fp8e4m3fnuz",
    "c10::Float8_e5m2fnuz": "fp8e5m2fnuz",
    "c10::Float8_e8m0fnu": "fp8e8m0",
    "c10::Float4_e2m1fn_x2": "fp4x2",
    "long int": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "bool": "bool",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
    "c10::complex<double>": "c128",
    "c10::complex<float>": "c64",
    "c10::complex<c10::Half>": "c32",
}

#: The column of the peaks table (:mod:`tprimat.result.peaks`) a GEMM or attention of this
#: operand dtype runs at.  FP32 has no column: the table holds tensor-core peaks only.
PEAK_DTYPE: dict[str, str] = {
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "float": "fp32",
    "double": "fp64",
}

#: ``Input type`` values of arguments that are not tensors.
_NOT_TENSOR = frozenset({"", "Scalar", "ScalarList", "GenericList", "None", "Device", "Layout", "MemoryFormat"})
_TENSOR_LIST = "TensorList"

#: torch ScalarType codes (``c10/core/ScalarType.h``) of the output dtypes ``_scaled_mm`` takes.
_SCALAR_TYPE_BYTES: dict[int, float] = {5: 2, 6: 4, 7: 8, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


@attrs.frozen(kw_only=True)
class OpCost:
    """The cost of one call of an operator, or why it has none.

    ``kind``: ``gemm``, ``attention`` (FLOPs and bytes), ``norm``, ``softmax``,
    ``elementwise``, ``reduction``, ``optimizer`` (bytes only), or ``unknown``.
    ``dtype``: the peaks-table column the FLOPs run at (``bf16``, ``fp8`` …; None for
    bytes-only operators).  ``reason``: why a known operator has no cost (None when costed).
    """

    kind: str
    flops: float | None = None
    bytes: float | None = None
    dtype: str | None = None
    formula: str | None = None
    reason: str | None = None

    @property
    def known(self) -> bool:
        return self.kind != "unknown"

    @property
    def costed(self) -> bool:
        return self.reason is None and self.bytes is not None


UNKNOWN = OpCost(kind="unknown", reason="unknown op")


class _Uncosted(Exception):
    """The recorded arguments do not determine the cost (the message says why)."""


@attrs.frozen
class _Tensor:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float:
        return self.numel * DTYPE_BYTES[self.dtype]


class _Args:
    """One call's recorded inputs: shapes, types and concrete values by position."""

    def __init__(self, dims: Sequence[Any], types: Sequence[Any], concrete: Sequence[Any] | None) -> None:
        self.dims = dims
        self.types = types
        self.concrete = concrete or ()

    def tensor(self, index: int) -> _Tensor | None:
        """The tensor input at ``index``; None when that input is absent or not a tensor."""
        if index >= len(self.types) or index >= len(self.dims):
            return None
        dtype, dims = self.types[index], self.dims[index]
        if not isinstance(dtype, str) or dtype in _NOT_TENSOR or dtype == _TENSOR_LIST:
            return None
        if dtype not in DTYPE_BYTES:
            raise _Uncosted(f"unknown dtype {dtype!r}")
        if not isinstance(dims, list) or not all(_is_size(d) for d in dims):
            raise _Uncosted("malformed shapes")
        return _Tensor(tuple(dims), dtype)

    def need(self, index: int, what: str) -> _Tensor:
        found = self.tensor(index)
        if found is None:
            raise _Uncosted(f"{what} (input {index}) not recorded")
        return found

    def tensors(self) -> list[_Tensor]:
        """Every tensor input (a tensor list makes the cost undetermined: its dtype is not recorded)."""
        found = []
        for index, dtype in enumerate(self.types):
            if dtype == _TENSOR_LIST:
                raise _Uncosted("tensor-list dtypes not recorded")
            tensor = self.tensor(index)
            if tensor is not None:
                found.append(tensor)
        return found

    def value(self, index: int) -> str | None:
        """The concrete value at ``index`` as recorded (None: not recorded or empty)."""
        if index >= len(self.concrete):
            return None
        text = self.concrete[index]
        return text.strip() if isinstance(text, str) and text.strip() else None


#: A rule's cost function: the operator kind and one call's recorded inputs -> its cost.
_Cost = Callable[[str, _Args], OpCost]


def _is_size(value: Any) -> bool:
    return type(value) is int and value >= 0


def op_cost(name: str, dims: Any, types: Any, concrete: Any = None) -> OpCost:
    """The cost of one call of operator ``name`` with these recorded inputs (module docstring).

    ``dims``, ``types``, ``concrete``: the decoded ``Input Dims``, ``Input type`` and
    ``Concrete Inputs`` (None when not recorded).
    """
    rule = _RULES.get(name)
    if rule is None:
        rule = _foreach_rule(name)
        if rule is None:
            return UNKNOWN
    kind, cost = rule
    if dims is None or types is None:
        return OpCost(kind=kind, reason="no shapes recorded")
    if not isinstance(dims, list) or not isinstance(types, list):
        return OpCost(kind=kind, reason="malformed shapes")
    if concrete is not None and not isinstance(concrete, list):
        concrete = None
    try:
        return cost(kind, _Args(dims, types, concrete))
    except _Uncosted as exc:
        return OpCost(kind=kind, reason=str(exc))


# -- GEMM -------------------------------------------------------------------------------------


def _gemm(kind: str, m: int, n: int, k: int, batch: int, reads: float, out_size: float, dtype: str) -> OpCost:
    if min(m, n, k, batch) <= 0:
        raise _Uncosted("an empty matrix")
    flops = gemm_flops(m, n, k) * batch
    written = batch * m * n * out_size
    formula = f"2*M*N*K*batch, M={m} N={n} K={k} batch={batch}"
    return OpCost(
        kind=kind, flops=float(flops), bytes=float(reads + written), dtype=PEAK_DTYPE.get(dtype), formula=formula
    )


def _matrices(args: _Args, first: int, batched: bool) -> tuple[_Tensor, _Tensor, int, int, int, int]:
    a = args.need(first, "first matrix")
    b = args.need(first + 1, "second matrix")
    rank = 3 if batched else 2
    if len(a.shape) != rank or len(b.shape) != rank:
        raise _Uncosted(f"expected {rank}-D operands, got {len(a.shape)}-D and {len(b.shape)}-D")
    if a.shape[-1] != b.shape[-2]:
        raise _Uncosted(f"inner dimensions differ ({a.shape[-1]} vs {b.shape[-2]})")
    batch = a.shape[0] if batched else 1
    if batched and b.shape[0] != batch:
        raise _Uncosted(f"batch sizes differ ({a.shape[0]} vs {b.shape[0]})")
    return a, b, a.shape[-2], b.shape[-1], a.shape[-1], batch


def _plain_gemm(kind: str, args: _Args, first: int, batched: bool) -> OpCost:
    """``mm``/``bmm`` (operands from input 0) and ``addmm``/``baddbmm`` (input 0 is the added term)."""
    a, _, m, n, k, batch = _matrices(args, first, batched=batched)
    return _gemm(kind, m, n, k, batch, _read(args), DTYPE_BYTES[a.dtype], a.dtype)


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting of ``shapes``."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise _Uncosted(f"shapes do not broadcast ({', '.join(_shape_text(s) for s in shapes)})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _matmul(kind: str, args: _Args) -> OpCost:
    a = args.need(0, "first operand")
    b = args.need(1, "second operand")
    if not a.shape or not b.shape:
        raise _Uncosted("a 0-D operand")
    a_rows = a.shape if len(a.shape) > 1 else (1, a.shape[0])
    b_cols = b.shape if len(b.shape) > 1 else (b.shape[0], 1)
    m, k = a_rows[-2], a_rows[-1]
    k2, n = b_cols[-2], b_cols[-1]
    if k != k2:
        raise _Uncosted(f"inner dimensions differ ({k} vs {k2})")
    batch = math.prod(_broadcast([a_rows[:-2], b_cols[:-2]]))
    return _gemm(kind, m, n, k, batch, _read(args), DTYPE_BYTES[a.dtype], a.dtype)


def _linear(kind: str, args: _Args) -> OpCost:
    x = args.need(0, "input")
    w = args.need(1, "weight")
    if not x.shape or len(w.shape) != 2:
        raise _Uncosted(
            f"expected an input of at least 1-D and a 2-D weight, got {len(x.shape)}-D and {len(w.shape)}-D"
        )
    if x.shape[-1] != w.shape[1]:
        raise _Uncosted(f"in-features differ ({x.shape[-1]} vs {w.shape[1]})")
    m = math.prod(x.shape[:-1])
    return _gemm(kind, m, w.shape[0], x.shape[-1], 1, _read(args), DTYPE_BYTES[x.dtype], x.dtype)


def _scaled_mm(kind: str, args: _Args) -> OpCost:
    a, _, m, n, k, batch = _matrices(args, 0, batched=False)
    out = args.value(6)
    if out is None or out == "None":
        out_size = DTYPE_BYTES[a.dtype]  # torch: no out_dtype -> the result has the operands' dtype
    else:
        try:
            out_size = _SCALAR_TYPE_BYTES[int(out)]
        except (ValueError, KeyError):
            raise _Uncosted(f"output dtype {out!r} not understood") from None
    return _gemm(kind, m, n, k, batch, _read(args), out_size, a.dtype)


def _read(args: _Args) -> float:
    return float(sum(t.nbytes for t in args.tensors()))


# -- attention ----------------------------------------------------------------------------------


@attrs.frozen
class _Attention:
    """Where an attention operator's arguments are: layout, Q/K/V, mask, causal flag, window."""

    layout: str  # "bhsd": [..., heads, seq, dim]; "bshd": [batch, seq, heads, dim]
    q: int
    causal: int  # index of is_causal (a bool), or of custom_mask_type (an int) when ``mask_type``
    backward: bool = False
    mask: int | None = None  # an explicit mask / bias input
    varlen: int | None = None  # cumulative sequence lengths (packed variable-length batches)
    window: tuple[int, int] | None = None  # indices of window_size_left, window_size_right
    mask_type: bool = False


_ATTENTION: dict[str, _Attention] = {
    "aten::scaled_dot_product_attention": _Attention("bhsd", 0, 5, mask=3),
    "aten::_scaled_dot_product_flash_attention": _Attention("bhsd", 0, 4),
    "aten::_scaled_dot_product_efficient_attention": _Attention("bhsd", 0, 6, mask=3),
    "aten::_scaled_dot_product_cudnn_attention": _Attention("bhsd", 0, 6, mask=3),
    "aten::_scaled_dot_product_flash_attention_backward": _Attention("bhsd", 1, 11, backward=True, varlen=6),
    "aten::_scaled_dot_product_efficient_attention_backward": _Attention("bhsd", 1, 11, backward=True, mask=4),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Attention("bhsd", 1, 14, backward=True, mask=8, varlen=9),
    "aten::_flash_attention_forward": _Attention("bshd", 0, 8, varlen=3, window=(11, 12)),
    "aten::_flash_attention_backward": _Attention("bshd", 1, 11, backward=True, varlen=6, window=(15, 16)),
    "aten::_efficient_attention_forward": _Attention("bshd", 0, 9, mask=3, varlen=4, mask_type=True),
    "aten::_efficient_attention_backward": _Attention("bshd", 1, 14, backward=True, mask=4, varlen=6, mask_type=True),
    "flash_attn::_flash_attn_forward": _Attention("bshd", 0, 5, window=(6, 7)),
    "flash_attn::_flash_attn_backward": _Attention("bshd", 1, 11, backward=True, window=(12, 13)),
}


def _bool(text: str | None, what: str) -> bool:
    if text in ("True", "true", "1"):
        return True
    if text in ("False", "false", "0"):
        return False
    if text is None:
        raise _Uncosted(f"{what} not recorded (no Concrete Inputs)")
    raise _Uncosted(f"{what} {text!r} not understood")


def _int_value(text: str | None) -> int | None:
    if text is None or text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        raise _Uncosted(f"integer argument {text!r} not understood") from None


def _attention(kind: str, args: _Args, spec: _Attention) -> OpCost:
    q = args.need(spec.q, "query")
    k = args.need(spec.q + 1, "key")
    v = args.need(spec.q + 2, "value")
    if spec.varlen is not None and args.tensor(spec.varlen) is not None:
        raise _Uncosted("variable-length (packed) sequences: their lengths are not recorded")
    rank = 4 if spec.layout == "bshd" else 2
    if len(q.shape) < rank or len(k.shape) < rank or len(v.shape) < rank:
        raise _Uncosted("query, key or value of too few dimensions")
    seq_axis = -3 if spec.layout == "bshd" else -2
    s_q, s_k, d_qk, d_v = q.shape[seq_axis], k.shape[seq_axis], q.shape[-1], v.shape[-1]
    if min(s_q, s_k, d_qk, d_v) <= 0:
        raise _Uncosted("an empty query, key or value")
    heads = q.numel // (s_q * d_qk)  # batch x query heads
    explicit_mask = spec.mask is not None and args.tensor(spec.mask) is not None
    if spec.mask_type:
        mask_type = _int_value(args.value(spec.causal))
        if mask_type is None:
            raise _Uncosted("custom_mask_type not recorded (no Concrete Inputs)")
        if mask_type not in (0, 1, 2):
            raise _Uncosted(f"custom_mask_type {mask_type} not understood")
        causal = mask_type != 0
    else:
        causal = _bool(args.value(spec.causal), "is_causal")
    window = None
    if spec.window is not None:
        left, right = (_int_value(args.value(i)) for i in spec.window)
        if left is not None and left >= 0:
            if not causal or (right is not None and right > 0):
                raise _Uncosted("a two-sided attention window is not modelled")
            window = left + 1  # keys j with i - left <= j <= i
    if causal and s_q != s_k:
        raise _Uncosted(f"causal attention with query length {s_q} and key length {s_k}: not modelled")
    if explicit_mask or not causal:
        pairs = float(s_q * s_k)
        variant = "full (explicit mask)" if explicit_mask else "full"
    elif window is not None:
        pairs = attended_pairs(s_q, "sliding", window)
        variant = f"sliding window {window}"
    else:
        pairs = attended_pairs(s_q, "causal")
        variant = "causal"
    forward = 2.0 * heads * pairs * (d_qk + d_v)
    size = DTYPE_BYTES[q.dtype]
    out_bytes = heads * s_q * d_v * size
    qkv = q.nbytes + k.nbytes + v.nbytes
    if spec.backward:
        flops, moved, direction = 2.0 * forward, 2.0 * qkv + 2.0 * out_bytes, "bwd = 2*fwd"
    else:
        flops, moved, direction = forward, qkv + out_bytes, "fwd"
    formula = (
        f"{direction}; fwd = 2*(b*h)*pairs*(d_qk+d_v), b*h={heads} s_q={s_q} s_k={s_k} d_qk={d_qk} d_v={d_v}, {variant}"
    )
    return OpCost(kind=kind, flops=flops, bytes=moved, dtype=PEAK_DTYPE.get(q.dtype), formula=formula)


# -- bytes-only operators ---------------------------------------------------------------------


def _bytes_only(kind: str, reads: float, writes: float, formula: str) -> OpCost:
    return OpCost(kind=kind, bytes=float(reads + writes), formula=formula)


def _like(indices: Sequence[int]) -> _Cost:
    """Outputs shaped and typed like the inputs at ``indices`` (absent inputs write nothing)."""

    def cost(kind: str, args: _Args) -> OpCost:
        args.need(indices[0], "input")
        written = sum(t.nbytes for t in (args.tensor(i) for i in indices) if t is not None)
        return _bytes_only(kind, _read(args), written, "inputs read + outputs like inputs " + str(list(indices)))

    return cost


def _elementwise(out: str) -> _Cost:
    """``out``: "promote" (the widest dimensioned input's dtype), "bool", "inplace", "copy", "fill"."""

    def cost(kind: str, args: _Args) -> OpCost:
        tensors = args.tensors()
        if not tensors:
            raise _Uncosted("no tensor input recorded")
        if out == "fill":
            first = args.need(0, "destination")
            return _bytes_only(kind, 0.0, first.nbytes, "output written")
        if out == "copy":
            dst, src = args.need(0, "destination"), args.need(1, "source")
            return _bytes_only(kind, src.nbytes, dst.nbytes, "source read + destination written")
        reads = sum(t.nbytes for t in tensors)
        if out == "inplace":
            first = args.need(0, "self")
            return _bytes_only(kind, reads, first.nbytes, "inputs read + self written")
        shaped = [t for t in tensors if t.shape] or tensors
        shape = _broadcast([t.shape for t in shaped])
        size = 1 if out == "bool" else max(DTYPE_BYTES[t.dtype] for t in shaped)
        return _bytes_only(kind, reads, math.prod(shape) * size, "inputs read + broadcast output written")

    return cost


def _reduction(dim_index: int, dim_kind: str, out_size: float | None = None) -> _Cost:
    """A reduction over the dimensions recorded at ``dim_index`` (``dim_kind``: "list" or "int")."""

    def cost(kind: str, args: _Args) -> OpCost:
        x = args.need(0, "input")
        dims = _reduced_dims(args, dim_index, dim_kind, len(x.shape))
        kept = math.prod(size for axis, size in enumerate(x.shape) if axis not in dims) if dims else 1
        size = DTYPE_BYTES[x.dtype] if out_size is None else out_size
        return _bytes_only(kind, _read(args), kept * size, "inputs read + reduced output written")

    return cost


def _reduced_dims(args: _Args, index: int, dim_kind: str, rank: int) -> list[int]:
    """The reduced dimensions (normalised, sorted); an empty list: every dimension."""
    if index >= len(args.types):
        return []  # the overload without a dim argument: a full reduction
    recorded = args.types[index]
    text = args.value(index)
    if recorded == "" and text is None:
        return []  # dim=None
    if text is None:
        raise _Uncosted("reduced dimensions not recorded (no Concrete Inputs)")
    expected = "ScalarList" if dim_kind == "list" else "Scalar"
    if recorded != expected:
        raise _Uncosted(f"reduced dimensions not recorded unambiguously (input type {recorded!r})")
    try:
        values = [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        raise _Uncosted(f"reduced dimensions {text!r} not understood") from None
    if not values or rank == 0:
        return []
    out = set()
    for value in values:
        if not -rank <= value < rank:
            raise _Uncosted(f"reduced dimension {value} out of range for a {rank}-D input")
        out.add(value % rank)
    return sorted(out)


def _tensor_lists(kind: str, args: _Args) -> OpCost:
    args.tensors()  # a tensor list raises: its dtypes are not recorded
    raise _Uncosted("no tensor list recorded")


def _foreach_rule(name: str) -> tuple[str, _Cost] | None:
    if name.startswith(("aten::_foreach_", "aten::_fused_adam", "aten::_fused_sgd")):
        return ("optimizer", _tensor_lists)
    return None


_ELEMENTWISE_PROMOTE = (
    "abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan tanh sigmoid silu gelu "
    "relu hardtanh hardswish hardsigmoid leaky_relu elu softplus mish erf erfc sign floor ceil round trunc frac "
    "square clamp clamp_min clamp_max nan_to_num bitwise_not clone threshold add sub rsub mul div pow maximum "
    "minimum fmod remainder atan2 where masked_fill lerp addcmul addcdiv bitwise_and bitwise_or bitwise_xor "
    "copysign hypot xlogy silu_backward gelu_backward sigmoid_backward tanh_backward threshold_backward "
    "hardtanh_backward leaky_relu_backward elu_backward softplus_backward hardswish_backward"
).split()
_ELEMENTWISE_BOOL = "eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_not logical_xor".split()


def _rules() -> dict[str, tuple[str, _Cost]]:
    rules: dict[str, tuple[str, _Cost]] = {}
    #: name -> (the first matrix operand's input index, batched)
    plain = {
        "mm": (0, False),
        "addmm": (1, False),
        "_addmm_activation": (1, False),
        "bmm": (0, True),
        "baddbmm": (1, True),
    }
    gemms: dict[str, _Cost] = {
        name: functools.partial(_plain_gemm, first=first, batched=batched) for name, (first, batched) in plain.items()
    }
    gemms |= {
        "matmul": _matmul,
        "linear": _linear,
        "_scaled_mm": _scaled_mm,
    }
    for name, cost in gemms.items():
        rules[f"aten::{name}"] = ("gemm", cost)
    for name, spec in _ATTENTION.items():
        rules[name] = ("attention", functools.partial(_attention, spec=spec))
    norms = {
        "layer_norm": (0,),
        "native_layer_norm": (0,),
        "rms_norm": (0,),
        "_fused_rms_norm": (0,),
        "batch_norm": (0,),
        "native_batch_norm": (0,),
        "group_norm": (0,),
        "native_group_norm": (0,),
        "native_layer_norm_backward": (1, 5, 6),
        "_fused_rms_norm_backward": (1, 4),
        "native_batch_norm_backward": (1, 2, 2),
        "native_group_norm_backward": (1, 4, 4),
    }
    for name, like in norms.items():
        rules[f"aten::{name}"] = ("norm", _like(like))
    for name in ("softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data"):
        rules[f"aten::{name}"] = ("softmax", _like((0,)))
    rules["aten::_log_softmax_backward_data"] = ("softmax", _like((0,)))
    for name in _ELEMENTWISE_PROMOTE:
        rules[f"aten::{name}"] = ("elementwise", _elementwise("promote"))
        rules[f"aten::{name}_"] = ("elementwise", _elementwise("inplace"))
    for name in _ELEMENTWISE_BOOL:
        rules[f"aten::{name}"] = ("elementwise", _elementwise("bool"))
        rules[f"aten::{name}_"] = ("elementwise", _elementwise("inplace"))
    rules["aten::copy_"] = ("elementwise", _elementwise("copy"))
    rules["aten::fill_"] = ("elementwise", _elementwise("fill"))
    rules["aten::zero_"] = ("elementwise", _elementwise("fill"))
    for name in ("sum", "mean", "nansum", "amax", "amin", "var", "std", "logsumexp"):
        rules[f"aten::{name}"] = ("reduction", _reduction(1, "list"))
    for name in ("max", "min", "prod"):
        rules[f"aten::{name}"] = ("reduction", _reduction(1, "int"))
    for name in ("argmax", "argmin"):
        rules[f"aten::{name}"] = ("reduction", _reduction(1, "int", out_size=8))
    for name in ("all", "any"):
        rules[f"aten::{name}"] = ("reduction", _reduction(1, "int", out_size=1))
    rules["aten::linalg_vector_norm"] = ("reduction", _reduction(2, "list"))
    rules["aten::cat"] = ("elementwise", _tensor_lists)
    return rules


_RULES = _rules()


# -- text -------------------------------------------------------------------------------------


def _shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def shapes_text(dims: Any, types: Any) -> str:
    """The tensor inputs of a call for a table: ``8944x1024, 1024x1024 (bf16)``."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return "no shapes recorded"
    parts: list[str] = []
    dtypes: list[str] = []
    for shape, dtype in zip(dims, types, strict=False):
        if dtype == _TENSOR_LIST and isinstance(shape, list):
            parts.append(
                "["
                + ", ".join(_shape_text(s) if isinstance(s, list) else "?" for s in shape[:4])
                + (", …]" if len(shape) > 4 else "]")
            )
            continue
        if not isinstance(dtype, str) or dtype in _NOT_TENSOR or not isinstance(shape, list):
            continue
        if not all(_is_size(d) for d in shape):
            continue
        parts.append(_shape_text(shape))
        short = DTYPE_SHORT.get(dtype, dtype)
        if short not in dtypes:
            dtypes.append(short)
    text = ", ".join(parts) if parts else "no tensors"
    return f"{text} ({'/'.join(dtypes)})" if dtypes else text


__all__ = ["DTYPE_BYTES", "PEAK_DTYPE", "UNKNOWN", "OpCost", "op_cost", "shapes_text"]
