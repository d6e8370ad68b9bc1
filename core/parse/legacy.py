"""Import results written by the earlier tprimat scripts into the current schema.

Two legacy shapes exist:

* ``benchmark_{cuda,rocm}_<model>.json`` — written by a training callback:
  ``gpu_info``, ``training_config``, ``performance_metrics``, ``raw_step_times``
  and a ``memory_metrics`` block (allocated and reserved).
* ``train_{amd,nvd}_<framework>_<model>.json`` — written either by a training
  callback (``gpu_info.software_stack`` is the framework, ``"nemo"`` or
  ``"prim"``) or by a log extractor that ran after training on the same
  machine (``software_stack`` is ``"rocm"`` or ``"cuda"``): ``step_times``,
  ``loss_values``, ``learning_rates`` and sometimes ``memory_metrics``.

Nothing the legacy file computed is trusted: iterations are rebuilt from the
recorded step times and handed to :func:`tprimat.result.builder.assemble_result`,
which computes tokens/s/GPU from global batch × sequence length / step time /
world size like for every other result.  Every legacy figure is then checked
against what the recorded step times give, and each disagreement is written
to ``provenance.notes`` with both values.

Units: the earlier scripts divided bytes by 10⁹ and called the result "gb".
The data shows it: an "NVIDIA H100 80GB HBM3" reports ``total_memory_gb``
85.018, which is 79.18 GiB (the capacity PyTorch reports for that part); an
MI300X reports 206.14, i.e. 191.98 GiB.  Read as GiB those figures would exceed
the devices' memory.  Memory is therefore converted from GB (10⁹ bytes) to GiB
(2³⁰ bytes) and the conversion is noted, except where a figure is already GiB: the
log extractor copied Primus's ``hip mem usage`` (bytes / 1024³ printed as "GB") as is.
Every memory figure is filed under the quantity it is (see :func:`_memory`).

A stored throughput that differs from the recomputation by an exact integer factor
means a recorded input is probably a default: the result is marked ambiguous (kept
out of comparisons) until the user states the true value (see :func:`_factor_check`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from tprimat import __version__
from tprimat.errors import TprimatError
from tprimat.result.builder import assemble_result
from tprimat.result.metrics import select_measured
from tprimat.result.schema import (
    Caveats,
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
    Summary,
)
from tprimat.settings.fairness import config_fingerprint, fair_values

GB = 1e9
GIB = 2**30

#: Model names in legacy file names -> tprimat model registry names.
LEGACY_MODELS = {"llama": "llama3.1-8b", "qwen": "qwen2.5-7b"}

#: Framework part of ``train_<platform>_<framework>_<model>.json`` -> (backend, framework).
LEGACY_FRAMEWORKS = {
    "prim": ("amd_primus", "Primus"),
    "nemo": ("nvd_nemo", "NeMo"),
    "mega": (None, "Megatron-LM"),
    "deep": (None, "DeepSpeed"),
    "fsdp": (None, "PyTorch FSDP"),
    "tran": (None, "Transformers"),
}

#: ``gpu_info.software_stack`` written by a training callback -> (backend, framework).
LEGACY_STACKS = {"prim": ("amd_primus", "Primus"), "nemo": ("nvd_nemo", "NeMo")}

_PLATFORMS = {"nvd": "nvidia", "nvidia": "nvidia", "amd": "amd", "cuda": "nvidia", "rocm": "amd"}

_BENCHMARK_NAME = re.compile(r"benchmark_(?P<stack>cuda|rocm)_(?P<model>[A-Za-z0-9.\-]+)")
_TRAIN_NAME = re.compile(r"train_(?P<platform>amd|nvd)_(?P<framework>[a-z]+)_(?P<model>[A-Za-z0-9.\-]+)")

#: Relative tolerance under which a legacy figure agrees (legacy files round to 3–5 decimals).
AGREEMENT_RTOL = 1e-3

PARSER_NAME = "tprimat import-legacy"


class LegacyError(TprimatError):
    """A file that is not a result of the earlier tprimat scripts, or one that cannot be used."""


@attrs.frozen(kw_only=True)
class LegacyOptions:
    """What a legacy file does not record; each value used is written to the provenance."""

    model: str | None = None  # tprimat model name; None: from the file name
    precision: str | None = None  # not recorded by the earlier scripts; None: unknown (no MFU)
    dataset: str | None = None  # None: "unknown"
    methodology: str = "iso"
    warmup_iterations: int = 2
    sequence_length: int | None = None  # the true value when the file's own is in doubt
    global_batch_size: int | None = None


def _agrees(legacy: float, ours: float) -> bool:
    return math.isclose(legacy, ours, rel_tol=AGREEMENT_RTOL, abs_tol=1e-9)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _float_list(data: dict[str, Any], key: str, origin: str) -> list[float] | None:
    values = data.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise LegacyError(f"{origin}: {key} is not a list of numbers")
    return [float(v) for v in values]


def identify(path: Path, data: dict[str, Any]) -> dict[str, str | None]:
    """Kind, platform, framework and model parts of a legacy file (from its name or content)."""
    stem = path.name
    # Copies may carry a prefix and suffix (``output__benchmark_cuda_llama.627dfac.json``).
    if match := _BENCHMARK_NAME.search(stem):
        return {
            "kind": "benchmark",
            "platform": _PLATFORMS[match["stack"]],
            "framework_key": None,
            "model_key": match["model"].split(".")[0],
        }
    if match := _TRAIN_NAME.search(stem):
        return {
            "kind": "train",
            "platform": _PLATFORMS[match["platform"]],
            "framework_key": match["framework"],
            "model_key": match["model"].split(".")[0],
        }
    # Renamed file: recognise it by content.
    platform = _PLATFORMS.get(str(data.get("platform")))
    if "raw_step_times" in data:
        return {"kind": "benchmark", "platform": platform, "framework_key": None, "model_key": None}
    if "step_times" in data:
        return {"kind": "train", "platform": platform, "framework_key": None, "model_key": None}
    raise LegacyError(
        f"{path}: not a result of the earlier tprimat scripts "
        "(expected benchmark_{cuda,rocm}_*.json or train_{amd,nvd}_*_*.json with step times)"
    )


def load_legacy(path: str | Path) -> dict[str, Any]:
    """The legacy JSON document at ``path`` (NaN and Infinity tokens are read as floats)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LegacyError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LegacyError(f"{path}: not a legacy result (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LegacyError(f"{path}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise LegacyError(f"{path}: not a legacy result (expected a JSON object)")
    if "schema_version" in data:
        raise LegacyError(f"{path}: already a tprimat result (schema_version present)")
    return data


def _run_id(path: Path) -> str:
    stem = path.name[:-5] if path.name.endswith(".json") else path.name
    return "legacy-" + re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-")


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """The legacy file's block ``key`` when it is an object, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


@attrs.frozen(kw_only=True)
class _Sizes:
    """The workload sizes the import uses (after the user's corrections) and what the file recorded."""

    gbs: int | None
    seq: int | None
    world: int | None
    recorded: dict[str, int | None]


def _sizes(training: dict[str, Any], options: LegacyOptions, notes: list[str]) -> _Sizes:
    gbs = _int(training, "global_batch_size")
    seq = _int(training, "sequence_length")
    recorded = {"sequence_length": seq, "global_batch_size": gbs}
    for key, given in (("sequence_length", options.sequence_length), ("global_batch_size", options.global_batch_size)):
        if given is not None:
            notes.append(
                f"{key} {given} given on import (--{key.replace('_', '-')}); the legacy file records {recorded[key]!r}"
            )
    sizes = _Sizes(
        gbs=options.global_batch_size or gbs,
        seq=options.sequence_length or seq,
        world=_int(training, "num_gpus"),
        recorded=recorded,
    )
    for key, value in (("global_batch_size", sizes.gbs), ("sequence_length", sizes.seq), ("num_gpus", sizes.world)):
        if value is None:
            notes.append(
                f"legacy training_config.{key} is {training.get(key)!r}: no tokens/s can be computed without it"
            )
    return sizes


def _model_and_dataset(ident: dict[str, str | None], options: LegacyOptions, notes: list[str]) -> tuple[str, str]:
    """The model and dataset names, each noted with where it came from (and precision, which no file records)."""
    model = options.model
    if model is None:
        key = ident["model_key"]
        model = LEGACY_MODELS.get(key or "")
        if model is None:
            model = key or "unknown"
            notes.append(f"model {model!r} from the file name is not a registered tprimat model")
        else:
            notes.append(f"model {model} from the legacy file name part {key!r}")
    else:
        notes.append(f"model {model} given on import (--model)")
    if options.precision is None:
        notes.append(
            "precision not recorded by the legacy file: unknown, so no peak and no MFU (TFLOP/s does not depend on it)"
        )
    else:
        notes.append(f"precision {options.precision} given on import (--precision), not recorded by the legacy file")
    dataset = options.dataset or "unknown"
    if options.dataset is None:
        notes.append("dataset not recorded by the legacy file: 'unknown'")
    else:
        notes.append(f"dataset {dataset!r} given on import (--dataset)")
    return model, dataset


def _result_config(
    model: str,
    dataset: str,
    sizes: _Sizes,
    training: dict[str, Any],
    parallel: dict[str, Any],
    options: LegacyOptions,
) -> ResultConfig:
    fair = fair_values(
        model=model,
        methodology=options.methodology,
        dataset=dataset,
        seq_length=sizes.seq,
        global_batch_size=sizes.gbs,
        precision=options.precision,
    )
    return ResultConfig(
        model=model,
        seq_length=sizes.seq,
        global_batch_size=sizes.gbs,
        micro_batch_size=_int(training, "micro_batch_size"),
        world_size=sizes.world,
        precision=options.precision,
        methodology=options.methodology,
        dataset_fingerprint=None,
        config_fingerprint=config_fingerprint(fair),
        settings={"legacy": {"training_config": training, "parallelism_config": parallel}},
    )


def _iterations(
    data: dict[str, Any], step_key: str, origin: str, name: str, extractor: bool, notes: list[str]
) -> tuple[list[float], list[IterationRecord]]:
    """The step times and one record per step time, with losses and rates only where they align."""
    step_times = _float_list(data, step_key, origin)
    if not step_times:
        raise LegacyError(f"{origin}: no {step_key}: nothing to import")
    losses = _float_list(data, "loss_values", origin) or []
    lrs = _float_list(data, "learning_rates", origin) or []
    n = len(step_times)
    align_loss = len(losses) == n
    align_lr = len(lrs) == n
    dropped_hint = (
        " (the earlier log extractor kept only 0 < loss < 10000 and 0 < lr < 1, so a NaN loss "
        "or an lr of 0.0 is the likely missing value)"
        if extractor
        else ""
    )
    if losses and not align_loss:
        notes.append(
            f"legacy file has {len(losses)} loss values for {n} step times: which iterations they "
            f"belong to is unknown, so losses are not imported{dropped_hint}"
        )
    if lrs and not align_lr:
        notes.append(
            f"legacy file has {len(lrs)} learning rates for {n} step times: which iterations they "
            f"belong to is unknown, so learning rates are not imported{dropped_hint}"
        )
    records = []
    bad_times = []
    for index, seconds in enumerate(step_times):
        valid = math.isfinite(seconds) and seconds > 0
        if not valid:
            bad_times.append(index + 1)
        records.append(
            IterationRecord(
                iteration=index + 1,
                step_time_s=seconds if valid else None,
                loss=losses[index] if align_loss else None,
                lr=lrs[index] if align_lr else None,
                source=f"{name}:{step_key}[{index}]",
            )
        )
    if bad_times:
        notes.append(f"step times that are not positive finite numbers at iterations {bad_times}")
    nan_losses = [r.iteration for r in records if r.loss is not None and not math.isfinite(r.loss)]
    if nan_losses:
        notes.append(f"non-finite loss kept at iterations {nan_losses}")
    return step_times, records


def _run_info(
    path: Path,
    data: dict[str, Any],
    ident: dict[str, str | None],
    stack: Any,
    extractor: bool,
    training: dict[str, Any],
    steps: int,
    model: str,
    dataset: str,
    notes: list[str],
) -> RunInfo:
    """Backend and framework from the file's name or stack, and a status from ``max_steps``."""
    backend, framework = None, None
    if ident["framework_key"]:
        backend, framework = LEGACY_FRAMEWORKS.get(ident["framework_key"], (None, None))
        if framework is None:
            framework = ident["framework_key"]
    if stack in LEGACY_STACKS:
        backend = backend or LEGACY_STACKS[stack][0]
        framework = framework or LEGACY_STACKS[stack][1]
    if backend is not None:
        notes.append(
            f"backend {backend} and framework {framework} from the source the legacy "
            "file names (its file name or gpu_info.software_stack)"
        )
    max_steps = _int(training, "max_steps")
    status: Literal["completed", "partial"] = "partial"
    if max_steps is None:
        notes.append(
            f"legacy training_config.max_steps is {training.get('max_steps')!r}: "
            "steps configured unknown, status partial"
        )
    elif max_steps == steps:
        status = "completed"
    else:
        notes.append(f"{steps} step times recorded for max_steps {max_steps}: status partial")
    if extractor:
        notes.append(
            "legacy training_config.max_steps was written by the earlier log extractor as the "
            "number of step times it found, not read from the training config"
        )
    timestamp = _text(data, "timestamp")
    if timestamp:
        notes.append(f"finished_at {timestamp} is the legacy timestamp (local time, zone unknown)")
    return RunInfo(
        id=_run_id(path),
        backend=backend or "legacy",
        platform=ident["platform"],
        framework=framework,
        model=model,
        dataset=dataset,
        status=status,
        started_at=None,
        finished_at=timestamp,
        tprimat_version=__version__,
    )


def _hardware_and_software(
    gpu: dict[str, Any],
    parallel: dict[str, Any],
    ident: dict[str, str | None],
    world: int | None,
    timestamp: str | None,
    extractor: bool,
    notes: list[str],
) -> tuple[Hardware, Software]:
    device_count = _int(gpu, "device_count")
    total_gb = _number(gpu, "total_memory_gb")
    nodes = None
    if device_count and world and world % device_count == 0:
        nodes = world // device_count
    hardware = Hardware(
        device_name=_text(gpu, "device_name"),
        device_count_per_node=device_count,
        nodes=nodes,
        memory_per_device_gib=total_gb * GB / GIB if total_gb is not None else None,
        captured_at=timestamp,
        source="legacy result",
    )
    if total_gb is not None:
        notes.append(
            f"gpu_info.total_memory_gb {_fmt(total_gb)} is in GB (10^9 bytes): {_fmt(total_gb * GB / GIB)} GiB"
        )
    stack = gpu.get("software_stack")
    if extractor:
        notes.append(
            f"gpu_info (software_stack {stack!r}) was detected by the earlier log extractor, "
            "which ran on the training machine right after training, not by the training process"
        )
    version = _text(gpu, "software_version")
    is_rocm = ident["platform"] == "amd"
    software = Software(
        torch=_text(gpu, "pytorch_version"),
        rocm=version if is_rocm else None,
        cuda=version if not is_rocm else None,
        extra={
            k: str(v)
            for k, v in (("legacy_software_stack", stack), ("legacy_parallel_strategy", parallel.get("strategy_name")))
            if v is not None
        },
    )
    return hardware, software


def convert_legacy(
    path: str | Path, options: LegacyOptions | None = None, *, data: dict[str, Any] | None = None
) -> Result:
    """The tprimat :class:`Result` of the legacy file at ``path``."""
    options = options or LegacyOptions()
    path = Path(path)
    data = load_legacy(path) if data is None else data
    ident = identify(path, data)
    notes: list[str] = []
    gpu, training = _section(data, "gpu_info"), _section(data, "training_config")
    performance, parallel = _section(data, "performance_metrics"), _section(data, "parallelism_config")

    step_key = "raw_step_times" if ident["kind"] == "benchmark" else "step_times"
    # What the training process (callback) wrote vs what a log extractor wrote afterwards.
    stack = gpu.get("software_stack")
    extractor = ident["kind"] == "train" and stack in ("rocm", "cuda")
    if not _float_list(data, step_key, str(path)):
        raise LegacyError(f"{path}: no {step_key}: nothing to import")
    sizes = _sizes(training, options, notes)
    model, dataset = _model_and_dataset(ident, options, notes)
    config = _result_config(model, dataset, sizes, training, parallel, options)
    step_times, records = _iterations(data, step_key, str(path), path.name, extractor, notes)
    run = _run_info(path, data, ident, stack, extractor, training, len(step_times), model, dataset, notes)
    hardware, software = _hardware_and_software(gpu, parallel, ident, sizes.world, run.finished_at, extractor, notes)

    memory_notes, peaks = _memory(_section(data, "memory_metrics"), str(ident["kind"]), extractor, run.platform)
    caveats, factor_notes = _factor_check(
        performance, step_times, sizes.recorded, sizes.gbs, sizes.seq, sizes.world, options
    )
    provenance = Provenance(
        inputs=[str(path)], parser=PARSER_NAME, parser_version=__version__, notes=[*notes, *memory_notes]
    )

    def audit(summary: Summary, finished: Sequence[IterationRecord]) -> list[str]:
        checks = _check_performance(summary, finished, performance, step_times, sizes.gbs, sizes.seq, sizes.world)
        return [*checks, *factor_notes]

    return assemble_result(
        run=run,
        config=config,
        records=records,
        hardware=hardware,
        software=software,
        provenance=provenance,
        warmup_iterations=options.warmup_iterations,
        tensor_parallel=_int(parallel, "tensor_model_parallel_size") or 1,
        run_peaks=peaks,
        caveats=caveats,
        audit=audit,
    )


_SAMPLED = "maximum of {} sampled after each step on rank 0 (a lower bound of its peak)"
_PRIMUS_HIP = (
    "device memory used, the driver's view: Primus's 'hip mem usage' (torch.cuda.mem_get_info), "
    "read from the log by the earlier extractor",
    "GiB (Primus prints bytes / 1024^3 as 'GB'; not converted again)",
)


def _memory_quantity(key: str, kind: str, extractor: bool, platform: str | None) -> tuple[str, float, str, str] | None:
    """(summary field, factor to GiB, quantity, unit) of a legacy memory key; None: unknown.

    * ``benchmark_*`` files (training callback): ``torch.cuda.memory_allocated()`` and
      ``memory_reserved()`` divided by 10⁹: allocator allocated / reserved, GB -> GiB.
    * ``train_*`` files written by the training callback: allocated as above, but its
      "reserved" is ``(total - free) / 10⁹`` from ``torch.cuda.mem_get_info()``: the driver's
      view of device memory used, GB -> GiB.
    * ``train_amd_*`` files written by the log extractor from a Primus log: the values are
      Primus's ``hip mem usage`` (``mem_get_info``, bytes / 1024³ printed as "GB"), copied
      unconverted: already GiB, and the driver's view, not an allocator peak.
    """
    to_gib = GB / GIB
    if extractor:
        if platform == "amd" and key.startswith("peak_"):
            return ("mem_device_used_gib", 1.0, *_PRIMUS_HIP)
        return None
    if key == "peak_memory_allocated_gb":
        return (
            "mem_max_allocated_gib",
            to_gib,
            "allocator allocated: " + _SAMPLED.format("torch.cuda.memory_allocated()"),
            "GB (10^9 bytes)",
        )
    if key == "peak_memory_reserved_gb" and kind == "benchmark":
        return (
            "mem_max_reserved_gib",
            to_gib,
            "allocator reserved: " + _SAMPLED.format("torch.cuda.memory_reserved()"),
            "GB (10^9 bytes)",
        )
    if key == "peak_memory_reserved_gb":
        return (
            "mem_device_used_gib",
            to_gib,
            "device memory used, the driver's view: the training callback's 'reserved' is "
            "(total - free) from torch.cuda.mem_get_info()",
            "GB (10^9 bytes)",
        )
    return None


def _memory(
    memory: dict[str, Any], kind: str, extractor: bool, platform: str | None
) -> tuple[list[str], dict[str, float]]:
    """Memory peaks from the legacy run summary, each under the quantity it really is (GiB by summary field)."""
    notes: list[str] = []
    updates: dict[str, float] = {}
    for key in sorted(memory):
        value = _number(memory, key)
        if value is None:
            continue
        quantity = _memory_quantity(key, kind, extractor, platform)
        if quantity is not None:
            field, factor, what, unit = quantity
            gib = value * factor
            updates[field] = max(gib, updates.get(field) or 0.0)
            notes.append(
                f"memory_metrics.{key} {_fmt(value)} {unit} = {_fmt(gib)} GiB, recorded "
                f"as summary.{field} ({what}); no per-iteration memory in the legacy file"
            )
        elif extractor:
            notes.append(
                f"memory_metrics.{key} {_fmt(value)} read from a log by the earlier "
                "extractor: its quantity and unit are unknown, so it is kept here only "
                "(not a schema field)"
            )
        else:
            notes.append(
                f"memory_metrics.{key} {_fmt(value)} GB = {_fmt(value * GB / GIB)} GiB (not a schema field, kept here)"
            )
    if not memory:
        notes.append("no memory figures in the legacy file")
    return notes, updates


def _after_first(step_times: Sequence[float]) -> list[float]:
    """The step times the earlier scripts averaged: iterations 2-N (the first is warm-up), finite ones."""
    return [t for t in step_times[1:] if math.isfinite(t) and t > 0]


def _legacy_mean(after_first: list[float]) -> float | None:
    """The earlier scripts' step time: the plain mean of iterations 2-N (used only to audit their figures)."""
    return sum(after_first) / len(after_first) if after_first else None


def _check_performance(
    summary: Summary,
    iterations: Sequence[IterationRecord],
    performance: dict[str, Any],
    step_times: Sequence[float],
    gbs: int | None,
    seq: int | None,
    world: int | None,
) -> list[str]:
    """A note for every legacy figure that disagrees with what the recorded step times give."""
    notes: list[str] = []
    measured, _ = select_measured(iterations, warmup_iterations=summary.warmup_iterations)
    n = len(step_times)
    after_first = _after_first(step_times)
    span = f"iterations {measured[0].iteration}-{measured[-1].iteration}" if measured else "no iterations"
    legacy_def = "its own definition (iterations 2-N, mean step time)"
    tokens = gbs * seq if gbs and seq else None

    def check(key: str, ours: float | None, what: str, by_legacy_def: float | None) -> None:
        legacy = _number(performance, key)
        if legacy is None or ours is None:
            return
        if _agrees(legacy, ours):
            return
        tail = ""
        if by_legacy_def is not None:
            tail = f"; recomputed by {legacy_def} it is {_fmt(by_legacy_def)}" + (
                " (agrees)" if _agrees(legacy, by_legacy_def) else " (disagrees too)"
            )
        notes.append(f"legacy performance_metrics.{key} = {_fmt(legacy)} disagrees with {_fmt(ours)} ({what}){tail}")

    legacy_mean = _legacy_mean(after_first)
    total_steps = _number(performance, "total_steps")
    if total_steps is not None and int(total_steps) != n:
        notes.append(
            f"legacy performance_metrics.total_steps = {int(total_steps)} disagrees with {n} step times recorded"
        )
    finite = [t for t in step_times if math.isfinite(t) and t > 0]
    check("total_time_seconds", sum(finite), f"sum of the {len(finite)} recorded step times", None)
    if summary.step_time_s is not None:
        stats = summary.step_time_s
        check("avg_step_time_seconds", stats.mean, f"mean step time over {span}", legacy_mean)
        check(
            "min_step_time_seconds",
            stats.min,
            f"minimum step time over {span}",
            min(after_first) if after_first else None,
        )
        check(
            "max_step_time_seconds",
            stats.max,
            f"maximum step time over {span}",
            max(after_first) if after_first else None,
        )
        check(
            "steps_per_second",
            len(measured) / sum(r.step_time_s or 0.0 for r in measured),
            f"measured iterations / their total step time over {span}",
            len(after_first) / sum(after_first) if after_first else None,
        )
    if summary.tokens_per_s is not None:
        check(
            "tokens_per_second",
            summary.tokens_per_s.median,
            f"tprimat median over {span}",
            tokens / legacy_mean if tokens and legacy_mean else None,
        )
    if summary.tokens_per_s_per_gpu is not None:
        check(
            "tokens_per_second_per_gpu",
            summary.tokens_per_s_per_gpu.median,
            f"tprimat median over {span}",
            tokens / legacy_mean / world if tokens and legacy_mean and world else None,
        )
    if "throughput_per_gpu_core" in performance:
        notes.append(
            "legacy performance_metrics.throughput_per_gpu_core "
            f"{performance['throughput_per_gpu_core']!r} not imported "
            "(steps/s divided by a shader-core count; not comparable across vendors)"
        )
    return notes


def integer_factor(stored: float, recomputed: float) -> int | None:
    """``k`` when ``stored`` is ``k`` × ``recomputed``, ``-k`` when it is 1/``k`` of it (k ≥ 2)."""
    if not (stored > 0 and recomputed > 0):
        return None
    for ratio, sign in ((stored / recomputed, 1), (recomputed / stored, -1)):
        k = round(ratio)
        if k >= 2 and math.isclose(ratio, k, rel_tol=AGREEMENT_RTOL):
            return sign * k
    return None


def _candidates(factor: int, gbs: int, seq: int, world: int, per_gpu_only: bool) -> list[str]:
    """The recorded inputs that, changed by ``factor``, make the stored figure agree."""
    k = abs(factor)
    if per_gpu_only:  # the total agrees: only the GPU count can be off
        gpus = world // k if factor > 0 else world * k
        if factor > 0 and world % k:
            return []
        return [f"num_gpus {gpus} (the file records {world})"]
    found = []
    for key, value, other in (
        ("sequence_length", seq, f"global_batch_size {gbs}"),
        ("global_batch_size", gbs, f"sequence_length {seq}"),
    ):
        if factor > 0:
            found.append(f"{key} {value * k} with {other} (the file records {key} {value})")
        elif value % k == 0:
            found.append(f"{key} {value // k} with {other} (the file records {key} {value})")
    return found


def _factor_check(
    performance: dict[str, Any],
    step_times: Sequence[float],
    recorded: dict[str, int | None],
    gbs: int | None,
    seq: int | None,
    world: int | None,
    options: LegacyOptions,
) -> tuple[Caveats | None, list[str]]:
    """Whether the stored throughput and the recomputation differ by an exact integer factor.

    Such a factor means one recorded input is probably a default, not what the run used
    (the earlier log extractor defaulted ``--sequence-length`` to 2048 while Primus's MI300X
    Llama configs run 8192).  Unless the user stated the true value, the result is marked
    ambiguous, which keeps it out of comparisons; both figures are recorded either way.
    """
    stored = _number(performance, "tokens_per_second_per_gpu")
    stored_total = _number(performance, "tokens_per_second")
    after_first = _after_first(step_times)
    rec_gbs, rec_seq = recorded["global_batch_size"], recorded["sequence_length"]
    if stored is None or not after_first or not (rec_gbs and rec_seq and world):
        return None, []
    mean = _legacy_mean(after_first)
    assert mean is not None
    recomputed = rec_gbs * rec_seq / mean / world
    factor = integer_factor(stored, recomputed)
    if factor is None:
        return None, []
    per_gpu_only = stored_total is not None and _agrees(stored_total, recomputed * world)
    candidates = _candidates(factor, rec_gbs, rec_seq, world, per_gpu_only)
    times = f"{abs(factor)}×" if factor > 0 else f"1/{abs(factor)} of"
    figures = {
        "legacy performance_metrics.tokens_per_second_per_gpu (stored)": stored,
        f"recomputed from the recorded global_batch_size {rec_gbs} × sequence_length {rec_seq} "
        f"/ mean step time / {world} GPUs": recomputed,
    }
    what = (
        f"the stored tokens/s/GPU {_fmt(stored)} is exactly {times} the recomputation "
        f"{_fmt(recomputed)} from the recorded inputs: one recorded input is probably a "
        "default, not what the run used"
    )
    given = {
        k: v
        for k, v in (("sequence_length", options.sequence_length), ("global_batch_size", options.global_batch_size))
        if v is not None
    }
    if given:
        stated = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items())
        ours = (gbs or 0) * (seq or 0) / mean / world
        figures[f"recomputed with {stated}"] = ours
        agreement = (
            "agrees with the stored figure"
            if _agrees(stored, ours)
            else "still disagrees with the stored figure; the stated value is used"
        )
        note = f"{what}; resolved by {stated} given on import: {_fmt(ours)} {agreement}"
        return Caveats(candidates=candidates, figures=figures, resolved_by=stated), [note]
    note = (
        f"AMBIGUOUS: {what}. Candidates: {'; '.join(candidates) or 'none found'}. "
        "Kept out of comparisons until the true value is stated: "
        "tprimat import-legacy --sequence-length N or --global-batch-size N"
    )
    return Caveats(ambiguous=what, candidates=candidates, figures=figures), [note]


def write_name(result: Result) -> str:
    """The file name ``import-legacy`` writes a converted result under."""
    return f"{result.run.id}.json"
