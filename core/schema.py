"""The versioned result schema: one JSON document per run.

Every backend's output ends up as a :class:`Result`.  Per-iteration records
hold what was measured (or read from a log); :class:`Summary` holds what the
core derived from them (see :mod:`tprimat.metrics`).  Documents are strict
JSON: NaN and infinities, which real losses contain, are written as the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` instead of being
dropped.  Loading validates every field and names the one that is wrong.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn
from cattrs.v import format_exception

from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError

SCHEMA_VERSION = 1

RunStatus = Literal["completed", "failed", "interrupted", "partial"]

_nonneg = attrs.validators.optional(attrs.validators.ge(0))


class ResultError(TprimatError):
    """A result document that cannot be read or does not match the schema."""


@attrs.frozen(kw_only=True)
class RunInfo:
    id: str
    backend: str
    platform: str | None  # amd | nvidia | cpu, as captured where the run happened
    framework: str | None
    model: str
    dataset: str  # "mock" or the dataset's name
    status: RunStatus
    started_at: str | None  # ISO 8601, UTC
    finished_at: str | None
    tprimat_version: str


@attrs.frozen(kw_only=True)
class Hardware:
    """Captured on the machine that ran the job; all null when only a log was parsed."""

    device_name: str | None = None
    device_count_per_node: int | None = None
    nodes: int | None = None
    memory_per_device_gib: float | None = None
    driver_version: str | None = None
    hostname: str | None = None
    cpu: str | None = None
    captured_at: str | None = None
    source: str | None = None  # how it was captured, e.g. "nvidia-smi", "manifest.json"


@attrs.frozen(kw_only=True)
class Software:
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    collectives: str | None = None  # e.g. "NCCL 2.21.5", "RCCL 2.22.3"
    framework_version: str | None = None
    container_image: str | None = None
    extra: dict[str, str] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class ResultConfig:
    """The config the run used, with the fields derived numbers depend on spelled out."""

    model: str
    seq_length: int | None
    global_batch_size: int | None
    micro_batch_size: int | None
    world_size: int | None
    precision: str | None
    methodology: str
    dataset_fingerprint: str | None = None
    config_fingerprint: str | None = None
    settings: dict[str, Any] = attrs.Factory(dict)  # the full benchmark config


@attrs.frozen(kw_only=True)
class IterationRecord:
    """One training iteration (or one log line covering several, see ``covers_iterations``)."""

    iteration: int = attrs.field(validator=attrs.validators.ge(0))
    step_time_s: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )
    tokens: int | None = attrs.field(default=None, validator=_nonneg)
    tokens_per_s_per_gpu: float | None = None  # computed by the core, never by a parser
    loss: float | None = None  # NaN and inf are kept
    lr: float | None = None
    grad_norm: float | None = None
    skipped: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    covers_iterations: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    profiled: bool = False
    global_batch_size: int | None = None  # as logged, cross-checked against the config
    consumed_samples: int | None = None
    mem_allocated_gib: float | None = None  # allocator: live tensors (GiB = 2**30 bytes)
    mem_max_allocated_gib: float | None = None  # allocator peak
    mem_reserved_gib: float | None = None  # allocator: cached by PyTorch
    mem_max_reserved_gib: float | None = None
    mem_device_used_gib: float | None = None  # driver view (nvidia-smi / amd-smi)
    mem_device_total_gib: float | None = None
    mem_rss_gib: float | None = None  # host process resident set (CPU runs)
    energy_j: float | None = None  # GPU energy during the iteration, all local GPUs
    timestamp: str | None = None
    source: str | None = None  # "file:line" it was read from
    reported: dict[str, float | str | None] = attrs.Factory(dict)  # the framework's own figures


@attrs.frozen(kw_only=True)
class Stats:
    """Distribution of a per-iteration quantity over the measured iterations."""

    count: int
    mean: float
    median: float
    p5: float
    p95: float
    min: float
    max: float
    cv: float | None  # sample standard deviation / mean; null for a single value


@attrs.frozen(kw_only=True)
class Summary:
    """Numbers the core derived from the iterations (see docs/metrics.md)."""

    warmup_iterations: int
    measured_iterations: int
    step_time_s: Stats | None = None
    tokens_per_s: Stats | None = None
    tokens_per_s_per_gpu: Stats | None = None
    flops_per_token: float | None = None
    flops_formula: str | None = None
    tflops_per_gpu: float | None = None  # at the median step time
    peak_tflops: float | None = None
    peak_source: str | None = None
    mfu: float | None = None
    mamf_tflops: float | None = None  # measured max achievable matmul TFLOP/s of this device
    mamf_utilisation: float | None = None  # tflops_per_gpu / mamf_tflops
    mamf_source: str | None = None  # the microbench result it came from
    mem_max_allocated_gib: float | None = None
    mem_max_reserved_gib: float | None = None
    mem_device_used_gib: float | None = None
    mem_rss_gib: float | None = None
    energy_per_token_j: float | None = None
    final_loss: float | None = None
    reported: dict[str, Stats] = attrs.Factory(dict)  # the framework's own figures, secondary


@attrs.frozen(kw_only=True)
class Provenance:
    inputs: list[str] = attrs.Factory(list)
    parser: str | None = None
    parser_version: str | None = None
    notes: list[str] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class Result:
    """One run, as every tprimat tool reads and writes it."""

    schema_version: int = SCHEMA_VERSION
    run: RunInfo
    hardware: Hardware = Hardware()
    software: Software = Software()
    config: ResultConfig
    iterations: list[IterationRecord] = attrs.Factory(list)
    summary: Summary
    provenance: Provenance = Provenance()


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _unstructure_float(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _structure_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _structure_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _structure_reported(value: Any, _: type) -> float | str | None:
    if value is None or isinstance(value, str) and value not in _NON_FINITE:
        return value
    return _structure_float(value, float)


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_unstructure_hook(float, _unstructure_float)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(int, _structure_int)
    # bool is a subclass of int: without its own hook the int hook rejects every bool.
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(float | str | None, _structure_reported)
    for cls in (RunInfo, Hardware, Software, ResultConfig, IterationRecord, Stats, Summary,
                Provenance, Result):
        converter.register_structure_hook(
            cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True)
        )
    return converter


@functools.cache
def _get_converter() -> cattrs.Converter:
    """The converter, built on first use (building it costs more than the rest of the import)."""
    return _make_converter()


def result_to_dict(result: Result) -> dict[str, Any]:
    """The JSON-ready form of ``result`` (non-finite floats as strings)."""
    data = _get_converter().unstructure(result)
    return _replace_non_finite(data)


def _replace_non_finite(value: Any) -> Any:
    # cattrs does not route floats inside dict[str, Any] through the float hook.
    if isinstance(value, float):
        return _unstructure_float(value)
    if isinstance(value, dict):
        return {k: _replace_non_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_non_finite(v) for v in value]
    return value


def result_from_dict(data: Any, *, origin: str = "result") -> Result:
    """Validate and structure a result document; errors name the field (``$.iterations[3]...``)."""
    if not isinstance(data, dict):
        raise ResultError(f"{origin}: not a tprimat result (expected a JSON object)")
    version = data.get("schema_version")
    if version is None:
        raise ResultError(f"{origin}: not a tprimat result (no schema_version)")
    if version != SCHEMA_VERSION:
        raise ResultError(
            f"{origin}: schema_version {version!r} is not supported by tprimat "
            f"(this version reads {SCHEMA_VERSION})"
        )
    try:
        return _get_converter().structure(data, Result)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(
            cattrs.transform_error(exc, path="$", format_exception=_describe_problem)
        )
        raise ResultError(f"{origin}: invalid result: {problems}") from None


def _describe_problem(exc: BaseException, type_: Any) -> str:
    # Validators and literal checks explain themselves; keep their text.
    if not isinstance(exc, KeyError) and str(exc):
        return f"invalid value ({exc})"
    return format_exception(exc, type_)


def dumps_result(result: Result) -> str:
    """Strict JSON text of ``result``."""
    return json.dumps(result_to_dict(result), indent=2, allow_nan=False) + "\n"


def write_result(result: Result, path: str | Path) -> Path:
    """Write ``result`` to ``path`` atomically (never a half-written file), in bounded memory."""
    from tprimat.resultjson import iter_result_json

    return atomic_write_text(path, iter_result_json(result))


def load_result(path: str | Path) -> Result:
    """Read and validate the result at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ResultError(f"{path}: not a tprimat result (not UTF-8 text)") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ResultError(
            f"{path}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise ResultError(f"{path}: {exc}") from None
    return result_from_dict(data, origin=str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON constant {name}; tprimat writes it as the string \"{name}\"")
