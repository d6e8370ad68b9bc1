"""Read MLPerf Training result files (``:::MLLOG`` lines) into time-to-train and its olympic score.

A result file holds one run.  Time to train is ``run_stop - run_start`` (the first
of each, as MLPerf's result summarizer takes them); the run converged when
``run_stop`` says ``status: success``.  Throughput comes from the
``block_start``/``block_stop`` pairs (training samples between them over the
time between them; evaluation falls outside blocks).  Reading needs no package:
each line is JSON after the ``:::MLLOG`` marker, which may follow a launcher prefix.

Several runs of one benchmark are scored by MLPerf's olympic rule: sort the
times, a run that did not converge counting as the slowest, drop the fastest
and the slowest, and average the rest; with more than one failed run the
benchmark has no score.  The scaling factor MLPerf applies on top (a folder's
``scaling.json``) is read by :mod:`tprimat.mlperf.layout` and applied in
:mod:`tprimat.mlperf.summary`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from tprimat.convergence.olympic import olympic_mean
from tprimat.errors import TprimatError

MARKER = ":::MLLOG"

#: Hyper-parameter keys kept from a log (MLPerf's names).
HYPERPARAMETER_KEYS = (
    "global_batch_size",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "max_sequence_length",
    "max_steps",
    "seed",
    "train_samples",
    "eval_samples",
    "target_accuracy",
    "init_checkpoint_step",
    "opt_name",
    "opt_base_learning_rate",
    "opt_end_learning_rate",
    "opt_learning_rate_warmup_steps",
    "opt_learning_rate_decay_steps",
    "opt_learning_rate_decay_schedule",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_gradient_clip_norm",
    "lowest_numerical_precision_in_linear",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "tensor_parallelism",
    "pipeline_parallelism",
    "context_parallelism",
    "expert_parallelism",
    "config_filename",
)
SUBMISSION_KEYS = (
    "submission_benchmark",
    "submission_org",
    "submission_division",
    "submission_status",
    "submission_platform",
)


class MlperfLogError(TprimatError):
    """A file that is not a usable MLPerf result (no ``:::MLLOG`` line, no run_start)."""


@attrs.frozen(kw_only=True)
class MlperfEval:
    samples: int | None
    value: float  # eval_accuracy: log-perplexity for the LLM benchmarks
    time_s: float  # since run_start


@attrs.frozen(kw_only=True)
class MlperfRun:
    """One MLPerf result file, read."""

    source: str
    benchmark: str | None
    org: str | None
    division: str | None
    platform: str | None  # submission_platform: the system name
    status: str | None  # run_stop status; None when the run never stopped
    time_to_train_s: float | None  # run_stop - run_start
    init_time_s: float | None  # first init_start to run_start
    samples_to_converge: int | None  # samples_count at run_stop (or the last evaluation)
    train_samples_per_s: float | None  # over the block_start/block_stop intervals
    train_tokens_per_s: float | None  # samples/s x max_sequence_length
    evaluations: list[MlperfEval] = attrs.Factory(list)
    hyperparameters: dict[str, Any] = attrs.Factory(dict)

    @property
    def converged(self) -> bool:
        return self.status == "success"


def _events(lines: Iterable[str], source: str) -> list[dict[str, Any]]:
    events = []
    for number, line in enumerate(lines, start=1):
        at = line.find(MARKER)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(MARKER) :])
        except ValueError as exc:
            raise MlperfLogError(f"{source}:{number}: unreadable {MARKER} line ({exc})") from None
        if isinstance(event, dict) and isinstance(event.get("key"), str):
            events.append(event)
    return events


def read_run(lines: Iterable[str], source: str) -> MlperfRun:
    """One run from the lines of its result file."""
    events = _events(lines, source)
    if not events:
        raise MlperfLogError(f"{source}: no {MARKER} line: not an MLPerf log")
    first: dict[str, dict[str, Any]] = {}
    for event in events:
        first.setdefault(event["key"], event)
    if "run_start" not in first:
        raise MlperfLogError(f"{source}: the log has no run_start; it cannot give a time to train")
    start_ms = first["run_start"]["time_ms"]
    stop = first.get("run_stop")
    metadata = (stop or {}).get("metadata") or {}
    evaluations = [
        MlperfEval(
            samples=(e.get("metadata") or {}).get("samples_count"),
            value=float(e["value"]),
            time_s=(e["time_ms"] - start_ms) / 1e3,
        )
        for e in events
        if e["key"] == "eval_accuracy" and isinstance(e.get("value"), int | float)
    ]
    samples = metadata.get("samples_count")
    if samples is None and evaluations:
        samples = evaluations[-1].samples
    hyper = {key: first[key]["value"] for key in HYPERPARAMETER_KEYS if key in first}
    per_s = _block_throughput(events, hyper.get("global_batch_size"))
    seq = hyper.get("max_sequence_length")
    info = {key: first[key]["value"] if key in first else None for key in SUBMISSION_KEYS}
    init = first.get("init_start")
    return MlperfRun(
        source=source,
        benchmark=info["submission_benchmark"],
        org=info["submission_org"],
        division=info["submission_division"],
        platform=info["submission_platform"],
        status=metadata.get("status") if stop is not None else None,
        time_to_train_s=(stop["time_ms"] - start_ms) / 1e3 if stop is not None else None,
        init_time_s=(start_ms - init["time_ms"]) / 1e3 if init is not None else None,
        samples_to_converge=samples,
        train_samples_per_s=per_s,
        train_tokens_per_s=per_s * seq if per_s is not None and isinstance(seq, int) else None,
        evaluations=evaluations,
        hyperparameters=hyper,
    )


def _block_samples(opened: dict[str, Any], closed: dict[str, Any], global_batch_size: Any) -> float | None:
    """Training samples in one block.

    Two conventions exist: ``samples_count`` as the running total at each end (the
    reference code), or as the block's size with the running ``step`` beside it
    (NVIDIA's NeMo callbacks); the step count times the global batch settles it.
    """
    begin, end = opened.get("metadata") or {}, closed.get("metadata") or {}
    first_step, last_step = begin.get("step"), end.get("step")
    if isinstance(first_step, int) and isinstance(last_step, int) and isinstance(global_batch_size, int):
        return (last_step - first_step) * global_batch_size if last_step > first_step else None
    first_count, last_count = begin.get("samples_count"), end.get("samples_count")
    if isinstance(first_count, int | float) and isinstance(last_count, int | float) and last_count > first_count:
        return last_count - first_count
    return None


def _block_throughput(events: list[dict[str, Any]], global_batch_size: Any) -> float | None:
    """Training samples per second over the blocks (block_start -> block_stop pairs)."""
    samples = seconds = 0.0
    opened: dict[str, Any] | None = None
    for event in events:
        if event["key"] == "block_start":
            opened = event
        elif event["key"] == "block_stop" and opened is not None:
            count = _block_samples(opened, event, global_batch_size)
            if count is not None:
                samples += count
                seconds += (event["time_ms"] - opened["time_ms"]) / 1e3
            opened = None
    return samples / seconds if seconds > 0 else None


def read_file(path: str | Path) -> MlperfRun:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return read_run(handle, str(path))
    except OSError as exc:
        raise MlperfLogError(f"{path}: cannot read: {exc.strerror}") from None


def is_mllog(path: str | Path, head_lines: int = 200) -> bool:
    """Whether the file carries ``:::MLLOG`` lines near its start."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(head_lines), handle, strict=False):
                if MARKER in line:
                    return True
    except OSError:
        return False
    return False


def mllog_files(paths: Iterable[str | Path]) -> list[Path] | None:
    """The MLPerf result files (runs) under ``paths``, or None when these are not MLPerf results.

    Side files of a published result folder (``scaling.json``, ``power/``, others)
    do not stop a folder from being read: :func:`tprimat.mlperf.layout.find_results`.
    """
    from tprimat.mlperf.layout import find_results

    found = find_results(paths)
    return found.runs if found is not None else None


@attrs.frozen(kw_only=True)
class OlympicScore:
    """MLPerf's score of several runs of one benchmark on one system."""

    runs: int
    converged: int
    score_s: float | None  # mean time to train after dropping the fastest and the slowest
    dropped: list[str]  # sources of the runs left out (fastest, slowest)
    reason: str | None = None  # why there is no score

    @property
    def score_min(self) -> float | None:
        return self.score_s / 60 if self.score_s is not None else None


def olympic_score(runs: list[MlperfRun], *, max_dropped: int = 1) -> OlympicScore:
    """Drop the ``max_dropped`` fastest and slowest runs (a failed run is the slowest); mean the rest."""
    times = [run.time_to_train_s if run.converged else None for run in runs]
    score, dropped, reason = olympic_mean(times, max_dropped=max_dropped)
    return OlympicScore(
        runs=len(runs),
        converged=sum(t is not None for t in times),
        score_s=score,
        dropped=[runs[i].source for i in dropped],
        reason=reason,
    )
