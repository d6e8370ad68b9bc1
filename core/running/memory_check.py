"""The run's pre-flight memory check: warn (or, with ``--strict``, refuse) before a run that cannot fit.

The verdict is :func:`~tprimat.memory.verdict.fit_verdict`'s: "does not fit" is a warning, which
``--strict`` refuses; "within the estimator's error" is a note, printed and recorded but never
refused (the run may well fit); "fits" says nothing.
"""

from __future__ import annotations

from typing import Any

from tprimat.hardware.platform import trains_on_cpu
from tprimat.memory.capacity import usable_capacity
from tprimat.memory.estimate import MemoryEstimate, MemoryEstimateError, estimate_memory
from tprimat.memory.verdict import Verdict, describe_fit, fit_verdict
from tprimat.running.doctor import Finding


def memory_findings(prepared: Any) -> list[Finding]:
    """A finding when the estimate for ``prepared`` (a PreparedRun) does not clearly fit its GPUs' memory.

    The capacity is what platform detection measured on this machine (no more than the
    runtime's own figure for the device, see :func:`~tprimat.memory.capacity.usable_capacity`),
    else the capacity table's figure for the detected device; a CPU run has none and is not
    checked.
    """
    platform = prepared.platform
    if trains_on_cpu(platform) or (platform.device_name is None and platform.memory_per_device_gib is None):
        return []
    try:
        estimate = estimate_memory(
            prepared.config,
            prepared.model,
            capacity_gib=usable_capacity(platform.device_name, platform.memory_per_device_gib),
            device=platform.device_name,
            trainer=prepared.trainer,
        )
    except MemoryEstimateError:
        return []  # an unknown device without a measured capacity: nothing to compare with
    finding = fit_finding(estimate, command=_command(prepared, estimate))
    return [] if finding is None else [finding]


def fit_finding(estimate: MemoryEstimate, *, command: str) -> Finding | None:
    """The finding for an estimate that does not fit (a warning) or is within the estimator's error (a note).

    None when it fits or its capacity is unknown.
    """
    verdict = fit_verdict(estimate)
    if verdict is None or verdict is Verdict.FITS:
        return None
    needs = (
        f"{estimate.model} needs about {estimate.total_gib:.1f} GiB per GPU (parameters "
        f"{estimate.parameters_gib:.1f}, gradients {estimate.gradients_gib:.1f}, optimizer states "
        f"{estimate.optimizer_states_gib:.1f}, activations {estimate.activations_gib:.1f}, overhead "
        f"{estimate.overhead_gib:.1f})"
    )
    remedies = "; or ".join(estimate.remedies)
    if verdict is Verdict.DOES_NOT_FIT:
        return Finding(
            check="memory-fit",
            severity="warning",
            message=f"{needs}; {describe_fit(estimate)}: it will likely run out of memory",
            fix=f"try {remedies}; see `{command}`",
        )
    return Finding(
        check="memory-fit",
        severity="info",
        message=f"{needs}; {describe_fit(estimate)}",
        fix=f"if it runs out of memory, try {remedies}; see `{command}`",
    )


def _command(prepared: Any, estimate: MemoryEstimate) -> str:
    """A `tprimat memory estimate` command with the run's memory settings and capacity, to try changes with."""
    t, p = prepared.config.training, prepared.config.parallel
    sets = (
        f"--set training.micro_batch_size={t.micro_batch_size} --set training.seq_length={t.seq_length} "
        f"--set training.recompute={t.recompute} --set parallel.tensor={p.tensor} --set parallel.pipeline={p.pipeline}"
        f" --set parallel.context={p.context}"
    )
    capacity = f" --capacity-gib {estimate.capacity_gib:.2f}" if estimate.capacity_gib is not None else ""
    return f"tprimat memory estimate --model {prepared.model.name} --backend {prepared.backend} {sets}{capacity}"
