"""Attention microbenchmarks: causal, full and sliding-window, forward and backward.

Called with torch already imported by :mod:`tprimat.microbench.runner`.
PyTorch's ``scaled_dot_product_attention`` (SDPA) runs every variant; the
kernel it dispatches to (flash, memory-efficient, cuDNN, math; on ROCm the
flash kernel comes from AOTriton or CK) is asked of the dispatcher with the
exact inputs and recorded.  ``flash_attn.flash_attn_func`` runs too when the
package is installed.

Masks: *causal* lets query ``i`` see keys ``j ≤ i``; *full* sees every key;
*sliding* sees the ``w`` most recent keys including itself, ``i − w < j ≤ i``
(Mistral-style; flash-attn ``window_size=(w − 1, 0)`` with ``causal=True``).
SDPA has no sliding-window flag, so that variant passes an explicit boolean
mask, which restricts SDPA to the kernels that accept masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict

from tprimat.microbench.formulas import (
    ATTENTION_VARIANTS,
    AttentionVariant,
    attention_flops,
    effective_window,
    tflops,
)
from tprimat.microbench.gemm import TORCH_DTYPES, _first_line, resolve_dtype
from tprimat.microbench.timing import Method, is_gpu, measure
from tprimat.result.metrics import describe

#: SDPA backend enum names as tprimat reports them.
SDPA_BACKENDS = {
    "FLASH_ATTENTION": "flash",
    "EFFICIENT_ATTENTION": "efficient",
    "CUDNN_ATTENTION": "cudnn",
    "MATH": "math",
    "OVERRIDEABLE": "overrideable",
    "ERROR": "none",
}


class _Common(TypedDict):
    """The fields every attention row of one device shares."""

    device_index: int
    batch: int
    heads: int
    kv_heads: int
    seq_length: int
    head_dim: int
    window: int


def dense_mask(
    torch: Any, variant: AttentionVariant, seq_length: int, window: int | None = None, device: Any = None
) -> Any:
    """``[s, s]`` boolean mask, True where query ``i`` (row) may attend key ``j`` (column)."""
    i = torch.arange(seq_length, device=device).unsqueeze(1)
    j = torch.arange(seq_length, device=device).unsqueeze(0)
    if variant == "full":
        return torch.ones(seq_length, seq_length, dtype=torch.bool, device=device)
    if variant == "causal":
        return j <= i
    if variant == "sliding":
        w = effective_window(seq_length, window)
        return (j <= i) & (j > i - w)
    known = ", ".join(ATTENTION_VARIANTS)
    raise ValueError(f"unknown attention variant {variant!r}; known: {known}")


def _sdpa_arguments(torch: Any, q: Any, k: Any, variant: AttentionVariant, window: int | None) -> dict[str, Any]:
    mask = None
    if variant == "sliding":
        mask = dense_mask(torch, "sliding", q.shape[-2], window, device=q.device)
    arguments: dict[str, Any] = {"attn_mask": mask, "is_causal": variant == "causal"}
    if q.shape[1] != k.shape[1]:
        arguments["enable_gqa"] = True  # only when needed: torch before 2.5 lacks the argument
    return arguments


def sdpa_attention(
    torch: Any,
    q: Any,
    k: Any,
    v: Any,
    variant: AttentionVariant,
    window: int | None = None,
    arguments: dict[str, Any] | None = None,
) -> Any:
    """SDPA for ``[b, heads, s, d]`` queries and ``[b, groups, s, d]`` keys/values."""
    import torch.nn.functional as F  # noqa: N812

    args = arguments if arguments is not None else _sdpa_arguments(torch, q, k, variant, window)
    return F.scaled_dot_product_attention(q, k, v, **args)


def reference_attention(torch: Any, q: Any, k: Any, v: Any, mask: Any) -> Any:
    """Attention written out in fp32 (scores, masked softmax, weighted sum): the test oracle."""
    heads, groups = q.shape[1], k.shape[1]
    k = k.float().repeat_interleave(heads // groups, dim=1)
    v = v.float().repeat_interleave(heads // groups, dim=1)
    scores = q.float() @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sdpa_backend(torch: Any, q: Any, k: Any, v: Any, arguments: dict[str, Any]) -> str:
    """The kernel SDPA's dispatcher picks for exactly these inputs."""
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return "unknown (torch has no _fused_sdp_choice)"
    try:
        from torch.nn.attention import SDPBackend

        extra = {"enable_gqa": True} if arguments.get("enable_gqa") else {}
        index = choose(q, k, v, arguments["attn_mask"], 0.0, arguments["is_causal"], **extra)
        name = SDPA_BACKENDS.get(SDPBackend(index).name, SDPBackend(index).name.lower())
    except Exception as exc:  # noqa: BLE001 - a private API; say so rather than fail the run
        return f"unknown ({_first_line(exc)})"
    if name == "flash" and getattr(torch.version, "hip", None):
        library = getattr(torch.backends.cuda, "preferred_rocm_fa_library", None)
        if library is not None:
            try:
                name = f"flash ({str(library()).split('.')[-1].lower()})"
            except Exception:  # noqa: BLE001
                pass
    return name


