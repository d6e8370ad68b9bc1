"""Turn measured iterations into a complete :class:`~tprimat.schema.Result`.

The runner (live runs), ``tprimat parse`` (logs) and ``tprimat import-legacy``
all end here, so a result's summary is computed by the same code whichever
way its iterations arrived.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from tprimat.memory.report import memory_report
from tprimat.metrics import summarize, with_throughput
from tprimat.models import UnknownModelError, get_model
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
    rank_memory: Iterable[Any] = (),
) -> Result:
    """Fill in per-iteration throughput, summarise, and record what was left out.

    ``ceiling`` is the latest ``tprimat microbench`` summary of the run's device
    (recorded in the run manifest), for MAMF utilisation next to MFU.
    ``rank_memory`` holds per-rank memory peaks (:class:`tprimat.memory.logfacts.RankPeak`)
    for the result's memory section, beside the estimate for its config.
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
    memory = memory_report(
        settings=config.settings, model_name=config.model, backend=run.backend,
        device_name=hardware.device_name, capacity_gib=hardware.memory_per_device_gib,
        records=finished, rank_peaks=rank_memory, summary=summary,
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
    )
