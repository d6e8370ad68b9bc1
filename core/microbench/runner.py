"""Run the microbenchmarks on every GPU of this node (or on the CPU) and build the document.

torch is imported here, inside :func:`run_microbench`, never at module import.
Every GPU is measured on its own, one after the other, so that a slow GPU
shows up by itself (in data-parallel training the slowest GPU sets the pace).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tprimat import __version__
from tprimat.hardware.environment import performance_environment
from tprimat.microbench.formulas import ATTENTION_FORMULA, GEMM_FORMULA
from tprimat.microbench.shapes import ShapeError, model_gemm_shapes, sweep_shapes
from tprimat.microbench.store import (
    ATTENTION_CASE_FIELDS,
    GEMM_CASE_FIELDS,
    KIND,
    SCHEMA_VERSION,
    MicrobenchError,
    case_spread,
    summarize,
)
from tprimat.settings.models import ModelSpec

if TYPE_CHECKING:
    from tprimat.microbench.timing import Method

What = Literal["gemm", "attention", "all"]
KNOWN_DTYPES = ("bf16", "fp16", "fp32", "fp8")

INPUTS = "every operand refilled from a standard normal distribution before each iteration"
STATISTIC = (
    "TFLOP/s = FLOPs / median time; max TFLOP/s = FLOPs / fastest time; MAMF per GPU = the "
    "highest median-based TFLOP/s over all shapes and operators of a dtype; node MAMF = the "
    "slowest GPU's"
)


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise MicrobenchError(
            f"microbench needs torch ({exc}); install tprimat with the ml extra, or run it inside the vendor container"
        ) from None
    return torch


def select_devices(torch: Any, requested: str = "auto") -> list[Any]:
    """Every GPU of the node (``cuda`` covers ROCm's HIP devices too), else the CPU."""
    if requested not in ("auto", "cuda", "cpu"):
        raise MicrobenchError(f"unknown device {requested!r}; use auto, cuda or cpu")
    has_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if requested == "cuda" and not has_gpu:
        raise MicrobenchError("--device cuda: no CUDA or ROCm GPU is visible to torch")
    if requested == "cpu" or not has_gpu:
        return [torch.device("cpu")]
    return [torch.device("cuda", index) for index in range(torch.cuda.device_count())]


def describe_device(torch: Any, device: Any) -> dict[str, Any]:
    """Identity of one device as the runtime reports it."""
    if device.type == "cpu":
        from tprimat.hardware.platform import cpu_model

        return {"index": 0, "type": "cpu", "name": cpu_model() or "cpu", "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(device.index)
    info = {
        "index": device.index,
        "type": "gpu",
        "name": props.name,
        "memory_gib": props.total_memory / 2**30,
        "multiprocessors": getattr(props, "multi_processor_count", None),
    }
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        info["uuid"] = str(uuid)
    arch = getattr(props, "gcnArchName", None)
    if arch:
        info["arch"] = arch
    else:
        info["compute_capability"] = f"{props.major}.{props.minor}"
    return info


def _software(torch: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
    }
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - absent in CPU builds
        info["cudnn"] = None
    from tprimat.microbench.attention import flash_attn_module

    module, _ = flash_attn_module()
    info["flash_attn"] = getattr(module, "__version__", None) if module else None
    if torch.cuda.is_available():  # which GEMM library torch calls changes the figures
        try:
            library = torch.backends.cuda.preferred_blas_library()
            info["blas_library"] = str(library).split(".")[-1].lower()
        except Exception:  # noqa: BLE001 - older torch
            info["blas_library"] = None
        matmul = torch.backends.cuda.matmul
        info["allow_bf16_reduced_precision_reduction"] = getattr(matmul, "allow_bf16_reduced_precision_reduction", None)
        info["allow_tf32"] = getattr(matmul, "allow_tf32", None)
    return info


def plan_shapes(
    model: ModelSpec,
    *,
    seq_length: int,
    micro_batch_size: int,
    tensor_parallel: int,
    sweep_step: int,
    sweep_radius: int,
) -> tuple[list[Any], list[Any]]:
    """Model shapes (every pass) and the sweep around the forward shapes, checked without torch."""
    try:
        shapes = model_gemm_shapes(
            model, seq_length=seq_length, micro_batch_size=micro_batch_size, tensor_parallel=tensor_parallel
        )
        forward = [s for s in shapes if s.pass_ == "fwd"]
        sweep = sweep_shapes(forward, step=sweep_step, radius=sweep_radius) if sweep_radius else []
    except ShapeError as exc:
        raise MicrobenchError(str(exc)) from None
    return shapes, sweep


def parse_dtypes(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    dtypes = []
    for item in (i.strip().lower() for i in items):
        if not item:
            continue
        if item not in KNOWN_DTYPES:
            raise MicrobenchError(f"unknown dtype {item!r}; known: {', '.join(KNOWN_DTYPES)}")
        if item not in dtypes:
            dtypes.append(item)
    if not dtypes:
        raise MicrobenchError("no dtype given")
    return dtypes


def _flash_attn_runs(device: Any) -> bool:
    from tprimat.microbench.attention import flash_attn_module

    return device.type == "cuda" and flash_attn_module()[0] is not None


def _tracker(
    progress: Callable[[str], None] | None,
    what: What,
    shapes: Sequence[Any],
    dtypes: Sequence[str],
    *,
    fp8: bool,
    flash_attn: bool,
    devices: int,
) -> Callable[[str], None] | None:
    """``progress`` wrapped with a bar and an estimate of the time left over every device's cases."""
    if progress is None:
        return None
    from tprimat.microbench.defaults import CaseProgress

    return CaseProgress(planned_cases(what, shapes, dtypes, fp8=fp8, flash_attn=flash_attn) * devices, progress)


def planned_cases(what: What, shapes: Sequence[Any], dtypes: Sequence[str], *, fp8: bool, flash_attn: bool) -> int:
    """How many timed cases one device runs (what the progress estimate counts)."""
    from tprimat.microbench.attention import ATTENTION_VARIANTS
    from tprimat.microbench.gemm import FORWARD_OPS

    total = 0
    for dtype in dtypes:
        if what in ("gemm", "all"):
            if dtype == "fp8":
                total += len(shapes) if fp8 else 0
            else:
                total += sum(len(FORWARD_OPS) if s.pass_ == "fwd" else 1 for s in shapes)
        if what in ("attention", "all") and dtype != "fp8":
            total += len(ATTENTION_VARIANTS) * (2 if flash_attn else 1)
    return total


@attrs.frozen(kw_only=True)
class _Request:
    """What :func:`run_microbench` was asked to measure, checked before torch is imported."""

    what: What
    model: ModelSpec
    dtypes: list[str]
    tensor_parallel: int
    seq_length: int
    micro_batch_size: int
    warmup: int
    iterations: int
    sweep_step: int
    sweep_radius: int
    window: int
    flush_bytes: int | None
    use_flash_attn: bool
    seed: int

    def config(self) -> dict[str, Any]:
        """The ``config`` section of the document."""
        return {
            "what": self.what,
            "model": self.model.name,
            "tensor_parallel": self.tensor_parallel,
            "seq_length": self.seq_length,
            "micro_batch_size": self.micro_batch_size,
            "tokens": self.seq_length * self.micro_batch_size,
            "dtypes": list(self.dtypes),
            "window": self.window,
            "sweep_step": self.sweep_step,
            "sweep_radius": self.sweep_radius,
            "seed": self.seed,
        }


@attrs.define
class _Measured:
    """What the devices gave, in device order: identities, methods and result rows."""

    devices: list[dict[str, Any]] = attrs.Factory(list)
    methods: list[Method] = attrs.Factory(list)
    gemm_rows: list[dict[str, Any]] = attrs.Factory(list)
    attention_rows: list[dict[str, Any]] = attrs.Factory(list)
    tracker: Callable[[str], None] | None = None


def _check_request(what: str, dtypes: str | Sequence[str], window: int) -> list[str]:
    """Refuse an unknown microbenchmark, dtype or a non-positive window; the parsed dtypes."""
    if what not in ("gemm", "attention", "all"):
        raise MicrobenchError(f"unknown microbenchmark {what!r}; use gemm, attention or all")
    parsed = parse_dtypes(dtypes)
    if window <= 0:
        raise MicrobenchError(f"the sliding window must be positive, got {window}")
    return parsed


def _measure_device(
    torch: Any,
    dev: Any,
    index: int,
    request: _Request,
    cases: list[Any],
    measured: _Measured,
    *,
    device_count: int,
    progress: Callable[[str], None] | None,
) -> None:
    """Seed, describe and measure one device, appending what it gave to ``measured``.

    The progress tracker is made on the first device, for the cases of every device.
    """
    from tprimat.microbench.attention import run_attention
    from tprimat.microbench.gemm import fp8_support, run_gemms
    from tprimat.microbench.timing import make_flush, method_for

    torch.manual_seed(request.seed)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        torch.cuda.manual_seed(request.seed)
    info = describe_device(torch, dev)
    method = method_for(
        torch, dev, warmup=request.warmup, iterations=request.iterations, flush_bytes=request.flush_bytes
    )
    measured.methods.append(method)
    flush = make_flush(torch, dev, method.flush_bytes)
    fp8_dtype, fp8_reason = fp8_support(torch, dev) if "fp8" in request.dtypes else (None, None)
    info["fp8"] = {
        "available": fp8_dtype is not None,
        "reason": fp8_reason,
        "dtype": str(fp8_dtype).replace("torch.", "") if fp8_dtype else None,
    }
    measured.devices.append(info)
    measured.tracker = measured.tracker or _tracker(
        progress,
        request.what,
        cases,
        request.dtypes,
        fp8=fp8_dtype is not None,
        flash_attn=request.use_flash_attn and _flash_attn_runs(dev),
        devices=device_count,
    )
    if request.what in ("gemm", "all"):
        measured.gemm_rows += run_gemms(
            torch,
            dev,
            index,
            cases,
            dtypes=request.dtypes,
            method=method,
            flush=flush,
            fp8_dtype=fp8_dtype,
            fp8_reason=fp8_reason,
            progress=measured.tracker,
        )
    if request.what in ("attention", "all"):
        t = request.tensor_parallel
        measured.attention_rows += run_attention(
            torch,
            dev,
            index,
            batch=request.micro_batch_size,
            heads=request.model.num_attention_heads // t,
            kv_heads=request.model.num_query_groups // t,
            seq_length=request.seq_length,
            head_dim=request.model.kv_channels,
            window=request.window,
            dtypes=request.dtypes,
            method=method,
            flush=flush,
            use_flash_attn=request.use_flash_attn,
            progress=measured.tracker,
        )
    del flush
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def _document(
    torch: Any, request: _Request, devices: list[Any], measured: _Measured, created: datetime
) -> dict[str, Any]:
    """The versioned document, without its summary; the platform is detected after the measurements."""
    from tprimat.hardware.platform import detect

    platform = detect()
    gpu = devices[0].type == "cuda"
    described, methods = measured.devices, measured.methods
    gemm_rows, attention_rows = measured.gemm_rows, measured.attention_rows
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "created_at": created.isoformat(timespec="seconds"),
        "tprimat_version": __version__,
        "host": socket.gethostname(),
        "platform": platform.platform if gpu else "cpu",
        "device_name": described[0]["name"],
        "platform_device_name": platform.device_name if gpu else None,
        "partition": attrs.asdict(platform.partition) if gpu and platform.partition else None,
        "device_count": len(described),
        "devices": described,
        "software": _software(torch),
        "environment": performance_environment(),
        "config": request.config(),
        "method": {
            "warmup": request.warmup,
            "iterations": request.iterations,
            "timer": methods[0].timer,
            "flush_bytes": [m.flush_bytes for m in methods],
            "cache_bytes": [m.cache_bytes for m in methods],
            "inputs": INPUTS,
            "statistic": STATISTIC,
            "devices": "each device measured separately, one after the other",
        },
        "formulas": {"gemm": GEMM_FORMULA, "attention": ATTENTION_FORMULA},
        "gemm": gemm_rows,
        "attention": attention_rows,
        "gemm_spread": case_spread(gemm_rows, GEMM_CASE_FIELDS),
        "attention_spread": case_spread(attention_rows, ATTENTION_CASE_FIELDS, metric="fwd+bwd"),
    }


def _run_notes(described: list[dict[str, Any]], methods: list[Method]) -> list[str]:
    """Notes about the run itself: mixed devices, and a flush smaller than a device's cache."""
    notes = []
    names = sorted({d["name"] for d in described})
    if len(names) > 1:
        notes.append(f"mixed devices on this node: {', '.join(names)}")
    for m in methods:
        if m.cache_bytes and m.flush_bytes < m.cache_bytes:
            notes.append(
                f"flush of {m.flush_bytes} bytes is smaller than the {m.cache_bytes}-byte "
                "cache: operands may stay cached between iterations"
            )
            break
    return notes


def run_microbench(
    *,
    what: What,
    model: ModelSpec,
    dtypes: str | Sequence[str] = ("bf16", "fp8"),
    tensor_parallel: int = 1,
    seq_length: int = 8192,
    micro_batch_size: int = 1,
    warmup: int = 5,
    iterations: int = 30,
    sweep_step: int = 256,
    sweep_radius: int = 2,
    window: int = 4096,
    device: str = "auto",
    flush_bytes: int | None = None,
    use_flash_attn: bool = True,
    seed: int = 1234,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure, on each device, and return the versioned document (with its summary)."""
    request = _Request(
        what=what,
        model=model,
        dtypes=_check_request(what, dtypes, window),
        tensor_parallel=tensor_parallel,
        seq_length=seq_length,
        micro_batch_size=micro_batch_size,
        warmup=warmup,
        iterations=iterations,
        sweep_step=sweep_step,
        sweep_radius=sweep_radius,
        window=window,
        flush_bytes=flush_bytes,
        use_flash_attn=use_flash_attn,
        seed=seed,
    )
    shapes, sweep = plan_shapes(
        model,
        seq_length=seq_length,
        micro_batch_size=micro_batch_size,
        tensor_parallel=tensor_parallel,
        sweep_step=sweep_step,
        sweep_radius=sweep_radius,
    )
    torch = _import_torch()
    created = datetime.now(UTC)
    devices = select_devices(torch, device)
    measured = _Measured()
    for index, dev in enumerate(devices):
        _measure_device(
            torch, dev, index, request, shapes + sweep, measured, device_count=len(devices), progress=progress
        )
    document = _document(torch, request, devices, measured, created)
    summary = summarize(document)
    summary["notes"] = _run_notes(measured.devices, measured.methods) + summary["notes"]
    document["summary"] = summary
    return document
