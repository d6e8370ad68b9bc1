"""The versioned result schema: one JSON document per run.

Every backend's output ends up as a :class:`Result`.  Per-iteration records
hold what was measured (or read from a log); :class:`Summary` holds what the
core derived from them (see :mod:`tprimat.result.metrics`).  Documents are strict
JSON: NaN and infinities, which real losses contain, are written as the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` instead of being
dropped.  The iterations are written as columns, one array per field of the
record, the framework's own figures one array per figure name
(:mod:`tprimat.result.iterjson`); documents of older versions, whose iterations
were a list of objects or whose figures an object per record, are migrated when
read.  Loading validates every field and names the one that is wrong.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn
from cattrs.v import format_exception

from tprimat.contract.records import IterationRecord
from tprimat.errors import TprimatError
from tprimat.hardware.partitions import DevicePartition
from tprimat.result.iterjson import columns_from_objects, iteration_columns, records_from_columns, reported_columns

SCHEMA_VERSION = 6

RunStatus = Literal["completed", "failed", "interrupted", "partial"]


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
    launcher: str | None = None  # the program tprimat started, e.g. "torchrun"
    deployment: str | None = None  # where: "local", "slurm" or "k8s"
    tags: dict[str, str] = attrs.Factory(dict)  # the user's labels (`tprimat run --tag KEY=VALUE`)


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
    partition: DevicePartition | None = None  # set when each device is a partition of a GPU


@attrs.frozen(kw_only=True)
class Software:
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    collectives: str | None = None  # e.g. "NCCL 2.21.5", "RCCL 2.22.3"
    framework_version: str | None = None
    container_image: str | None = None  # $TPRIMAT_CONTAINER_IMAGE, set by tprimat's Dockerfiles
    container_digest: str | None = None  # $TPRIMAT_CONTAINER_DIGEST, e.g. "sha256:..." (known outside the image)
    container_base_image: str | None = None  # the vendor image it was built on ($TPRIMAT_BASE_IMAGE)
    tprimat_commit: str | None = None  # tprimat's git commit: its checkout's, or $TPRIMAT_GIT_COMMIT in an image
    framework_commits: dict[str, str] = attrs.Factory(dict)  # framework checkout directory -> its git commit
    extra: dict[str, str] = attrs.Factory(dict)  # other versions by name, e.g. "megatron-core": "0.16.1"


@attrs.frozen(kw_only=True)
class SettingDisagreement:
    """A framework setting whose value the framework states differs from what the launch rendered."""

    setting: str  # the framework's own name, e.g. "micro_batch_size"
    planned: Any
    stated: Any  # as the framework wrote it
    source: str | None = None  # "file:line" of the statement


@attrs.frozen(kw_only=True)
class FrameworkRecord:
    """Every framework-level setting a run launched with, and what the framework said it ran with.

    ``rendered``: what the backend set; ``kept``: what the framework's own experiment
    file or defaults decided, with the real values (``kept_from`` says where they were
    read); ``shared``: the shared vocabulary (``docs/backends.md``) under its common names,
    which ``tprimat compare`` checks across runs.  ``stated`` is what the framework itself
    printed or wrote at start-up (its argument dump, its resolved recipe), read after the
    run; every rendered setting it states differently is a ``disagreement``.
    """

    framework: str
    plan_digest: str | None = None  # tprimat.running.digest: the key of the plan's acceptance record
    rendered: dict[str, Any] = attrs.Factory(dict)
    kept: dict[str, Any] = attrs.Factory(dict)
    kept_from: str | None = None
    shared: dict[str, Any] = attrs.Factory(dict)
    notes: list[str] = attrs.Factory(list)
    stated: dict[str, Any] = attrs.Factory(dict)
    stated_from: str | None = None
    disagreements: list[SettingDisagreement] = attrs.Factory(list)


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
    preset: str | None = None  # the tuned preset applied (methodology "tuned")
    deviations: list[str] = attrs.Factory(list)  # every setting the preset changed, "key: iso -> tuned"
    layers: list[str] = attrs.Factory(list)  # where the config came from, lowest layer first
    dataset_fingerprint: str | None = None
    config_fingerprint: str | None = None
    settings: dict[str, Any] = attrs.Factory(dict)  # the full benchmark config
    #: Every framework setting the launch ran with (None: not known, e.g. a log parsed alone).
    framework: FrameworkRecord | None = None


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
    #: where the iterations' energy came from and in which unit, e.g. "nvml energy counter (mJ)"
    energy_source: str | None = None
    final_loss: float | None = None
    reported: dict[str, Stats] = attrs.Factory(dict)  # the framework's own figures, secondary


@attrs.frozen(kw_only=True)
class MemoryReport:
    """Predicted per-GPU memory beside what the ranks measured, in GiB (see docs/memory.md).

    Per-rank maps are keyed by the rank as a string (JSON object keys); a rank
    the log does not name is keyed "?".
    """

    predicted_terms_gib: dict[str, float] = attrs.Factory(dict)  # parameters, gradients, ... overhead
    predicted_allocated_gib: float | None = None  # to compare with the peak allocated
    predicted_total_gib: float | None = None  # to compare with the capacity
    capacity_gib: float | None = None
    fits: bool | None = None
    estimator_note: str | None = None  # layout and why a prediction is missing
    per_rank_max_allocated_gib: dict[str, float] = attrs.Factory(dict)
    per_rank_max_reserved_gib: dict[str, float] = attrs.Factory(dict)
    per_rank_device_used_gib: dict[str, float] = attrs.Factory(dict)
    peak_rank: str | None = None  # the rank with the largest peak (allocated, else device-used)
    measured_peak_allocated_gib: float | None = None
    measured_peak_reserved_gib: float | None = None
    measured_peak_device_used_gib: float | None = None


@attrs.frozen(kw_only=True)
class EvalPoint:
    """One evaluation on held-out data (see docs/convergence.md)."""

    iteration: int | None = None
    samples: int | None = None  # training samples consumed before the evaluation
    tokens: int | None = None  # samples x seq_length, computed by the core
    time_s: float | None = None  # wall time since run start (never paused)
    eval_loss: float | None = None  # mean cross-entropy per token (nats) = log-perplexity
    eval_sequences: int | None = None
    source: str | None = None


@attrs.frozen(kw_only=True)
class ConvergenceSummary:
    """Time to train, computed by the core from the evaluations and the target."""

    target_log_perplexity: float
    reached: bool
    evaluations: int
    time_to_target_s: float | None = None  # run start to the first evaluation at the target
    samples_to_target: int | None = None
    tokens_to_target: int | None = None
    init_time_s: float | None = None  # before run start (model build), reported apart
    run_time_s: float | None = None  # run start to run stop, as the trainer measured it
    run_started_at: str | None = None  # ISO 8601 UTC of run start, to place iterations on the clock
    best_eval_loss: float | None = None
    final_eval_loss: float | None = None
    clock: str | None = None  # where time_s comes from


@attrs.frozen(kw_only=True)
class Provenance:
    inputs: list[str] = attrs.Factory(list)
    parser: str | None = None
    parser_version: str | None = None
    notes: list[str] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class Caveats:
    """What reading the inputs found that limits how a result may be used (absent: nothing).

    ``ambiguous`` is set while the inputs contradict each other by an exact factor and the
    user has not stated the true value: ``tprimat compare`` leaves such a result out.
    """

    ambiguous: str | None = None
    candidates: list[str] = attrs.Factory(list)  # the inputs that would explain the figures
    figures: dict[str, float] = attrs.Factory(dict)  # each reading -> the tokens/s/GPU it gives
    resolved_by: str | None = None  # how the user stated the true value
    stopped_by: str | None = None  # what ended the run early (straggler detector, watchdog)


@attrs.frozen(kw_only=True)
class Result:
    """One run, as every tprimat tool reads and writes it."""

    schema_version: int = SCHEMA_VERSION
    run: RunInfo
    hardware: Hardware = Hardware()
    software: Software = Software()
    config: ResultConfig
    iterations: Sequence[IterationRecord] = attrs.Factory(list)  # a list, or records kept in a file
    summary: Summary
    provenance: Provenance = Provenance()
    memory: MemoryReport | None = None
    caveats: Caveats | None = None
    evaluations: list[EvalPoint] = attrs.Factory(list)
    convergence: ConvergenceSummary | None = None


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: How a result spells the floats strict JSON has no literal for.
NON_FINITE_NAMES = tuple(_NON_FINITE)


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
    # A result's iterations are read from their columns into a list (records kept in a file
    # are only ever written).
    iterations_type = Sequence[IterationRecord]
    converter.register_structure_hook_func(
        lambda type_: type_ == iterations_type, lambda data, _: records_from_columns(data, converter.structure)
    )
    for cls in (
        RunInfo,
        DevicePartition,
        Hardware,
        Software,
        SettingDisagreement,
        FrameworkRecord,
        ResultConfig,
        IterationRecord,
        Stats,
        Summary,
        Provenance,
        MemoryReport,
        Caveats,
        EvalPoint,
        ConvergenceSummary,
        Result,
    ):
        converter.register_structure_hook(cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True))
    return converter


@functools.cache
def _get_converter() -> cattrs.Converter:
    """The converter, built on first use (building it costs more than the rest of the import)."""
    return _make_converter()


def result_to_dict(result: Result) -> dict[str, Any]:
    """The JSON-ready form of ``result`` (non-finite floats as strings, the iterations as columns)."""
    data = _replace_non_finite(_get_converter().unstructure(attrs.evolve(result, iterations=[])))
    if data.get("caveats") is None:
        data.pop("caveats", None)  # written only when there is one
    data["iterations"] = iteration_columns(result.iterations, _replace_non_finite)
    return data


def _replace_non_finite(value: Any) -> Any:
    # cattrs does not route floats inside dict[str, Any] through the float hook.
    if isinstance(value, float):
        return _unstructure_float(value)
    if isinstance(value, dict):
        return {k: _replace_non_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_non_finite(v) for v in value]
    return value


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 records the methodology's preset, deviations and config layers in ``config``.

    A v1 result kept its tuned deviations only as provenance notes
    ("tuned deviation: key: iso -> tuned"); they are moved into the field.
    """
    config = dict(data.get("config") or {})
    notes = (data.get("provenance") or {}).get("notes") or []
    config.setdefault("preset", None)
    prefix = "tuned deviation: "
    config.setdefault("deviations", [n[len(prefix) :] for n in notes if isinstance(n, str) and n.startswith(prefix)])
    config.setdefault("layers", [])
    return {**data, "config": config, "memory": data.get("memory"), "schema_version": 2}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """v3 records the framework's own settings in ``config.framework``; a v2 result did not know them."""
    config = dict(data.get("config") or {})
    config.setdefault("framework", None)
    return {**data, "config": config, "schema_version": 3}


