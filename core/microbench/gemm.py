"""GEMM microbenchmarks: the model's shapes through ``torch.matmul``, ``F.linear`` and FP8.

Called with torch already imported by :mod:`tprimat.microbench.runner`.
Each case is one shape × one operator × one dtype on one device, timed with
:func:`tprimat.microbench.timing.measure`; the operands are refilled from a
normal distribution before every iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tprimat.microbench.formulas import tflops
from tprimat.microbench.shapes import GemmShape
from tprimat.microbench.timing import Method, is_gpu, measure
from tprimat.result.metrics import describe

#: Operators compared on forward shapes; backward shapes run through ``torch.matmul`` only.
FORWARD_OPS = ("matmul", "linear", "linear+bias")
FP8_OP = "scaled_mm"
#: torch dtype attribute per dtype name.
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

Progress = Callable[[str], None]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def resolve_dtype(
    torch: Any, device: Any, requested: str, probe: Callable[[Any], Any] | None = None
) -> tuple[str, str | None]:
    """The dtype a case really runs in, and the reason when it is not the requested one.

    ``probe(dtype)`` runs a tiny version of the operation; if it raises, the
    case falls back to fp32 and says why (a fallback is never silent).
    """
    if requested not in TORCH_DTYPES:
        raise ValueError(f"unknown dtype {requested!r}; known: {', '.join(TORCH_DTYPES)}, fp8")
    if probe is None:

        def probe(dtype: Any) -> Any:
            a = torch.randn(16, 16, device=device).to(dtype)
            return torch.matmul(a, a)

    try:
        probe(getattr(torch, TORCH_DTYPES[requested]))
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        if requested == "fp32":
            raise
        return "fp32", f"{requested} is not supported here ({_first_line(exc)}): measured in fp32"
    return requested, None


def fp8_support(torch: Any, device: Any) -> tuple[Any | None, str | None]:
    """The FP8 (E4M3) dtype ``torch._scaled_mm`` takes on ``device``, or why FP8 is unavailable."""
    if not is_gpu(device):
        return None, (
            "FP8 GEMMs are measured on GPUs only: a CPU has no FP8 matrix units, and "
            "torch._scaled_mm on a CPU is a reference implementation, not the path under test"
        )
    if not hasattr(torch, "_scaled_mm"):
        return None, f"torch {torch.__version__} has no torch._scaled_mm"
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        if arch.startswith("gfx94"):
            dtype = getattr(torch, "float8_e4m3fnuz", None)  # MI300 series: FNUZ encoding
        elif arch.startswith(("gfx95", "gfx12")):
            dtype = getattr(torch, "float8_e4m3fn", None)  # MI350 series: OCP encoding
        else:
            return None, f"{props.name} ({arch or 'unknown arch'}) has no FP8 matrix units"
    else:
        if (props.major, props.minor) < (8, 9):
            return None, (
                f"{props.name} (compute capability {props.major}.{props.minor}) has no FP8 "
                "tensor cores (8.9 or newer needed)"
            )
        dtype = getattr(torch, "float8_e4m3fn", None)
    if dtype is None:
        return None, f"torch {torch.__version__} has no FP8 E4M3 dtype for this device"
    try:
        a = torch.randn(32, 32, device=device).to(dtype)
        b = torch.randn(32, 32, device=device).to(dtype)
        one = torch.ones((), device=device, dtype=torch.float32)
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except Exception as exc:  # noqa: BLE001 - any failure means "unavailable", with the reason
        return None, f"torch._scaled_mm failed on {props.name}: {_first_line(exc)}"
    return dtype, None


def _operands(torch: Any, device: Any, shape: GemmShape, dtype: Any, bias: bool) -> dict[str, Any]:
    """Storage for one shape in the layout of its pass (filled by ``refill``)."""
    m, n, k = shape.m, shape.n, shape.k
    empty = lambda *size: torch.empty(*size, device=device, dtype=dtype)  # noqa: E731
    if shape.pass_ == "fwd":
        ops = {"a": empty(m, k), "b": empty(n, k)}  # x [m, k], w [n, k]: x @ w.T
    elif shape.pass_ == "bwd_data":
        ops = {"a": empty(m, k), "b": empty(k, n)}  # dy [m, k], w [k, n]: dy @ w
    else:
        ops = {"a": empty(k, m), "b": empty(k, n)}  # dy [k, m], x [k, n]: dy.T @ x
    if bias:
        ops["bias"] = empty(n)
    return ops


def _refill(tensors: Iterable[Any]) -> Callable[[], None]:
    tensors = list(tensors)

    def prepare() -> None:
        for tensor in tensors:
            tensor.normal_()

    return prepare


def _matmul_fn(torch: Any, shape: GemmShape, ops: dict[str, Any]) -> Callable[[Any], Any]:
    a, b = ops["a"], ops["b"]
    if shape.pass_ == "fwd":
        return lambda _: torch.matmul(a, b.t())
    if shape.pass_ == "bwd_data":
        return lambda _: torch.matmul(a, b)
    return lambda _: torch.matmul(a.t(), b)


def gemm_case(
    shape: GemmShape,
    *,
    op: str,
    dtype: str,
    dtype_used: str | None,
    device_index: int,
    times: Sequence[float] | None = None,
    status: str = "ok",
    reason: str | None = None,
) -> dict[str, Any]:
    """One result row; TFLOP/s is the shape's FLOPs over the median (and over the minimum) time."""
    stats = describe(times) if times else None
    return {
        "device_index": device_index,
        "group": shape.group,
        "name": shape.name,
        "pass": shape.pass_,
        "layout": shape.layout if op != FP8_OP else "a @ b.T (row-major a, column-major b)",
        "op": op,
        "dtype": dtype,
        "dtype_used": dtype_used,
        "m": shape.m,
        "n": shape.n,
        "k": shape.k,
        "flops": shape.flops,
        "status": status,
        "reason": reason,
        "time_s": None
        if stats is None
        else {
            "median": stats.median,
            "mean": stats.mean,
            "min": stats.min,
            "max": stats.max,
            "p5": stats.p5,
            "p95": stats.p95,
            "cv": stats.cv,
            "count": stats.count,
        },
        "tflops": None if stats is None else tflops(shape.flops, stats.median),
        "tflops_max": None if stats is None else tflops(shape.flops, stats.min),
    }


