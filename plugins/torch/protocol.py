"""The torch trainer's machine-readable log lines, and the parser that reads them.

Rank 0 of the trainer prints one line per iteration::

    TPRIMAT_ITER {"iteration": 3, "step_time_s": 0.0412, "loss": 7.9, ...}

and one ``TPRIMAT_INFO {...}`` line at start-up (versions, world size,
devices).  Convergence runs add one ``TPRIMAT_EVAL {...}`` line per evaluation
(samples, wall time since run start, eval loss) and a last ``TPRIMAT_INFO`` line
with the run clock (init time, run time, status).  The runner reads them exactly as it reads a vendor framework's
log: through the backend's ``parse_metrics`` hook, into
:class:`~tprimat.result.schema.IterationRecord` objects.  The line may carry a
launcher prefix (torchrun's ``[default0]:``), so the marker is searched
anywhere in the line.  Only measured values travel; tokens and throughput are
computed by the core.  This module must not import torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from tprimat.contract import IterationRecord
from tprimat.contract.records import EvalRecord, LogFact, ParseEvent, ParseIssue

ITER_MARKER = "TPRIMAT_ITER "
INFO_MARKER = "TPRIMAT_INFO "
EVAL_MARKER = "TPRIMAT_EVAL "

#: Fields an iteration line may carry, and the record field each one fills.
FLOAT_FIELDS = (
    "step_time_s",
    "loss",
    "lr",
    "grad_norm",
    "mem_allocated_gib",
    "mem_max_allocated_gib",
    "mem_reserved_gib",
    "mem_max_reserved_gib",
    "mem_device_used_gib",
    "mem_device_total_gib",
    "mem_rss_gib",
)
INT_FIELDS = ("global_batch_size", "consumed_samples", "skipped")

#: Start-up facts the trainer states, as LogFact keys.
INFO_FACTS = (
    "torch_version",
    "transformers_version",
    "world_size",
    "device_name",
    "collectives",
    "strategy",
    "dtype",
    "attention",
    "dataset",
    "micro_batches_per_rank",
    "init_time_s",
    "run_time_s",
    "run_started_at",
    "convergence_status",
)


def format_iteration(values: dict[str, Any]) -> str:
    """The line the trainer prints for one iteration (non-finite floats as NaN/Infinity)."""
    return ITER_MARKER + json.dumps(values, separators=(",", ":"), allow_nan=True)


def format_info(values: dict[str, Any]) -> str:
    return INFO_MARKER + json.dumps(values, separators=(",", ":"), allow_nan=True)


def format_eval(values: dict[str, Any]) -> str:
    return EVAL_MARKER + json.dumps(values, separators=(",", ":"), allow_nan=True)


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    raise ValueError(f"not a number: {value!r}")


def _record(data: dict[str, Any], where: str) -> IterationRecord:
    iteration = data.get("iteration")
    if isinstance(iteration, bool) or not isinstance(iteration, int):
        raise ValueError("no integer 'iteration'")
    fields: dict[str, Any] = {"iteration": iteration, "source": where}
    for key in FLOAT_FIELDS:
        if key in data:
            fields[key] = _number(data[key])
    step = fields.get("step_time_s")
    if step is not None and not (math.isfinite(step) and step > 0):
        raise ValueError(f"step_time_s must be a positive number, got {step!r}")
    for key in INT_FIELDS:
        value = data.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{key} must be an integer, got {value!r}")
            fields[key] = value
    if "profiled" in data:
        fields["profiled"] = bool(data["profiled"])
    if isinstance(data.get("timestamp"), str):
        fields["timestamp"] = data["timestamp"]
    return IterationRecord(**fields)


def _eval_record(data: dict[str, Any], where: str) -> EvalRecord:
    loss = _number(data.get("eval_loss"))
    if loss is None:
        raise ValueError("no number 'eval_loss'")
    ints = {}
    for key in ("iteration", "samples", "eval_sequences"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{key} must be an integer, got {value!r}")
        ints[key] = value
    return EvalRecord(eval_loss=loss, time_s=_number(data.get("time_s")), source=where, **ints)


def parse_lines(lines: Iterable[str], source: str) -> Iterator[ParseEvent]:
    """Iteration records, start-up facts and issues from the trainer's output, lazily."""
    for number, line in enumerate(lines, start=1):
        where = f"{source}:{number}"
        for marker in (ITER_MARKER, INFO_MARKER, EVAL_MARKER):
            at = line.find(marker)
            if at < 0:
                continue
            payload = line[at + len(marker) :].strip()
            try:
                data = json.loads(payload)
                if not isinstance(data, dict):
                    raise ValueError("payload is not a JSON object")
                if marker == ITER_MARKER:
                    yield _record(data, where)
                elif marker == EVAL_MARKER:
                    yield _eval_record(data, where)
                else:
                    for key in INFO_FACTS:
                        if data.get(key) is not None:
                            yield LogFact(key=key, value=data[key], source=where)
            except (ValueError, TypeError) as exc:
                yield ParseIssue(source=where, message=f"unreadable {marker.strip()} line: {exc}")
            break
