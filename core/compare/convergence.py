"""Time to train in comparison reports: time-to-target with intervals, and the loss curves.

Only results with evaluation records take part (convergence runs, or logs with validation
lines).  Each run contributes its own time and samples to the target; a system's value is
the median over the runs that reached it, with the same bootstrap interval as throughput
(:mod:`tprimat.compare.stats`).  Runs that missed the target are counted, never averaged in.
The figures draw every run: training loss (thin) and evaluation loss (markers) against
tokens and against wall time since run start (training loss only where the run logged
its start time and iteration timestamps), with the target line.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat.compare.document import (
    DASH,
    Block,
    Bullets,
    Heading,
    Image,
    Paragraph,
    Table,
    format_interval,
    format_median,
)
from tprimat.compare.model import Comparison
from tprimat.compare.stats import Aggregate, aggregate
from tprimat.compare.styles import broken, legend_outside, run_styles
from tprimat.convergence.olympic import olympic_mean
from tprimat.result.metrics import iteration_gaps


@attrs.frozen(kw_only=True)
class SystemConvergence:
    label: str
    runs: int  # runs with evaluations
    reached: int
    targets: list[float]
    time_to_target_s: Aggregate | None
    samples_to_target: Aggregate | None
    tokens_to_target: Aggregate | None
    init_time_s: Aggregate | None
    clocks: list[str]
    olympic_s: float | None  # MLPerf's olympic mean (a run that missed counts as the slowest)
    olympic_note: str | None


def convergence_of(c: Comparison) -> list[SystemConvergence]:
    """One entry per system that has at least one run aiming at a target (a convergence summary).

    A log's validation lines alone set no target: such runs have loss curves, not a time to train.
    """
    found = []
    for system in c.systems:
        results = [r.result for r in c.runs_of(system.label) if r.result.convergence is not None]
        if not results:
            continue
        summaries = [r.convergence for r in results if r.convergence is not None]
        hit = [s for s in summaries if s.reached]
        olympic, _, note = olympic_mean([s.time_to_target_s if s.reached else None for s in summaries])
        found.append(
            SystemConvergence(
                label=system.label,
                runs=len(results),
                reached=len(hit),
                targets=sorted({s.target_log_perplexity for s in summaries}),
                time_to_target_s=aggregate([s.time_to_target_s for s in hit]),
                samples_to_target=aggregate([s.samples_to_target for s in hit]),
                tokens_to_target=aggregate([s.tokens_to_target for s in hit]),
                init_time_s=aggregate([s.init_time_s for s in summaries], interval=False),
                clocks=sorted({s.clock for s in summaries if s.clock}),
                olympic_s=olympic,
                olympic_note=note,
            )
        )
    return found


def convergence_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """The report section; empty when no result has evaluations."""
    systems = convergence_of(c)
    if not systems:
        return []
    rows = []
    for s in systems:
        time, time_ci = format_median(s.time_to_target_s, ",.1f"), format_interval(s.time_to_target_s, ",.1f")
        samples = format_median(s.samples_to_target, ",.0f")
        tokens = format_median(s.tokens_to_target, ",.0f")
        init = format_median(s.init_time_s, ",.1f")
        target = ", ".join(f"{t:g}" for t in s.targets) or DASH
        olympic = f"{s.olympic_s:,.1f}" if s.olympic_s is not None else f"{DASH} ({s.olympic_note})"
        rows.append([s.label, f"{s.reached}/{s.runs}", target, time, time_ci, olympic, samples, tokens, init])
    blocks: list[Block] = [
        Heading(2, "Time to train"),
        Paragraph(
            "Time to target = wall time from run start to the first evaluation at or below the target "
            "eval log-perplexity (MLPerf's clock: evaluation included, initialisation reported apart). "
            "The median is over the runs that reached the target; the interval is the 95% bootstrap "
            "interval of that median, or the range of the runs when they are too few for one.  "
            "The olympic mean is MLPerf's score: drop the fastest and the "
            "slowest run (a run that missed the target counting as the slowest) and average the rest."
        ),
        Table(
            [
                "system",
                "runs at target",
                "target",
                "time to target (s, median)",
                "interval over runs",
                "olympic mean (s)",
                "samples to target",
                "tokens to target",
                "init time (s)",
            ],
            rows,
        ),
    ]
    notes = []
    targets = {t for s in systems for t in s.targets}
    if len(targets) > 1:
        notes.append(
            f"the runs aim at different targets ({', '.join(f'{t:g}' for t in sorted(targets))}): "
            "their times to target are not comparable"
        )
    for s in systems:
        if s.reached < s.runs:
            notes.append(
                f"{s.label}: {s.runs - s.reached} of {s.runs} runs did not reach the target "
                "within their budget (left out of the median)"
            )
        for clock in s.clocks:
            notes.append(f"{s.label}: time measured as {clock}")
    if notes:
        blocks.append(Bullets(notes))
    for name, alt in (
        ("loss_vs_tokens.png", "Loss against tokens with the target"),
        ("eval_vs_time.png", "Loss against wall time since run start with the target"),
    ):
        if name in plots:
            blocks.append(Image(name, alt))
    return blocks


def convergence_to_dict(c: Comparison) -> list[dict[str, Any]]:
    def plain(value: Aggregate | None) -> dict[str, Any] | None:
        return None if value is None else {k: v for k, v in attrs.asdict(value).items() if k != "values"}

    return [
        {
            "system": s.label,
            "runs": s.runs,
            "reached": s.reached,
            "targets": s.targets,
            "time_to_target_s": plain(s.time_to_target_s),
            "samples_to_target": plain(s.samples_to_target),
            "tokens_to_target": plain(s.tokens_to_target),
            "olympic_s": s.olympic_s,
            "olympic_note": s.olympic_note,
            "clocks": s.clocks,
        }
        for s in convergence_of(c)
    ]


# -- figures ------------------------------------------------------------------------------


def _target_line(ax: Any, c: Comparison) -> None:
    targets = sorted({r.result.convergence.target_log_perplexity for r in c.runs if r.result.convergence})
    for i, target in enumerate(targets):
        ax.axhline(target, color="#222222", ls="--", lw=1.2, label="target" if i == 0 else None)


def training_loss_by_tokens(result: Any) -> list[tuple[float, float]]:
    """(tokens trained, training loss) after each iteration that logged a finite loss.

    Tokens trained are the logged consumed samples × sequence length, as for the
    evaluations, so that batch-size ramp-up and skipped iterations are counted as they
    were trained; a record without consumed samples falls back to iteration × the
    iteration's tokens.
    """
    return [(x, y) for _, x, y in _loss_by_tokens(result)]


def _loss_by_tokens(result: Any) -> list[tuple[int, float, float]]:
    """(iteration, tokens trained, training loss): :func:`training_loss_by_tokens` with the iteration."""
    seq_length = result.config.seq_length
    points = []
    for r in result.iterations:
        if r.loss is None or not math.isfinite(r.loss):
            continue
        if r.consumed_samples is not None and seq_length:
            points.append((r.iteration, float(r.consumed_samples * seq_length), r.loss))
        elif r.tokens:
            points.append((r.iteration, float(r.tokens * r.iteration), r.loss))
    return points


def plot_loss_vs_tokens(plt: Any, c: Comparison, path: Path) -> Path | None:
    if not any(r.result.evaluations for r in c.runs):
        return None
    fig, ax = plt.subplots(figsize=(10.0, 5.625), dpi=160)
    styles = run_styles(c)
    for system in c.systems:
        for run in c.runs_of(system.label):
            result = run.result
            colour, marker = styles[run.key]
            train = _loss_by_tokens(result)
            if train:
                ax.plot(*broken(train, iteration_gaps(result.iterations)), color=colour, lw=0.8, alpha=0.45)
            evals = [
                (p.tokens, p.eval_loss)
                for p in result.evaluations
                if p.tokens is not None and p.eval_loss is not None and math.isfinite(p.eval_loss)
            ]
            if evals:
                label = f"{run.key}: {system.label.replace(' · ', chr(10))} (eval)"
                ax.plot(*zip(*evals, strict=True), color=colour, lw=1.6, marker=marker, ms=4, label=label)
    _target_line(ax, c)
    ax.set_xlabel("tokens trained")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("Loss against tokens (thin: training; markers: eval)")
    legend_outside(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=160)
    plt.close(fig)
    return path


def _training_on_clock(result: Any) -> list[tuple[float, float]]:
    """Training loss at each iteration's end, in seconds since run start (when both are logged)."""
    return [(x, y) for _, x, y in _clocked_loss(result)]