def flash_attn_module() -> tuple[Any | None, str | None]:
    """The installed ``flash_attn`` package, or why it cannot be used."""
    try:
        import flash_attn
    except ImportError as exc:
        return None, f"flash-attn is not installed ({_first_line(exc)})"
    except Exception as exc:  # noqa: BLE001 - a broken build raises anything at import
        return None, f"flash-attn failed to import ({_first_line(exc)})"
    return flash_attn, None


def flash_attn_window(variant: AttentionVariant, seq_length: int, window: int | None) -> tuple[int, int]:
    """flash-attn's ``window_size=(left, right)`` for a variant (``-1`` is unlimited)."""
    if variant == "sliding":
        return (effective_window(seq_length, window) - 1, 0)
    return (-1, -1)


def _timing(flops: float, times: Sequence[float]) -> dict[str, Any]:
    stats = describe(times)
    assert stats is not None
    return {
        "flops": flops,
        "time_s": {
            "median": stats.median,
            "mean": stats.mean,
            "min": stats.min,
            "max": stats.max,
            "p5": stats.p5,
            "p95": stats.p95,
            "cv": stats.cv,
            "count": stats.count,
        },
        "tflops": tflops(flops, stats.median),
        "tflops_max": tflops(flops, stats.min),
    }


def attention_case(
    *,
    device_index: int,
    impl: str,
    backend: str | None,
    variant: AttentionVariant,
    window: int | None,
    dtype: str,
    dtype_used: str | None,
    batch: int,
    heads: int,
    kv_heads: int,
    seq_length: int,
    head_dim: int,
    fwd_times: Sequence[float] | None = None,
    bwd_times: Sequence[float] | None = None,
    status: str = "ok",
    reason: str | None = None,
) -> dict[str, Any]:
    """One result row: forward, backward and forward+backward times and TFLOP/s."""
    applied = effective_window(seq_length, window) if variant == "sliding" else None
    row: dict[str, Any] = {
        "device_index": device_index,
        "impl": impl,
        "backend": backend,
        "variant": variant,
        "window": applied,
        "dtype": dtype,
        "dtype_used": dtype_used,
        "batch": batch,
        "heads": heads,
        "kv_heads": kv_heads,
        "seq_length": seq_length,
        "head_dim": head_dim,
        "status": status,
        "reason": reason,
        "fwd": None,
        "bwd": None,
        "fwd+bwd": None,
    }
    if status == "ok" and fwd_times and bwd_times:

        def flops(direction: Literal["fwd", "bwd", "fwd+bwd"]) -> float:
            return attention_flops(
                batch=batch,
                heads=heads,
                seq_length=seq_length,
                head_dim=head_dim,
                variant=variant,
                window=applied,
                direction=direction,
            )

        row["fwd"] = _timing(flops("fwd"), fwd_times)
        row["bwd"] = _timing(flops("bwd"), bwd_times)
        both = [f + b for f, b in zip(fwd_times, bwd_times, strict=True)]
        row["fwd+bwd"] = _timing(flops("fwd+bwd"), both)
    return row


