"""The one result builder: measured iterations in, a complete :class:`~tprimat.result.schema.Result` out.

The runner (live runs), ``tprimat parse`` (logs) and ``tprimat import-legacy``
(earlier results) all end here: :func:`result_config` records a config the
same way for each, and :func:`assemble_result` computes every derived number
(per-iteration throughput, statistics, TFLOP/s, MFU) from the records, so a
result's summary is computed by the same code whichever way its iterations
arrived.  Nothing is patched into a summary afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from tprimat.contract.backend import WarmupRule
from tprimat.result.metrics import summarize, with_throughput
from tprimat.result.schema import (
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
)
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.methodology import Resolved
from tprimat.settings.models import UnknownModelError, get_model


def result_config(
    config: BenchmarkConfig,
    *,
    dataset_fingerprint: str | None = None,
    methodology: Resolved | None = None,
    layers: tuple[str, ...] | list[str] = (),
) -> ResultConfig:
    """The result's record of a final config: the derived-number inputs spelled out, the rest in ``settings``.

    ``methodology`` is the core's resolution (:func:`tprimat.settings.methodology.resolve`):
    its preset and every deviation are recorded beside the config they produced.
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
    exclude_profiled: bool = True,
    tensor_parallel: int = 1,
    ceiling: Mapping[str, Any] | None = None,
) -> Result:
    """Fill in per-iteration throughput, summarise, and record what was left out.

    ``warmup_rule`` is the backend's (:class:`~tprimat.contract.backend.WarmupRule`):
    it raises the warm-up when its logs fold start-up into leading iterations.
    ``ceiling`` is the latest ``tprimat microbench`` summary of the run's device
    (recorded in the run manifest), for MAMF utilisation next to MFU.
    """
    hardware = hardware or Hardware()
    provenance = provenance or Provenance()
    if warmup_rule is not None and warmup_rule.min_iterations > warmup_iterations:
        warmup_iterations = warmup_rule.min_iterations
        provenance = attrs.evolve(
            provenance,
            notes=[*provenance.notes, f"warm-up raised to {warmup_iterations}: {warmup_rule.reason}"],
        )
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
    return Result(
        run=run,
        hardware=hardware,
        software=software or Software(),
        config=config,
        iterations=finished,
        summary=summary,
        provenance=provenance,
    )