def _clocked_loss(result: Any) -> list[tuple[int, float, float]]:
    """(iteration, seconds since run start, training loss): :func:`_training_on_clock` with the iteration."""
    started = result.convergence.run_started_at if result.convergence else None
    if not started:
        return []
    zero = datetime.fromisoformat(started)
    return [
        (r.iteration, (datetime.fromisoformat(r.timestamp) - zero).total_seconds(), r.loss)
        for r in result.iterations
        if r.timestamp and r.loss is not None and math.isfinite(r.loss)
    ]


def plot_eval_vs_time(plt: Any, c: Comparison, path: Path) -> Path | None:
    timed = [r for r in c.runs if any(p.time_s is not None for p in r.result.evaluations)]
    if not timed:
        return None
    fig, ax = plt.subplots(figsize=(10.0, 5.625), dpi=160)
    styles = run_styles(c)
    for system in c.systems:
        for run in c.runs_of(system.label):
            points = [
                (p.time_s, p.eval_loss)
                for p in run.result.evaluations
                if p.time_s is not None and p.eval_loss is not None and math.isfinite(p.eval_loss)
            ]
            if not points:
                continue
            colour, marker = styles[run.key]
            train = _clocked_loss(run.result)
            if train:
                ax.plot(*broken(train, iteration_gaps(run.result.iterations)), color=colour, lw=0.8, alpha=0.45)
            label = f"{run.key}: {system.label.replace(' · ', chr(10))}"
            ax.plot(*zip(*points, strict=True), color=colour, lw=1.6, marker=marker, ms=4, label=label)
    _target_line(ax, c)
    ax.set_xlabel("wall time since run start (s)")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("Loss against time to train (thin: training; markers: eval)")
    legend_outside(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=160)
    plt.close(fig)
    return path