def run_attention(
    torch: Any,
    device: Any,
    device_index: int,
    *,
    batch: int,
    heads: int,
    kv_heads: int,
    seq_length: int,
    head_dim: int,
    window: int,
    dtypes: Sequence[str],
    method: Method,
    flush: Callable[[int], None],
    variants: Sequence[AttentionVariant] = ATTENTION_VARIANTS,
    use_flash_attn: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Time every variant through SDPA (and flash-attn when installed) on one device."""
    rows: list[dict[str, Any]] = []
    common: _Common = {
        "device_index": device_index,
        "batch": batch,
        "heads": heads,
        "kv_heads": kv_heads,
        "seq_length": seq_length,
        "head_dim": head_dim,
        "window": window,
    }
    fa, fa_reason = flash_attn_module() if use_flash_attn else (None, "not requested")
    if fa is not None and not is_gpu(device):
        fa, fa_reason = None, "flash-attn runs on GPUs only"
    for requested in dtypes:
        if requested == "fp8":
            rows.append(
                attention_case(
                    impl="sdpa",
                    backend=None,
                    variant="causal",
                    dtype="fp8",
                    dtype_used=None,
                    status="unavailable",
                    reason="attention is measured in bf16/fp16/fp32; FP8 attention kernels are not covered",
                    **common,
                )
            )
            continue

        def probe(dtype: Any) -> Any:
            q = torch.randn(1, 2, 8, 8, device=device).to(dtype)
            return sdpa_attention(torch, q, q, q, "causal")

        used, note = resolve_dtype(torch, device, requested, probe)
        dtype = getattr(torch, TORCH_DTYPES[used])
        for variant in variants:
            rows.append(_sdpa_row(torch, device, requested, used, note, dtype, variant, method, flush, common))
            if progress:
                progress(_describe(rows[-1]))
            if fa is None:
                if variant == variants[0] and use_flash_attn:
                    rows.append(
                        attention_case(
                            impl="flash_attn",
                            backend=None,
                            variant=variant,
                            dtype=requested,
                            dtype_used=None,
                            status="unavailable",
                            reason=fa_reason,
                            **common,
                        )
                    )
                continue
            rows.append(_flash_row(torch, fa, device, requested, used, dtype, variant, method, flush, common))
            if progress:
                progress(_describe(rows[-1]))
    return rows


def _inputs(torch: Any, device: Any, dtype: Any, shapes: Sequence[tuple[int, ...]]) -> list[Any]:
    return [torch.empty(*s, device=device, dtype=dtype, requires_grad=True) for s in shapes]


def _prepare(torch: Any, tensors: Sequence[Any], grad_out: Any) -> Callable[[], None]:
    def prepare() -> None:
        with torch.no_grad():
            for tensor in tensors:
                tensor.normal_()
                tensor.grad = None
            grad_out.normal_()

    return prepare


def _sdpa_row(
    torch: Any,
    device: Any,
    requested: str,
    used: str,
    note: str | None,
    dtype: Any,
    variant: AttentionVariant,
    method: Method,
    flush: Callable[[int], None],
    common: _Common,
) -> dict[str, Any]:
    b, h, g = common["batch"], common["heads"], common["kv_heads"]
    s, d = common["seq_length"], common["head_dim"]
    try:
        q, k, v = _inputs(torch, device, dtype, [(b, h, s, d), (b, g, s, d), (b, g, s, d)])
        grad_out = torch.empty(b, h, s, d, device=device, dtype=dtype)
        args = _sdpa_arguments(torch, q, k, variant, common["window"])
        backend = sdpa_backend(torch, q, k, v, args)
        fwd, bwd = measure(
            torch,
            device,
            method,
            _prepare(torch, (q, k, v), grad_out),
            [lambda _: sdpa_attention(torch, q, k, v, variant, arguments=args), lambda out: out.backward(grad_out)],
            flush,
        )
        return attention_case(
            impl="sdpa",
            backend=backend,
            variant=variant,
            dtype=requested,
            dtype_used=used,
            fwd_times=fwd,
            bwd_times=bwd,
            reason=note,
            **common,
        )
    except (RuntimeError, TypeError, ValueError) as exc:  # out of memory, no GQA in this torch
        return attention_case(
            impl="sdpa",
            backend=None,
            variant=variant,
            dtype=requested,
            dtype_used=used,
            status="failed",
            reason=_first_line(exc),
            **common,
        )
    finally:
        if is_gpu(device):
            torch.cuda.empty_cache()


def _flash_row(
    torch: Any,
    fa: Any,
    device: Any,
    requested: str,
    used: str,
    dtype: Any,
    variant: AttentionVariant,
    method: Method,
    flush: Callable[[int], None],
    common: _Common,
) -> dict[str, Any]:
    b, h, g = common["batch"], common["heads"], common["kv_heads"]
    s, d = common["seq_length"], common["head_dim"]
    version = getattr(fa, "__version__", "?")
    try:
        # flash-attn takes [batch, seq, heads, dim]
        q, k, v = _inputs(torch, device, dtype, [(b, s, h, d), (b, s, g, d), (b, s, g, d)])
        grad_out = torch.empty(b, s, h, d, device=device, dtype=dtype)
        window = flash_attn_window(variant, s, common["window"])

        def forward(_: Any) -> Any:
            return fa.flash_attn_func(q, k, v, causal=variant != "full", window_size=window)

        fwd, bwd = measure(
            torch,
            device,
            method,
            _prepare(torch, (q, k, v), grad_out),
            [forward, lambda out: out.backward(grad_out)],
            flush,
        )
        return attention_case(
            impl="flash_attn",
            backend=f"flash-attn {version}",
            variant=variant,
            dtype=requested,
            dtype_used=used,
            fwd_times=fwd,
            bwd_times=bwd,
            **common,
        )
    except Exception as exc:  # noqa: BLE001 - a third-party kernel; its failure is a row
        return attention_case(
            impl="flash_attn",
            backend=f"flash-attn {version}",
            variant=variant,
            dtype=requested,
            dtype_used=used,
            status="failed",
            reason=_first_line(exc),
            **common,
        )
    finally:
        if is_gpu(device):
            torch.cuda.empty_cache()


def _describe(row: dict[str, Any]) -> str:
    where = f"[{row['device_index']}] attention {row['variant']} {row['impl']}"
    if row["status"] != "ok":
        return f"{where} {row['dtype']}: {row['status']} ({row['reason']})"
    return (
        f"{where} ({row['backend']}) {row['dtype']}: fwd {row['fwd']['tflops']:.4g}, "
        f"bwd {row['bwd']['tflops']:.4g} TFLOP/s"
    )
