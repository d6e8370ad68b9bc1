"""Figures for comparison reports: one question per figure, readable on a slide.

matplotlib is imported inside :func:`render_plots` only.  Every figure is a
1600 × 900 pixel PNG (16:9) with large type, and each system keeps the same
colour in every figure (a colour-blind-safe palette, not vendor colours); in
the per-iteration figures each run has its own shade of it and marker, its own
warm-up caption, and a line broken where its log has no record
(:mod:`tprimat.compare.styles`).  Legends sit beside the axes, off the data.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tprimat.compare.convergence import plot_eval_vs_time, plot_loss_vs_tokens
from tprimat.compare.model import MEMORY_FIELDS, Comparison
from tprimat.compare.styles import broken, legend_outside, run_styles
from tprimat.result.metrics import iteration_gaps
from tprimat.result.schema import Stats

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

FIGSIZE = (10.0, 5.625)
DPI = 160
PIXELS = (1600, 900)

_RC: dict[RcKeyType, Any] = {
    "font.size": 14,
    "axes.titlesize": 18,
    "axes.labelsize": 15,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


def _figure(plt: Any) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    return fig, ax


def _save(plt: Any, fig: Any, path: Path) -> Path:
    try:
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)  # fixed size: no bbox_inches="tight"
    except OSError as exc:  # a full disk: one error naming the figure (the PNG writer chains two)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    finally:
        plt.close(fig)
    return path


def _wrap(label: str) -> str:
    """A system label on several short lines (one per part, long parts broken between words)."""
    return "\n".join(textwrap.fill(part, 20) for part in label.split(" · "))


def plot_throughput(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    measured = [(s, agg) for s in comparison.systems if (agg := s.tokens_per_s_per_gpu) is not None]
    if not measured:
        return None
    systems = [s for s, _ in measured]
    fig, ax = _figure(plt)
    xs = range(len(systems))
    medians = [agg.median for _, agg in measured]
    low: list[float] = []
    high: list[float] = []
    kinds: set[str] = set()
    for s, agg in measured:
        if agg.ci_low is not None and agg.ci_high is not None:
            low.append(agg.median - agg.ci_low)
            high.append(agg.ci_high - agg.median)
            kinds.add(agg.interval if agg.interval and agg.interval.startswith("range") else "95% CI over runs")
            continue
        run = _single_run_throughput(comparison, s.label)
        if run is None:  # no run's own statistics to draw: a bar without error bar
            low.append(0.0)
            high.append(0.0)
            continue
        low.append(agg.median - run.p5)
        high.append(run.p95 - agg.median)
        kinds.add("p5–p95 over iterations (single run)")
    bars = ax.bar(xs, medians, color=[s.colour for s in systems], width=0.6)
    ax.errorbar(xs, medians, yerr=[low, high], fmt="none", ecolor="#333333", capsize=8, lw=1.5)
    for bar, (s, agg), up in zip(bars, measured, high, strict=True):
        text = f"{agg.median:,.0f}"
        if s.ratio is not None:
            text += f"\n{s.ratio.value:.2f}× baseline"
            if not s.same_config_as_baseline:
                text += "\n(different config)"
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height() + up),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=13,
        )
    ax.set_xticks(list(xs), [_wrap(s.label) for s in systems])
    ax.set_ylabel("tokens/s/GPU (median)")
    lines = max(1 + (s.ratio is not None) + (not s.same_config_as_baseline) for s in systems)
    ax.set_ylim(0, max(m + h for m, h in zip(medians, high, strict=True)) * (1.15 + 0.08 * lines))
    ax.set_title("Training throughput per GPU")
    if kinds:
        _caption(ax, "error bars: " + "; ".join(sorted(kinds)))
    ax.grid(axis="x", visible=False)
    return _save(plt, fig, path)


def _single_run_throughput(comparison: Comparison, label: str) -> Stats | None:
    """The per-iteration tokens/s/GPU of the one run that gives system ``label`` its throughput.

    Not simply the system's first run: a system's other runs may have no throughput (a failed
    or unmeasured repeat), and only one run with a figure leaves the aggregate without interval.
    """
    for run in comparison.runs_of(label):
        stats = run.result.summary.tokens_per_s_per_gpu
        if stats is not None and math.isfinite(stats.median):
            return stats
    return None


def _caption(ax: Any, text: str) -> None:
    """A note under the x tick labels: it can never cover a bar or the label above it."""
    ax.set_xlabel(text, fontsize=11, color="#444444", labelpad=10)


def _spans(text_by_run: dict[str, str]) -> str:
    """``R1: 1–2; R2: 9–10``, per run; ``1–2 in every run`` when they all have the same."""
    distinct = set(text_by_run.values())
    if len(distinct) == 1 and len(text_by_run) > 1:
        return f"{distinct.pop()} in every run"
    return "; ".join(f"{key}: {text}" for key, text in text_by_run.items())


def _captions(ax: Any, lines: list[str]) -> None:
    """Notes under the axis label, smaller than it: they never cover the data or the legend."""
    if lines:
        ax.annotate(
            "\n".join(lines),
            (0.5, 0.0),
            xycoords="axes fraction",
            xytext=(0, -62),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=11,
            color="#444444",
        )


def _iteration_text(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def _run_lines(
    plt: Any, comparison: Comparison, value: str
) -> tuple[Any, Any, dict[str, list[tuple[int, int]]], list[float]] | None:
    """One line per run of ``value`` (``step_time_s`` or ``loss``) over iterations, broken at
    gaps, in the run's shade of its system's colour; None when no run has any."""
    fig, ax = _figure(plt)
    styles = run_styles(comparison)
    gaps_by_run: dict[str, list[tuple[int, int]]] = {}
    drawn: list[float] = []
    for system in comparison.systems:
        for run in comparison.runs_of(system.label):
            points = [(r.iteration, getattr(r, value)) for r in run.result.iterations if getattr(r, value) is not None]
            finite = [(i, v) for i, v in points if math.isfinite(v)]
            if not finite:
                continue
            gaps = iteration_gaps(run.result.iterations)
            if gaps:
                gaps_by_run[run.key] = gaps
            colour, marker = styles[run.key]
            label = f"{run.key}: {_wrap(system.label)}"
            if len(points) > len(finite):
                label += f"\n({len(points) - len(finite)} non-finite not drawn)"
            ax.plot(
                *broken([(i, i, v) for i, v in finite], gaps),
                color=colour,
                lw=1.3,
                alpha=0.9,
                label=label,
                marker=marker,
                markersize=5,
                markevery=max(1, len(finite) // 30),
            )
            drawn.extend(v for _, v in finite)
    if not drawn:
        plt.close(fig)
        return None
    return fig, ax, gaps_by_run, drawn


def _gap_caption(gaps_by_run: dict[str, list[tuple[int, int]]]) -> str | None:
    if not gaps_by_run:
        return None
    spans = {key: ", ".join(_iteration_text(a, b) for a, b in gaps) for key, gaps in gaps_by_run.items()}
    return "line broken where the log has no record: iterations " + _spans(spans)


def _warmup_end(run: Any, first: int) -> int:
    """The last iteration of the records left out as warm-up (a record covering iterations 1–100
    is warm-up as a whole when the warm-up is 2 iterations)."""
    end = first + run.result.summary.warmup_iterations - 1
    for record in run.result.iterations:
        if record.iteration - record.covers_iterations + 1 <= end:
            end = max(end, record.iteration)
    return end


def plot_step_time(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    found = _run_lines(plt, comparison, "step_time_s")
    if found is None:
        return None
    fig, ax, gaps_by_run, _ = found
    tops, clipped = [], 0
    warmups: dict[str, tuple[int, int]] = {}  # per run: its own warm-up, never merged with another's
    for run in comparison.runs:
        summary = run.result.summary
        if summary.step_time_s is not None:
            tops.append(summary.step_time_s.p95)
        if summary.warmup_iterations and run.result.iterations:
            first = min(r.iteration - r.covers_iterations + 1 for r in run.result.iterations)
            warmups[run.key] = (first, _warmup_end(run, first))
    for first, last in sorted(set(warmups.values())):
        ax.axvspan(first - 0.5, last + 0.5, color="#999999", alpha=0.25, lw=0)
    top = max(tops) * 1.5 if tops else None
    if top:
        for run in comparison.runs:
            clipped += sum(1 for r in run.result.iterations if r.step_time_s is not None and r.step_time_s > top)
        ax.set_ylim(0, top)
    captions = []
    if warmups:
        spans = {key: _iteration_text(*span) for key, span in warmups.items()}
        captions.append("shaded: warm-up, left out of the statistics: iterations " + _spans(spans))
    gap = _gap_caption(gaps_by_run)
    if gap:
        captions.append(gap)
    if clipped:
        captions.append(f"{clipped} iteration(s) above {top:.2f} s not shown (see the step-time table)")
    ax.set_xlabel("iteration")
    _captions(ax, captions)
    ax.set_ylabel("step time (s)")
    ax.set_title("Step time per iteration")
    legend_outside(ax)
    return _save(plt, fig, path)


def plot_loss(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    found = _run_lines(plt, comparison, "loss")
    if found is None:
        return None
    fig, ax, gaps_by_run, finite_all = found
    positive = [v for v in finite_all if v > 0]
    if positive and len(positive) == len(finite_all) and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
        ax.set_ylabel("training loss (log scale)")
    else:
        ax.set_ylabel("training loss")
    gap = _gap_caption(gaps_by_run)
    ax.set_xlabel("iteration")
    _captions(ax, [gap] if gap else [])
    ax.set_title("Training loss")
    legend_outside(ax)
    return _save(plt, fig, path)


def plot_memory(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    quantities = [
        (field, label) for field, label in MEMORY_FIELDS if any(field in s.memory for s in comparison.systems)
    ]
    if not quantities:
        return None
    capacity = any(s.device_memory_gib for s in comparison.systems)
    categories = quantities + ([("device_memory_gib", "device capacity (GiB)")] if capacity else [])
    fig, ax = _figure(plt)
    width = 0.8 / max(len(comparison.systems), 1)
    for i, s in enumerate(comparison.systems):
        values = []
        for field, _ in categories:
            if field == "device_memory_gib":
                values.append(s.device_memory_gib or 0.0)
            else:
                values.append(s.memory[field].median if field in s.memory else 0.0)
        xs = [c + (i - (len(comparison.systems) - 1) / 2) * width for c in range(len(categories))]
        bars = ax.bar(xs, values, width=width * 0.95, color=s.colour, label=_wrap(s.label))
        for bar, value in zip(bars, values, strict=True):
            ax.annotate(
                f"{value:.1f}" if value else "not\nrecorded",
                (bar.get_x() + bar.get_width() / 2, value),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=11,
                color="#222222" if value else "#777777",
            )
    ax.set_xticks(range(len(categories)), [label.replace(" (GiB)", "").replace(", ", ",\n") for _, label in categories])
    ax.set_ylabel("GiB (2^30 bytes)")
    ax.set_title("Memory per GPU")
    ax.grid(axis="x", visible=False)
    legend_outside(ax)
    return _save(plt, fig, path)


def plot_mfu(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    measured = [(s, mfu) for s in comparison.systems if (mfu := s.mfu) is not None]
    if not measured:
        return None
    systems = [s for s, _ in measured]
    fig, ax = _figure(plt)
    xs = range(len(systems))
    values = [mfu.median * 100 for _, mfu in measured]
    bars = ax.bar(xs, values, color=[s.colour for s in systems], width=0.6)
    for bar, (s, mfu) in zip(bars, measured, strict=True):
        peak = "/".join(f"{p:g}" for p in s.peak_tflops)
        tflops = "" if s.tflops_per_gpu is None else f"\n{s.tflops_per_gpu.median:.0f} of {peak} TFLOP/s"
        ax.annotate(
            f"{mfu.median:.1%}{tflops}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=13,
        )
    ax.set_xticks(list(xs), [_wrap(s.label) for s in systems])
    ax.set_ylabel("MFU (%)")
    ax.set_ylim(0, max(values) * 1.35)
    ax.set_title("Model FLOPs utilisation (MFU)")
    _caption(ax, "same FLOPs formula for all; peak = datasheet dense peak")
    ax.grid(axis="x", visible=False)
    return _save(plt, fig, path)


PLOTS = (
    ("throughput.png", plot_throughput),
    ("step_time.png", plot_step_time),
    ("loss.png", plot_loss),
    ("memory.png", plot_memory),
    ("mfu.png", plot_mfu),
    ("loss_vs_tokens.png", plot_loss_vs_tokens),
    ("eval_vs_time.png", plot_eval_vs_time),
)


def render_plots(comparison: Comparison, out_dir: Path) -> dict[str, Path]:
    """Write every figure the data supports into ``out_dir``; name -> path."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    written = {}
    with plt.rc_context(_RC):
        for name, function in PLOTS:
            path = function(plt, comparison, out_dir / name)
            if path is not None:
                written[name] = path
    return written