def _v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """v4 adds provenance a v3 result did not record: the run's launcher, deployment and tags,
    the container's digest and base image, tprimat's and the frameworks' commits, and where the
    energy figure came from.  Each stays absent (null or empty): unknown, not guessed."""
    return {**data, "schema_version": 4}


def _v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """v5 writes the iterations as columns (one array per field of the record) instead of a
    list of objects; the values are the same (an absent key: the field's default)."""
    return {**data, "iterations": columns_from_objects(data.get("iterations", [])), "schema_version": 5}


def _v5_to_v6(data: dict[str, Any]) -> dict[str, Any]:
    """v6 writes the framework's own figures (``iterations.reported``) as one column per figure
    name instead of one object per record; a figure that was null is absent, as a null is in v6."""
    iterations = data.get("iterations")
    if isinstance(iterations, dict) and "reported" in iterations:
        reported = iterations["reported"]
        if not isinstance(reported, list) or not all(isinstance(figures, dict) for figures in reported):
            raise ValueError("expected an array of objects @ $.iterations.reported")
        iterations = {**iterations, "reported": reported_columns(reported)}
    return {**data, "iterations": iterations, "schema_version": 6}


#: schema_version -> the function that turns such a raw document into the next version's.
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6}


def migrate(data: dict[str, Any], *, origin: str = "result") -> dict[str, Any]:
    """Bring a raw result document up to :data:`SCHEMA_VERSION`, one migration at a time."""
    version = data.get("schema_version")
    while version != SCHEMA_VERSION:
        step = MIGRATIONS.get(version) if isinstance(version, int) else None
        if step is None:
            raise ResultError(
                f"{origin}: schema_version {version!r} is not supported by tprimat "
                f"(this version reads 1 to {SCHEMA_VERSION})"
            )
        try:
            data = step(data)
        except ValueError as exc:  # what a migration cannot read, with its place
            raise ResultError(f"{origin}: invalid result: {exc}") from None
        version = data.get("schema_version")
    return data


