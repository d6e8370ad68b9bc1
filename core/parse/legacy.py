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
(2³⁰ bytes) and the conversion is noted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.errors import TprimatError
from tprimat.result.builder import assemble_result
from tprimat.result.metrics import select_measured
from tprimat.result.schema import (
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
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

_PLATFORMS = {"nvd": "nvidia", "nvidia": "nvidia", "amd": "amd", "cuda": "nvidia", "rocm": "amd"}

_BENCHMARK_NAME = re.compile(r"benchmark_(?P<stack>cuda|rocm)_(?P<model>[A-Za-z0-9.\-]+)")
_TRAIN_NAME = re.compile(
    r"train_(?P<platform>amd|nvd)_(?P<framework>[a-z]+)_(?P<model>[A-Za-z0-9.\-]+)"
)

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
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
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
        raise LegacyError(
            f"{path}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise LegacyError(f"{path}: not a legacy result (expected a JSON object)")
    if "schema_version" in data:
        raise LegacyError(f"{path}: already a tprimat result (schema_version present)")
    return data


def _run_id(path: Path) -> str:
    stem = path.name[:-5] if path.name.endswith(".json") else path.name
    return "legacy-" + re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-")


def convert_legacy(
    path: str | Path, options: LegacyOptions | None = None, *, data: dict[str, Any] | None = None
) -> Result:
    """The tprimat :class:`Result` of the legacy file at ``path``."""
    options = options or LegacyOptions()
    path = Path(path)
    origin = str(path)
    data = load_legacy(path) if data is None else data
    ident = identify(path, data)
    notes: list[str] = []

    gpu = data.get("gpu_info") if isinstance(data.get("gpu_info"), dict) else {}
    training = data.get("training_config") if isinstance(data.get("training_config"), dict) else {}
    performance = (
        data.get("performance_metrics") if isinstance(data.get("performance_metrics"), dict) else {}
    )
    parallel = (
        data.get("parallelism_config") if isinstance(data.get("parallelism_config"), dict) else {}
    )
    memory = data.get("memory_metrics") if isinstance(data.get("memory_metrics"), dict) else {}

    step_key = "raw_step_times" if ident["kind"] == "benchmark" else "step_times"
    step_times = _float_list(data, step_key, origin)
    if not step_times:
        raise LegacyError(f"{origin}: no {step_key}: nothing to import")
    losses = _float_list(data, "loss_values", origin) or []
    lrs = _float_list(data, "learning_rates", origin) or []

    # What the training process (callback) wrote vs what a log extractor wrote afterwards.
    stack = gpu.get("software_stack")
    extractor = ident["kind"] == "train" and stack in ("rocm", "cuda")

    # --- configuration -------------------------------------------------------------------
    gbs = _int(training, "global_batch_size")
    seq = _int(training, "sequence_length")
    mbs = _int(training, "micro_batch_size")
    world = _int(training, "num_gpus")
    max_steps = _int(training, "max_steps")
    for key, value in (("global_batch_size", gbs), ("sequence_length", seq), ("num_gpus", world)):
        if value is None:
            notes.append(
                f"legacy training_config.{key} is {training.get(key)!r}: "
                "no tokens/s can be computed without it"
            )

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
        notes.append("precision not recorded by the legacy file: unknown, so no peak and no MFU "
                     "(TFLOP/s does not depend on it)")
    else:
        notes.append(f"precision {options.precision} given on import (--precision), "
                     "not recorded by the legacy file")
    dataset = options.dataset or "unknown"
    if options.dataset is None:
        notes.append("dataset not recorded by the legacy file: 'unknown'")
    else:
        notes.append(f"dataset {dataset!r} given on import (--dataset)")

    fair = fair_values(model=model, methodology=options.methodology, dataset=dataset, seq_length=seq,
                       global_batch_size=gbs, precision=options.precision)
    tp = _int(parallel, "tensor_model_parallel_size")
    settings: dict[str, Any] = {
        "legacy": {
            "training_config": training,
            "parallelism_config": parallel,
        }
    }
    config = ResultConfig(
        model=model,
        seq_length=seq,
        global_batch_size=gbs,
        micro_batch_size=mbs,
        world_size=world,
        precision=options.precision,
        methodology=options.methodology,
        dataset_fingerprint=None,
        config_fingerprint=config_fingerprint(fair),
        settings=settings,
    )

    # --- iterations ----------------------------------------------------------------------
    n = len(step_times)
    align_loss = len(losses) == n
    align_lr = len(lrs) == n
    dropped_hint = (
        " (the earlier log extractor kept only 0 < loss < 10000 and 0 < lr < 1, so a NaN loss "
        "or an lr of 0.0 is the likely missing value)" if extractor else ""
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
    name = path.name
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

    # --- run info, hardware, software ----------------------------------------------------
    backend, framework = None, None
    if ident["framework_key"]:
        backend, framework = LEGACY_FRAMEWORKS.get(ident["framework_key"], (None, None))
        if framework is None:
            framework = ident["framework_key"]
    if stack == "nemo":
        framework = framework or "NeMo"
    if stack == "prim":
        framework = framework or "Primus"

    if max_steps is None:
        status = "partial"
        notes.append(f"legacy training_config.max_steps is {training.get('max_steps')!r}: "
                     "steps configured unknown, status partial")
    elif max_steps == n:
        status = "completed"
    else:
        status = "partial"
        notes.append(f"{n} step times recorded for max_steps {max_steps}: status partial")
    if extractor:
        notes.append(
            "legacy training_config.max_steps was written by the earlier log extractor as the "
            "number of step times it found, not read from the training config"
        )

    timestamp = data.get("timestamp") if isinstance(data.get("timestamp"), str) else None
    if timestamp:
        notes.append(f"finished_at {timestamp} is the legacy timestamp (local time, zone unknown)")
    run = RunInfo(
        id=_run_id(path),
        backend=backend or "legacy",
        platform=ident["platform"],
        framework=framework,
        model=model,
        dataset=dataset,
        status=status,  # type: ignore[arg-type]
        started_at=None,
        finished_at=timestamp,
        tprimat_version=__version__,
    )

    device_count = _int(gpu, "device_count")
    total_gb = _number(gpu, "total_memory_gb")
    nodes = None
    if device_count and world and world % device_count == 0:
        nodes = world // device_count
    hardware = Hardware(
        device_name=gpu.get("device_name") if isinstance(gpu.get("device_name"), str) else None,
        device_count_per_node=device_count,
        nodes=nodes,
        memory_per_device_gib=total_gb * GB / GIB if total_gb is not None else None,
        captured_at=timestamp,
        source="legacy result",
    )
    if total_gb is not None:
        notes.append(
            f"gpu_info.total_memory_gb {_fmt(total_gb)} is in GB (10^9 bytes): "
            f"{_fmt(total_gb * GB / GIB)} GiB"
        )
    if extractor:
        notes.append(
            f"gpu_info (software_stack {stack!r}) was detected by the earlier log extractor, "
            "which ran on the training machine right after training, not by the training process"
        )
    version = gpu.get("software_version") if isinstance(gpu.get("software_version"), str) else None
    is_rocm = ident["platform"] == "amd"
    software = Software(
        torch=gpu.get("pytorch_version") if isinstance(gpu.get("pytorch_version"), str) else None,
        rocm=version if is_rocm else None,
        cuda=version if not is_rocm else None,
        extra={k: str(v) for k, v in (("legacy_software_stack", stack),
                                      ("legacy_parallel_strategy", parallel.get("strategy_name")))
               if v is not None},
    )

    provenance = Provenance(
        inputs=[str(path)],
        parser=PARSER_NAME,
        parser_version=__version__,
        notes=notes,
    )
    result = assemble_result(
        run=run,
        config=config,
        records=records,
        hardware=hardware,
        software=software,
        provenance=provenance,
        warmup_iterations=options.warmup_iterations,
        tensor_parallel=tp or 1,
    )

    memory_notes, summary = _memory(result, memory, ident["kind"])
    checks = _check_performance(result, performance, step_times, gbs, seq, world)
    return attrs.evolve(
        result,
        summary=summary,
        provenance=attrs.evolve(
            result.provenance, notes=[*result.provenance.notes, *memory_notes, *checks]
        ),
    )


def _memory(result: Result, memory: dict[str, Any], kind: str) -> tuple[list[str], Any]:
    """Memory peaks from the legacy run summary, converted from GB to GiB, with notes."""
    notes: list[str] = []
    summary = result.summary
    sampled = (
        "the maximum of torch memory_{0}() sampled after each step on rank 0"
        + (" from the second step on" if kind == "benchmark" else "")
        + " (a lower bound of the allocator's own peak)"
    )
    updates = {}
    for legacy_key, field, what in (
        ("peak_memory_allocated_gb", "mem_max_allocated_gib", "allocated"),
        ("peak_memory_reserved_gb", "mem_max_reserved_gib", "reserved"),
    ):
        value = _number(memory, legacy_key)
        if value is None:
            continue
        gib = value * GB / GIB
        updates[field] = gib
        notes.append(
            f"memory_metrics.{legacy_key} {_fmt(value)} GB (10^9 bytes) = {_fmt(gib)} GiB, "
            f"recorded as summary.{field}: {sampled.format(what)}; no per-iteration memory in "
            "the legacy file"
        )
    for legacy_key in sorted(memory):
        if legacy_key not in ("peak_memory_allocated_gb", "peak_memory_reserved_gb"):
            value = _number(memory, legacy_key)
            if value is not None:
                notes.append(
                    f"memory_metrics.{legacy_key} {_fmt(value)} GB = {_fmt(value * GB / GIB)} GiB "
                    "(not a schema field, kept here)"
                )
    if not memory:
        notes.append("no memory figures in the legacy file")
    if result.config.precision is None and summary.mfu is not None:
        # The MFU denominator depends on the dtype; without it there is no honest peak.
        updates.update(peak_tflops=None, peak_source=None, mfu=None)
    if updates:
        summary = attrs.evolve(summary, **updates)
    return notes, summary


def _check_performance(
    result: Result,
    performance: dict[str, Any],
    step_times: Sequence[float],
    gbs: int | None,
    seq: int | None,
    world: int | None,
) -> list[str]:
    """A note for every legacy figure that disagrees with what the recorded step times give."""
    notes: list[str] = []
    summary = result.summary
    measured, _ = select_measured(result.iterations, warmup_iterations=summary.warmup_iterations)
    n = len(step_times)
    after_first = [t for t in step_times[1:] if math.isfinite(t) and t > 0]
    span = (f"iterations {measured[0].iteration}-{measured[-1].iteration}" if measured
            else "no iterations")
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
            tail = (
                f"; recomputed by {legacy_def} it is {_fmt(by_legacy_def)}"
                + (" (agrees)" if _agrees(legacy, by_legacy_def) else " (disagrees too)")
            )
        notes.append(
            f"legacy performance_metrics.{key} = {_fmt(legacy)} disagrees with "
            f"{_fmt(ours)} ({what}){tail}"
        )

    legacy_mean = sum(after_first) / len(after_first) if after_first else None
    total_steps = _number(performance, "total_steps")
    if total_steps is not None and int(total_steps) != n:
        notes.append(
            f"legacy performance_metrics.total_steps = {int(total_steps)} disagrees with "
            f"{n} step times recorded"
        )
    finite = [t for t in step_times if math.isfinite(t) and t > 0]
    check("total_time_seconds", sum(finite), f"sum of the {len(finite)} recorded step times", None)
    if summary.step_time_s is not None:
        stats = summary.step_time_s
        check("avg_step_time_seconds", stats.mean, f"mean step time over {span}", legacy_mean)
        check("min_step_time_seconds", stats.min, f"minimum step time over {span}",
              min(after_first) if after_first else None)
        check("max_step_time_seconds", stats.max, f"maximum step time over {span}",
              max(after_first) if after_first else None)
        check("steps_per_second", len(measured) / sum(r.step_time_s for r in measured),
              f"measured iterations / their total step time over {span}",
              len(after_first) / sum(after_first) if after_first else None)
    if summary.tokens_per_s is not None:
        check("tokens_per_second", summary.tokens_per_s.median,
              f"tprimat median over {span}",
              tokens / legacy_mean if tokens and legacy_mean else None)
    if summary.tokens_per_s_per_gpu is not None:
        check("tokens_per_second_per_gpu", summary.tokens_per_s_per_gpu.median,
              f"tprimat median over {span}",
              tokens / legacy_mean / world if tokens and legacy_mean and world else None)
    if "throughput_per_gpu_core" in performance:
        notes.append(
            "legacy performance_metrics.throughput_per_gpu_core "
            f"{performance['throughput_per_gpu_core']!r} not imported "
            "(steps/s divided by a shader-core count; not comparable across vendors)"
        )
    return notes


def write_name(result: Result) -> str:
    """The file name ``import-legacy`` writes a converted result under."""
    return f"{result.run.id}.json"