def _timed(
    torch: Any,
    device: Any,
    method: Method,
    flush: Callable[[int], None],
    prepare: Callable[[], Any],
    fn: Callable[[Any], Any],
) -> list[float]:
    with torch.no_grad():
        return measure(torch, device, method, prepare, [fn], flush)[0]


def _release(torch: Any, device: Any) -> None:
    if is_gpu(device):
        torch.cuda.empty_cache()


def run_gemms(
    torch: Any,
    device: Any,
    device_index: int,
    shapes: Sequence[GemmShape],
    *,
    dtypes: Sequence[str],
    method: Method,
    flush: Callable[[int], None],
    fp8_dtype: Any = None,
    fp8_reason: str | None = None,
    forward_ops: Sequence[str] = FORWARD_OPS,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Time every shape in every requested dtype on one device; failures become rows."""
    import torch.nn.functional as F  # noqa: N812 - torch's own spelling

    rows: list[dict[str, Any]] = []
    for requested in dtypes:
        if requested == "fp8":
            if fp8_dtype is None:
                rows.append(
                    gemm_case(
                        GemmShape(name="*", pass_="fwd", m=1, n=1, k=1),
                        op=FP8_OP,
                        dtype="fp8",
                        dtype_used=None,
                        device_index=device_index,
                        status="unavailable",
                        reason=fp8_reason,
                    )
                )
                continue
            for shape in shapes:
                rows.append(_fp8_case(torch, device, device_index, shape, method, flush, fp8_dtype))
                if progress:
                    progress(_describe_row(rows[-1]))
            continue
        used, note = resolve_dtype(torch, device, requested)
        dtype = getattr(torch, TORCH_DTYPES[used])
        for shape in shapes:
            ops = forward_ops if shape.pass_ == "fwd" else ("matmul",)
            for op in ops:
                operands = fn = None
                try:
                    operands = _operands(torch, device, shape, dtype, bias=op == "linear+bias")
                    if op == "matmul":
                        fn = _matmul_fn(torch, shape, operands)
                    elif op == "linear":
                        fn = lambda _, o=operands: F.linear(o["a"], o["b"])  # noqa: E731
                    elif op == "linear+bias":
                        fn = lambda _, o=operands: F.linear(o["a"], o["b"], o["bias"])  # noqa: E731
                    else:
                        raise ValueError(f"unknown GEMM operator {op!r}")
                    times = _timed(torch, device, method, flush, _refill(operands.values()), fn)
                    row = gemm_case(
                        shape,
                        op=op,
                        dtype=requested,
                        dtype_used=used,
                        device_index=device_index,
                        times=times,
                        reason=note,
                    )
                except RuntimeError as exc:  # out of memory, unsupported shape
                    row = gemm_case(
                        shape,
                        op=op,
                        dtype=requested,
                        dtype_used=used,
                        device_index=device_index,
                        status="failed",
                        reason=_first_line(exc),
                    )
                finally:
                    operands = fn = None
                    _release(torch, device)
                rows.append(row)
                if progress:
                    progress(_describe_row(row))
    return rows


def _fp8_case(
    torch: Any,
    device: Any,
    device_index: int,
    shape: GemmShape,
    method: Method,
    flush: Callable[[int], None],
    fp8_dtype: Any,
) -> dict[str, Any]:
    """``torch._scaled_mm`` with per-tensor scales; FP8 GEMMs take a row-major × column-major
    pair, so every pass is measured in that layout (as FP8 training recipes transpose to it)."""
    if any(dim % 16 for dim in (shape.m, shape.n, shape.k)):
        return gemm_case(
            shape,
            op=FP8_OP,
            dtype="fp8",
            dtype_used=None,
            device_index=device_index,
            status="skipped",
            reason="torch._scaled_mm needs every dimension divisible by 16",
        )
    try:
        staging_a = torch.empty(shape.m, shape.k, device=device, dtype=torch.bfloat16)
        staging_b = torch.empty(shape.n, shape.k, device=device, dtype=torch.bfloat16)
        a = torch.empty(shape.m, shape.k, device=device, dtype=fp8_dtype)
        b = torch.empty(shape.n, shape.k, device=device, dtype=fp8_dtype)
        one = torch.ones((), device=device, dtype=torch.float32)

        def prepare() -> None:
            staging_a.normal_()
            staging_b.normal_()
            a.copy_(staging_a)
            b.copy_(staging_b)

        def fn(_: Any) -> Any:
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        times = _timed(torch, device, method, flush, prepare, fn)
        used = str(fp8_dtype).replace("torch.", "")
        return gemm_case(shape, op=FP8_OP, dtype="fp8", dtype_used=used, device_index=device_index, times=times)
    except RuntimeError as exc:
        return gemm_case(
            shape,
            op=FP8_OP,
            dtype="fp8",
            dtype_used=None,
            device_index=device_index,
            status="failed",
            reason=_first_line(exc),
        )
    finally:
        _release(torch, device)


def _describe_row(row: dict[str, Any]) -> str:
    where = f"[{row['device_index']}] {row['name']}/{row['pass']} {row['m']}x{row['n']}x{row['k']}"
    what = f"{row['op']} {row['dtype']}"
    if row["status"] != "ok":
        return f"{where} {what}: {row['status']} ({row['reason']})"
    return f"{where} {what}: {row['tflops']:.4g} TFLOP/s"
