"""The one result builder: measured iterations in, a complete :class:`~tprimat.result.schema.Result` out.

The runner (live runs), ``tprimat parse`` (logs) and ``tprimat import-legacy``
(earlier results) all end here: :func:`result_config` records a config the
same way for each, and :func:`assemble_result` computes every derived number
(per-iteration throughput, statistics, TFLOP/s, MFU) from the records, so a
result's summary is computed by the same code whichever way its iterations
arrived.  Nothing is patched into a summary afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from tprimat.contract.backend import WarmupRule
from tprimat.contract.records import EvalRecord
from tprimat.memory.capacity import usable_capacity
from tprimat.result.convergence import (
    STEP_CLOCK,
    TRAINER_CLOCK,
    eval_points,
    summarize_convergence,
    with_step_clock,
)
from tprimat.result.memory import memory_report
from tprimat.result.metrics import summarize, with_throughput
from tprimat.result.resultjson import write_ahead
from tprimat.result.schema import (
    Caveats,
    ConvergenceSummary,
    EvalPoint,
    FrameworkRecord,
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
    Summary,
)
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.methodology import Resolved
from tprimat.settings.models import ModelSpec, UnknownModelError, get_model
from tprimat.settings.trainers import Trainer


def result_config(
    config: BenchmarkConfig,
    *,
    dataset_fingerprint: str | None = None,
    methodology: Resolved | None = None,
    layers: tuple[str, ...] | list[str] = (),
    framework: FrameworkRecord | None = None,
) -> ResultConfig:
    """The result's record of a final config: the derived-number inputs spelled out, the rest in ``settings``.

    ``methodology`` is the core's resolution (:func:`tprimat.settings.methodology.resolve`):
    its preset and every deviation are recorded beside the config they produced.
    ``framework`` is every framework setting the launch ran with (:mod:`tprimat.result.framework`).
    """
    return ResultConfig(
        model=config.benchmark.model,
        seq_length=config.training.seq_length,
        global_batch_size=config.training.global_batch_size,
        micro_batch_size=config.training.micro_batch_size,
        world_size=config.world_size,
        precision=config.precision.dtype,
        methodology=config.benchmark.methodology,
        preset=methodology.preset if methodology is not None else None,
        deviations=[str(d) for d in methodology.deviations] if methodology is not None else [],
        layers=list(layers),
        dataset_fingerprint=dataset_fingerprint,
        config_fingerprint=config.fingerprint(dataset_fingerprint),
        settings=config.to_dict(),
        framework=framework,
    )


def assemble_result(
    *,
    run: RunInfo,
    config: ResultConfig,
    records: Iterable[IterationRecord],
    hardware: Hardware | None = None,
    software: Software | None = None,
    provenance: Provenance | None = None,
    warmup_iterations: int = 2,
    warmup_rule: WarmupRule | None = None,
    trainer: Trainer = "megatron-core",
    exclude_profiled: bool = True,
    tensor_parallel: int = 1,
    ceiling: Mapping[str, Any] | None = None,
    rank_memory: Iterable[Any] = (),
    run_peaks: Mapping[str, float] | None = None,
    caveats: Caveats | None = None,
    audit: Callable[[Summary, Sequence[IterationRecord]], list[str]] | None = None,
    evaluations: Iterable[EvalRecord] = (),
    target_log_perplexity: float | None = None,
    run_clock: Mapping[str, Any] | None = None,
    records_owned: bool = False,
    written: bool = False,
) -> Result:
    """Fill in per-iteration throughput, summarise, and record what was left out.

    ``warmup_rule`` is the backend's (:class:`~tprimat.contract.backend.WarmupRule`):
    it raises the warm-up when its logs fold start-up into leading iterations.
    ``trainer`` is the backend's ``BackendSpec.trainer``, the layout of the memory estimate.
    ``rank_memory`` holds per-rank memory peaks (:class:`tprimat.contract.records.RankPeak`)
    for the result's memory section, beside the estimate for its config.
    ``run_peaks`` are memory peaks known only for the run as a whole (an earlier
    script's summary), by summary field (``mem_max_allocated_gib``...): the summary
    keeps the larger of them and the iterations' own peaks.  ``caveats`` are what
    the caller found doubtful about its inputs.  ``audit`` is called with the
    summary and the records and returns notes (e.g. how an earlier tool's own
    figures compare), so that nothing is patched in after the build.
    ``evaluations`` and ``target_log_perplexity`` give the convergence summary;
    ``run_clock`` holds the trainer's ``init_time_s``, ``run_time_s`` and ``run_started_at``.
    ``ceiling`` is the latest ``tprimat microbench`` summary of the run's device
    (recorded in the run manifest), for MAMF utilisation next to MFU.
    ``records_owned``: ``records`` are the caller's alone, filled in rather than copied
    (see :func:`~tprimat.result.metrics.with_throughput`).  ``written``: the caller writes the
    result; its iterations are written while summarised (:func:`~.resultjson.write_ahead`).
    """
    hardware = hardware or Hardware()
    warmup_iterations, provenance = _warmup(warmup_iterations, warmup_rule, provenance or Provenance())
    finished = with_throughput(
        records,
        global_batch_size=config.global_batch_size,
        seq_length=config.seq_length,
        world_size=config.world_size,
        owned=records_owned,
    )
    if written:
        write_ahead(finished)
    summary, notes = summarize(
        finished,
        model=_known_model(config.model),
        seq_length=config.seq_length,
        world_size=config.world_size,
        precision=config.precision,
        device_name=hardware.device_name,
        warmup_iterations=warmup_iterations,
        exclude_profiled=exclude_profiled,
        tensor_parallel=tensor_parallel,
        ceiling=ceiling,
        partition=hardware.partition,
    )
    if run_peaks:
        summary = _with_run_peaks(summary, run_peaks)
    if audit is not None:
        notes = [*notes, *audit(summary, finished)]
    provenance = attrs.evolve(provenance, notes=[*provenance.notes, *notes])
    points, convergence = _evaluated(evaluations, config, finished, target_log_perplexity, run_clock)
    memory = memory_report(
        settings=config.settings,
        model_name=config.model,
        trainer=trainer,
        device_name=hardware.device_name,
        capacity_gib=usable_capacity(hardware.device_name, hardware.memory_per_device_gib),
        records=finished,
        rank_peaks=rank_memory,
        summary=summary,
    )
    return Result(
        run=run,
        hardware=hardware,
        software=software or Software(),
        config=config,
        iterations=finished,
        summary=summary,
        provenance=provenance,
        memory=memory,
        caveats=caveats,
        evaluations=points,
        convergence=convergence,
    )


def _evaluated(
    evaluations: Iterable[EvalRecord],
    config: ResultConfig,
    records: Sequence[IterationRecord],
    target_log_perplexity: float | None,
    run_clock: Mapping[str, Any] | None,
) -> tuple[list[EvalPoint], ConvergenceSummary | None]:
    """The evaluation points (placed on the step clock where the trainer's is not known), and
    their convergence summary when a target is set."""
    points = eval_points(evaluations, global_batch_size=config.global_batch_size, seq_length=config.seq_length)
    points, from_steps = with_step_clock(points, records)
    if target_log_perplexity is None:
        return points, None
    return points, _convergence(points, target_log_perplexity, run_clock, from_steps=from_steps)


def _known_model(name: str) -> ModelSpec | None:
    """The model ``name`` names, or None when tprimat does not know it (no TFLOP/s or MFU then)."""
    try:
        return get_model(name)
    except UnknownModelError:
        return None


def _warmup(warmup_iterations: int, rule: WarmupRule | None, provenance: Provenance) -> tuple[int, Provenance]:
    """The warm-up iterations left out of the statistics: ``warmup_iterations``, raised to the
    backend's ``rule`` where its logs fold start-up into leading iterations (noted in ``provenance``)."""
    if rule is None or rule.min_iterations <= warmup_iterations:
        return warmup_iterations, provenance
    notes = [*provenance.notes, f"warm-up raised to {rule.min_iterations}: {rule.reason}"]
    return rule.min_iterations, attrs.evolve(provenance, notes=notes)


def _with_run_peaks(summary: Summary, run_peaks: Mapping[str, float]) -> Summary:
    """``summary`` with each memory peak known for the whole run (by summary field) where it is
    the larger of it and the iterations' own peak."""
    peaks: dict[str, Any] = {field: max(value, getattr(summary, field) or value) for field, value in run_peaks.items()}
    return attrs.evolve(summary, **peaks)


def _convergence(
    points: list[EvalPoint],
    target_log_perplexity: float,
    run_clock: Mapping[str, Any] | None,
    *,
    from_steps: bool,
) -> ConvergenceSummary:
    """The convergence summary of the evaluation ``points``, timed by the trainer's clock
    (``run_clock``'s init and run times), or by the step times when the points were placed on them."""
    clock = dict(run_clock or {})
    return summarize_convergence(
        points,
        target_log_perplexity=target_log_perplexity,
        init_time_s=clock.get("init_time_s"),
        run_time_s=clock.get("run_time_s"),
        run_started_at=clock.get("run_started_at"),
        clock=STEP_CLOCK if from_steps else TRAINER_CLOCK,
    )