def result_from_dict(data: Any, *, origin: str = "result") -> Result:
    """Validate and structure a result document; errors name the field (``$.iterations.loss[3]``)."""
    if not isinstance(data, dict):
        raise ResultError(f"{origin}: not a tprimat result (expected a JSON object)")
    if data.get("schema_version") is None:
        raise ResultError(f"{origin}: not a tprimat result (no schema_version)")
    data = migrate(data, origin=origin)
    try:
        return _get_converter().structure(data, Result)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(cattrs.transform_error(exc, path="$", format_exception=_describe_problem))
        raise ResultError(f"{origin}: invalid result: {problems}") from None


def _describe_problem(exc: BaseException, type_: Any) -> str:
    # Validators and literal checks explain themselves; keep their text.
    if not isinstance(exc, KeyError) and str(exc):
        return f"invalid value ({exc})"
    return format_exception(exc, type_)


def dumps_result(result: Result) -> str:
    """Strict JSON text of ``result``: what :func:`tprimat.result.resultjson.write_result` writes."""
    from tprimat.result.resultjson import iter_result_json  # it builds on this module

    return "".join(iter_result_json(result))


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
        raise ResultError(f"{path}: corrupt JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:
        raise ResultError(f"{path}: {exc}") from None
    return result_from_dict(data, origin=str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f'non-standard JSON constant {name}; tprimat writes it as the string "{name}"')
