"""Turn measured iterations into a complete :class:`~tprimat.schema.Result`.

The runner (live runs), ``tprimat parse`` (logs) and ``tprimat import-legacy``
all end here, so a result's summary is computed by the same code whichever
way its iterations arrived.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from tprimat.convergence.summary import (
    STEP_CLOCK,
    TRAINER_CLOCK,
    eval_points,
    summarize_convergence,
    with_step_clock,
)
from tprimat.metrics import summarize, with_throughput
from tprimat.models import UnknownModelError, get_model
from tprimat.records import EvalRecord
from tprimat.schema import (
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
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
    exclude_profiled: bool = True,
    tensor_parallel: int = 1,
    ceiling: Mapping[str, Any] | None = None,
    evaluations: Iterable[EvalRecord] = (),
    target_log_perplexity: float | None = None,
    run_clock: Mapping[str, Any] | None = None,
) -> Result:
    """Fill in per-iteration throughput, summarise, and record what was left out.

    ``ceiling`` is the latest ``tprimat microbench`` summary of the run's device
    (recorded in the run manifest), for MAMF utilisation next to MFU.
    ``evaluations`` and ``target_log_perplexity`` give the convergence summary;
    ``run_clock`` holds the trainer's ``init_time_s``, ``run_time_s`` and ``run_started_at``.
    """
    hardware = hardware or Hardware()
    provenance = provenance or Provenance()
    finished = with_throughput(
        records,
        global_batch_size=config.global_batch_size,
        seq_length=config.seq_length,
        world_size=config.world_size,
    )
    try:
        model = get_model(config.model)
    except UnknownModelError:
        model = None
    summary, notes = summarize(
        finished,
        model=model,
        seq_length=config.seq_length,
        world_size=config.world_size,
        precision=config.precision,
        device_name=hardware.device_name,
        warmup_iterations=warmup_iterations,
        exclude_profiled=exclude_profiled,
        tensor_parallel=tensor_parallel,
        ceiling=ceiling,
    )
    provenance = attrs.evolve(provenance, notes=[*provenance.notes, *notes])
    points = eval_points(evaluations, global_batch_size=config.global_batch_size,
                         seq_length=config.seq_length)
    points, from_steps = with_step_clock(points, finished)
    convergence = None
    if target_log_perplexity is not None:
        clock = dict(run_clock or {})
        convergence = summarize_convergence(
            points, target_log_perplexity=target_log_perplexity,
            init_time_s=clock.get("init_time_s"), run_time_s=clock.get("run_time_s"),
            run_started_at=clock.get("run_started_at"),
            clock=STEP_CLOCK if from_steps else TRAINER_CLOCK,
        )
    return Result(
        evaluations=points,
        convergence=convergence,
        run=run,
        hardware=hardware,
        software=software or Software(),
        config=config,
        iterations=finished,
        summary=summary,
        provenance=provenance,
    )
