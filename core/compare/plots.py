"""Figures for comparison reports: one question per figure, readable on a slide.

matplotlib is imported inside :func:`render_plots` only.  Every figure is a
1600 × 900 pixel PNG (16:9) with large type, and each system keeps the same
colour in every figure (a colour-blind-safe palette, not vendor colours).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tprimat.compare.convergence import plot_eval_vs_time, plot_loss_vs_tokens
from tprimat.compare.model import MEMORY_FIELDS, Comparison
from tprimat.result.metrics import select_measured

FIGSIZE = (10.0, 5.625)
DPI = 160
PIXELS = (1600, 900)

_RC = {
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
    return label.replace(" · ", "\n")


def plot_throughput(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    systems = [s for s in comparison.systems if s.tokens_per_s_per_gpu is not None]
    if not systems:
        return None
    fig, ax = _figure(plt)
    xs = range(len(systems))
    medians = [s.tokens_per_s_per_gpu.median for s in systems]
    low, high, kinds = [], [], set()
    for s in systems:
        agg = s.tokens_per_s_per_gpu
        if agg.ci_low is not None:
            low.append(agg.median - agg.ci_low)
            high.append(agg.ci_high - agg.median)
            kinds.add("95% CI over runs")
        else:
            run = comparison.runs_of(s.label)[0].result.summary.tokens_per_s_per_gpu
            low.append(agg.median - run.p5)
            high.append(run.p95 - agg.median)
            kinds.add("p5–p95 over iterations (single run)")
    bars = ax.bar(xs, medians, color=[s.colour for s in systems], width=0.6)
    ax.errorbar(xs, medians, yerr=[low, high], fmt="none", ecolor="#333333", capsize=8, lw=1.5)
    for bar, s, up in zip(bars, systems, high, strict=True):
        text = f"{s.tokens_per_s_per_gpu.median:,.0f}"
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
    _caption(ax, "error bars: " + "; ".join(sorted(kinds)))
    ax.grid(axis="x", visible=False)
    return _save(plt, fig, path)


def _caption(ax: Any, text: str) -> None:
    """A note under the x tick labels: it can never cover a bar or the label above it."""
    ax.set_xlabel(text, fontsize=11, color="#444444", labelpad=10)


def plot_step_time(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    fig, ax = _figure(plt)
    tops, clipped, spans, drawn = [], 0, set(), False
    seen_labels = set()
    for system in comparison.systems:
        for run in comparison.runs_of(system.label):
            records = [r for r in run.result.iterations if r.step_time_s is not None]
            if not records:
                continue
            measured, _ = select_measured(run.result.iterations, warmup_iterations=run.result.summary.warmup_iterations)
            if run.result.summary.step_time_s is not None:
                tops.append(run.result.summary.step_time_s.p95)
            first = min(r.iteration - r.covers_iterations + 1 for r in run.result.iterations)
            warm = run.result.summary.warmup_iterations
            if warm:
                spans.add((first - 0.5, first + warm - 0.5))
            label = system.label if system.label not in seen_labels else None
            seen_labels.add(system.label)
            ax.plot(
                [r.iteration for r in records],
                [r.step_time_s for r in records],
                color=system.colour,
                lw=1.2,
                alpha=0.9,
                label=label,
                marker="." if len(records) <= 60 else None,
            )
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    top = max(tops) * 1.5 if tops else None
    if top:
        for run in comparison.runs:
            clipped += sum(1 for r in run.result.iterations if r.step_time_s is not None and r.step_time_s > top)
        ax.set_ylim(0, top)
    for i, (start, end) in enumerate(sorted(spans)):
        ax.axvspan(start, end, color="#999999", alpha=0.35, label="warm-up (left out)" if i == 0 else None)
    if spans:
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        ax.annotate(
            f"warm-up: iterations {start + 0.5:g}–{end - 0.5:g}",
            (end, 0.04),
            xycoords=("data", "axes fraction"),
            xytext=(8, 0),
            textcoords="offset points",
            fontsize=11,
            color="#444444",
        )
    ax.set_xlabel("iteration")
    ax.set_ylabel("step time (s)")
    ax.set_title("Step time per iteration")
    if clipped:
        ax.text(
            0.99,
            0.98,
            f"{clipped} iteration(s) above {top:.2f} s not shown (see the step-time table)",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=11,
            color="#444444",
        )
    ax.legend(loc="lower right")
    return _save(plt, fig, path)


def plot_loss(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    fig, ax = _figure(plt)
    finite_all, drawn, seen = [], False, set()
    for system in comparison.systems:
        for run in comparison.runs_of(system.label):
            points = [(r.iteration, r.loss) for r in run.result.iterations if r.loss is not None]
            finite = [(i, v) for i, v in points if math.isfinite(v)]
            if not finite:
                continue
            bad = len(points) - len(finite)
            label = system.label if system.label not in seen else None
            if label and bad:
                label += f" ({bad} non-finite not drawn)"
            seen.add(system.label)
            ax.plot(*zip(*finite, strict=True), color=system.colour, lw=1.4, label=label)
            finite_all.extend(v for _, v in finite)
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    positive = [v for v in finite_all if v > 0]
    if positive and len(positive) == len(finite_all) and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
        ax.set_ylabel("training loss (log scale)")
    else:
        ax.set_ylabel("training loss")
    ax.set_xlabel("iteration")
    ax.set_title("Training loss")
    ax.legend(loc="upper right")
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
        bars = ax.bar(xs, values, width=width * 0.95, color=s.colour, label=s.label)
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
    ax.legend(loc="upper left")
    return _save(plt, fig, path)


def plot_mfu(plt: Any, comparison: Comparison, path: Path) -> Path | None:
    systems = [s for s in comparison.systems if s.mfu is not None]
    if not systems:
        return None
    fig, ax = _figure(plt)
    xs = range(len(systems))
    values = [s.mfu.median * 100 for s in systems]
    bars = ax.bar(xs, values, color=[s.colour for s in systems], width=0.6)
    for bar, s in zip(bars, systems, strict=True):
        peak = "/".join(f"{p:g}" for p in s.peak_tflops)
        ax.annotate(
            f"{s.mfu.median:.1%}\n{s.tflops_per_gpu.median:.0f} of {peak} TFLOP/s",
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
