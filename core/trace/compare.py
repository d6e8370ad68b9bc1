"""Two trace sets side by side: the time of one step on each, and what explains the difference.

The unit is one profiler step as the host timeline records it
(``ProfilerStep#N``, the wall-clock step).  For each side, every rank's host
steps in the window are split into the GPU's exclusive time per kernel
category and **idle**, the time inside the step with no GPU activity at all
(the step waits on the host: data loading, Python, launches, synchronisation);
see :mod:`tprimat.trace.host_steps`.  The sum is divided by the number of
steps, then ranks are averaged.  Idle plus the categories add up to the step
exactly, so the per-category differences add up to the difference in step
time: nothing is left unexplained and nothing is counted twice.
``communication`` in this table is *exposed* communication (not hidden under
compute).  A trace without profiler steps has no host step: its step is the
span of its GPU activity, and the side says so.

Python API (used by the comparison report)::

    from tprimat.trace.compare import compare_traces

    comparison = compare_traces(["mi300x/rank0.json.gz"], ["h100/rank0.json.gz"],
                                labels=("MI300X", "H100"))
    print(comparison.to_markdown())
    comparison.plot("step_breakdown.png")   # needs matplotlib (the ``plot`` extra)
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tprimat.errors import TprimatError
from tprimat.trace.categories import LABELS
from tprimat.trace.opgap import OperatorGap, SideOperators, efficiency_sentence, summarize_operators

if TYPE_CHECKING:
    from tprimat.trace.opread import OpTrace
    from tprimat.trace.reader import RankTrace

#: Rows of the comparison, in order: idle first, then the categories by exclusive time.
BUCKETS: tuple[str, ...] = (
    "gemm",
    "attention",
    "communication",
    "elementwise",
    "norm",
    "optimizer",
    "memory",
    "other",
    "sync",
    "idle",
)

BUCKET_LABELS: dict[str, str] = {
    **LABELS,
    "communication": "exposed communication",
    "idle": "idle (no GPU activity)",
}

#: Vendor-neutral colours (Okabe–Ito palette, readable with colour-vision deficiency).
COLOURS: dict[str, str] = {
    "gemm": "#0072B2",
    "attention": "#56B4E9",
    "communication": "#E69F00",
    "elementwise": "#009E73",
    "norm": "#CC79A7",
    "optimizer": "#F0E442",
    "memory": "#D55E00",
    "other": "#999999",
    "sync": "#000000",
    "idle": "#E5E5E5",
}


def trace_files(path: str | Path) -> list[Path]:
    """The trace files a path names: the file itself, or the traces in a directory.

    A directory is searched for Kineto traces, Nsight Systems SQLite exports and rocprofv3
    kernel traces, JSON outputs and Perfetto traces (:func:`~tprimat.trace.reader.traces_in`); a run directory (holding
    ``traces/``) is searched in ``traces/``.
    """
    from tprimat.trace.reader import traces_in

    path = Path(path)
    if path.is_dir():
        found = traces_in(path / "traces" if (path / "traces").is_dir() else path)
        if not found:
            raise TprimatError(
                f"{path}: no traces in it (Kineto *.json or *.json.gz, Nsight Systems SQLite export *.sqlite, "
                "rocprofv3 *kernel_trace.csv, *_results.json or *_results.pftrace)"
            )
        return found
    if not path.exists():
        raise TprimatError(f"{path}: no such trace file or directory")
    return [path]


@attrs.frozen
class KernelShare:
    short_name: str
    name: str
    us_per_step: float
    count_per_step: float


@attrs.frozen
class SideSummary:
    """One side of a comparison: mean per-step breakdown over its ranks."""

    label: str
    files: tuple[str, ...]
    ranks: tuple[int | None, ...]
    vendor: str | None
    device: str | None
    steps: tuple[int, ...]  # profiler steps analysed (of the first rank)
    step_us: float  # one step: host ProfilerStep duration, or the GPU span without steps (mean over ranks)
    step_us_by_rank: tuple[float, ...]
    host_step_us: float | None  # mean ProfilerStep duration on the host, when steps exist
    buckets: dict[str, float]  # bucket -> µs per step
    communication_overlapped_us: float  # per step: communication hidden under compute
    kernels_per_step: float
    top_kernels: dict[str, tuple[KernelShare, ...]]  # category -> kernels (µs per step)
    notes: tuple[str, ...] = ()
    step_basis: str = "host"  # "host": ProfilerStep on the host timeline; "gpu span": no profiler steps
    #: the step split by operator group (:mod:`tprimat.trace.opgap`); None when not computed
    operators: SideOperators | None = None

    @property
    def idle_share(self) -> float:
        """Share of the step with no GPU activity (host-bound time)."""
        return self.buckets.get("idle", 0.0) / self.step_us if self.step_us else 0.0


@attrs.frozen
class TraceComparison:
    """Step time of two trace sets and the difference attributed to kernel categories (B − A)."""

    a: SideSummary
    b: SideSummary

    @property
    def labels(self) -> tuple[str, str]:
        return self.a.label, self.b.label

    @property
    def delta_us(self) -> float:
        return self.b.step_us - self.a.step_us

    def deltas(self) -> dict[str, float]:
        """µs per step, B − A, per bucket (they add up to :attr:`delta_us`)."""
        return {k: self.b.buckets.get(k, 0.0) - self.a.buckets.get(k, 0.0) for k in BUCKETS}

    def largest_differences(self, limit: int = 4, min_share: float = 0.01) -> list[tuple[str, float]]:
        """The buckets with the largest absolute differences (at least ``min_share`` of A's step)."""
        floor = abs(self.a.step_us) * min_share
        ranked = sorted(self.deltas().items(), key=lambda kv: -abs(kv[1]))
        return [(k, v) for k, v in ranked if abs(v) >= floor and v != 0.0][:limit]

    def rows(self) -> list[tuple[str, float, float, float]]:
        """(label, A µs/step, B µs/step, B − A) for each non-empty bucket, then the step total."""
        rows = []
        for bucket in BUCKETS:
            a = self.a.buckets.get(bucket, 0.0)
            b = self.b.buckets.get(bucket, 0.0)
            if a or b:
                rows.append((BUCKET_LABELS[bucket], a, b, b - a))
        rows.append((self.step_label, self.a.step_us, self.b.step_us, self.delta_us))
        return rows

    @property
    def step_label(self) -> str:
        """The name of the step row: what a step is on these two sides."""
        bases = {self.a.step_basis, self.b.step_basis}
        if bases == {"host"}:
            return "step (host ProfilerStep)"
        if bases == {"gpu span"}:
            return "step (GPU span, no profiler steps)"
        return "step (host ProfilerStep on one side, GPU span on the other)"

    def summary_line(self) -> str:
        parts = [f"{BUCKET_LABELS[k]} {_signed_ms(v)}" for k, v in self.largest_differences()]
        head = (
            f"{self.b.label} step {_ms(self.b.step_us)} vs {self.a.label} {_ms(self.a.step_us)} "
            f"({_signed_ms(self.delta_us)})"
        )
        idle = (
            f"; GPU idle {self.a.idle_share:.0%} of the step on {self.a.label}, "
            f"{self.b.idle_share:.0%} on {self.b.label}"
        )
        return head + (": " + ", ".join(parts) if parts else "") + idle

    def operator_gap(self) -> OperatorGap | None:
        """The step difference by operator group (None unless both sides were split by operator)."""
        if self.a.operators is None or self.b.operators is None:
            return None
        return OperatorGap(a=self.a.operators, b=self.b.operators)

    def operator_lines(self, limit: int = 5) -> list[str]:
        """For the largest matched differences with a roofline on either side:
        "aten::linear 16x559x1024, 2816x1024 (bf16) (+1.25 ms): on MI300X this GEMM reaches 36% …"."""
        gap = self.operator_gap()
        if gap is None:
            return []
        lines = []
        for row in gap.matched():
            sentence = efficiency_sentence(row, self.labels)
            if sentence is None:
                continue
            lines.append(f"{row['name']} {row['shapes']} ({_signed_ms(row['delta_us'])}): {sentence}")
            if len(lines) == limit:
                break
        return lines

    def to_dict(self) -> dict[str, Any]:
        gap = self.operator_gap()
        return {
            "labels": list(self.labels),
            "a": {**attrs.asdict(self.a, filter=_not_operators), "idle_share": self.a.idle_share},
            "b": {**attrs.asdict(self.b, filter=_not_operators), "idle_share": self.b.idle_share},
            "delta_us": self.delta_us,
            "deltas": self.deltas(),
            "summary": self.summary_line(),
            "operators": gap.to_dict() if gap is not None else None,
            "operator_summary": self.operator_lines(),
        }

    def to_markdown(self, heading: str = "###", plot: str | None = None) -> str:
        """A Markdown section: the table, the largest differences and the kernels behind them."""
        a, b = self.a, self.b
        lines = [
            f"{heading} Where one step's time goes: {a.label} vs {b.label}",
            "",
            f"- **{a.label}**: {_side_text(a)}",
            f"- **{b.label}**: {_side_text(b)}",
            "",
            f"**{self.summary_line()}**",
            "",
            f"| per step | {a.label} | {b.label} | {b.label} − {a.label} |",
            "|---|---:|---:|---:|",
        ]
        for label, va, vb, d in self.rows():
            bold = label == self.step_label
            cells = [label, _ms(va), _ms(vb), _signed_ms(d)]
            if bold:
                cells = [f"**{c}**" for c in cells]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            f"Communication hidden under compute (not in the table): {a.label} "
            f"{_ms(a.communication_overlapped_us)}, {b.label} {_ms(b.communication_overlapped_us)} per step. "
            f"Kernels launched per step: {a.label} {a.kernels_per_step:.0f}, {b.label} {b.kernels_per_step:.0f}.",
            "",
        ]
        if plot:
            lines += [f"![step breakdown]({plot})", ""]
        biggest = [k for k, _ in self.largest_differences(limit=6) if k not in ("idle",)]
        if biggest:
            lines += [f"{heading}# Kernels behind the largest differences", ""]
            for bucket in biggest:
                delta = self.deltas()[bucket]
                lines.append(f"- **{BUCKET_LABELS[bucket]}** ({_signed_ms(delta)} per step)")
                for side in (a, b):
                    kernels = side.top_kernels.get(bucket, ())[:3]
                    if not kernels:
                        lines.append(f"  - {side.label}: none")
                        continue
                    text = "; ".join(f"`{k.short_name}` {_ms(k.us_per_step)} ({k.count_per_step:g}×)" for k in kernels)
                    lines.append(f"  - {side.label}: {text}")
            lines.append("")
        lines += self._operator_markdown(heading)
        notes = [*a.notes, *b.notes]
        gap = self.operator_gap()
        if gap is not None:
            notes += [n for n in (*gap.a.notes, *gap.b.notes) if n not in notes]
        if notes:
            lines += ["Notes:", *[f"- {n}" for n in notes], ""]
        step = (
            "The step is the profiler step on the host timeline (`ProfilerStep#N`); idle is the part of it "
            "with no GPU activity on any stream (the GPU waits on the host). "
            if {a.step_basis, b.step_basis} == {"host"}
            else "Without profiler steps a step is the span of the GPU activity, so host time around it is not seen. "
        )
        lines.append(
            step + "Times are exclusive: where kernels overlap, compute claims the time first, then "
            "communication, memcpy/memset and GPU sync, so the rows add up to the step time."
        )
        return "\n".join(lines) + "\n"

    def _operator_markdown(self, heading: str, limit: int = 15) -> list[str]:
        """The "operators behind the difference" section: the decomposition and the largest groups."""
        gap = self.operator_gap()
        if gap is None:
            return []
        la, lb = self.labels
        parts = gap.components()
        lines = [
            f"{heading}# Operators behind the difference",
            "",
            f"The step difference ({_signed_ms(gap.delta_us)}) = matched operators "
            f"{_signed_ms(parts['matched_us'])} + unmatched operators {_signed_ms(parts['unmatched_us'])} "
            f"+ GPU time of no operator {_signed_ms(parts['no_operator_us'])} + idle {_signed_ms(parts['idle_us'])} "
            "(per step; operators matched by name, recorded shapes and dtypes).",
            "",
        ]
        lines += [f"- {line}" for line in self.operator_lines()]
        rows = gap.matched()[:limit]
        paths = gap.has_critical_path
        if rows:
            extra = f" on critical path {la} | on critical path {lb} |" if paths else ""
            lines += [
                "",
                f"| operator | shapes | {la} | {lb} | {lb} − {la} | roofline {la} | roofline {lb} |{extra}",
                "|---|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if paths else ""),
            ]
            for row in rows:
                cells = [
                    f"`{row['name']}`",
                    row["shapes"],
                    _ms(row["a_us"]),
                    _ms(row["b_us"]),
                    _signed_ms(row["delta_us"]),
                    _fraction(row["a_roofline_fraction"]),
                    _fraction(row["b_roofline_fraction"]),
                ]
                if paths:
                    cells += [_fraction(row["a_on_path"]), _fraction(row["b_on_path"])]
                lines.append("| " + " | ".join(cells) + " |")
        for side, label in (("a", la), ("b", lb)):
            only = gap.unmatched(side)
            if only:
                total = sum(r["exclusive_us"] for r in only)
                names = ", ".join(f"`{r['name']}` {r['shapes']}" for r in only[:3])
                lines += ["", f"Only on {label} ({_ms(total)} per step): {names}" + (" …" if len(only) > 3 else "")]
        lines += [
            "",
            "Times are exclusive GPU time per step inside the host step (overlapping kernels share an instant); "
            "the roofline columns are each side's GPU time at the roof divided by its measured GPU time "
            "(docs/traces.md, Per-operator roofline)"
            + (
                "; on critical path: the share of the group's GPU time, in the last complete step, that lies on "
                "that step's critical path."
                if paths
                else "."
            ),
            "",
        ]
        return lines

    def plot(self, path: str | Path) -> Path:
        """Stacked bars (one per side) of the per-step breakdown, written as PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = Path(path)
        sides = (self.a, self.b)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        positions = range(len(sides))
        bottoms = [0.0] * len(sides)
        for bucket in BUCKETS:
            values = [side.buckets.get(bucket, 0.0) / 1000.0 for side in sides]
            if not any(values):
                continue
            idle = bucket == "idle"
            ax.bar(
                positions,
                values,
                bottom=bottoms,
                color=COLOURS[bucket],
                edgecolor="#777777" if idle else "white",
                hatch="//" if idle else None,
                linewidth=0.5,
                label="idle: no GPU activity (host-bound)" if idle else BUCKET_LABELS[bucket],
                width=0.55,
            )
            bottoms = [x + y for x, y in zip(bottoms, values, strict=True)]
        ax.set_xticks(list(positions), [side.label for side in sides])
        host = all(side.step_basis == "host" for side in sides)
        ax.set_ylabel("time per profiler step (ms)" if host else "time per step (ms)")
        ax.set_title("Step time (host ProfilerStep) by GPU activity" if host else "Step time by GPU activity")
        for x, total, side in zip(positions, bottoms, sides, strict=True):
            text = f"{total:.1f} ms, GPU idle {side.idle_share:.0%}"
            ax.annotate(text, (x, total), ha="center", va="bottom", fontsize=9)
        ax.set_ylim(0, max(bottoms) * 1.1 if max(bottoms) > 0 else 1)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


def _ms(us: float) -> str:
    return f"{us / 1000.0:.2f} ms"


def _fraction(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _not_operators(attribute: attrs.Attribute, value: Any) -> bool:
    return attribute.name != "operators"


def _signed_ms(us: float) -> str:
    return f"{us / 1000.0:+.2f} ms"


def _side_text(side: SideSummary) -> str:
    device = side.device or "unknown device"
    ranks = ", ".join("?" if r is None else str(r) for r in side.ranks)
    steps = f"profiler steps {side.steps[0]}–{side.steps[-1]}" if side.steps else "whole trace (no profiler steps)"
    host = f", host step {_ms(side.host_step_us)}" if side.host_step_us else ""
    return f"{device}; rank(s) {ranks}; {steps}{host}; {len(side.files)} file(s)"


class NoGpuActivityError(TprimatError):
    """A trace set with no GPU activity (a CPU-only profile): there is no GPU time to compare."""


def _rank_step(result: dict[str, Any]) -> tuple[int, str, float, dict[str, float], str | None]:
    """One rank's (steps in the window, step basis, µs per step, bucket -> µs per step, note)."""
    window = result["window"]
    name = Path(result["file"]).name
    note = None
    if window["mode"] == "all":
        n_steps = 1
        if result.get("format", "kineto") != "kineto":
            from tprimat.trace.reader import FORMAT_NAMES

            note = (
                f"{name} ({FORMAT_NAMES.get(result['format'], result['format'])}): no profiler steps in "
                "it: the whole profile window is one span, measured as the span of its GPU activity (host time "
                "outside it is not seen), so its 'step' is the whole profile, not one training step"
            )
        elif window.get("steps"):
            note = f"{name}: fewer than two profiler steps: the whole trace counts as one step"
        else:
            note = (
                f"{name}: no profiler steps: the whole trace counts as one step, "
                "measured as the span of its GPU activity (host time outside it is not seen)"
            )
    else:
        n_steps = max(len(window.get("steps") or []), 1)
    host_steps = result.get("host_steps")
    if host_steps:
        n = len(host_steps["steps"])
        buckets = {category: value / n for category, value in host_steps["exclusive_us"].items()}
        buckets["idle"] = host_steps["idle_us"] / n
        return n_steps, "host", host_steps["host_us"] / n, buckets, note
    # no host step to measure against: the step is the span of the GPU activity
    temporal = result["temporal"]
    buckets = {category: values["exclusive_us"] / n_steps for category, values in result["categories"].items()}
    buckets["idle"] = temporal["idle_us"] / n_steps
    return n_steps, "gpu span", temporal["total_us"] / n_steps, buckets, note


def summarize_side(analyses: Sequence[dict[str, Any]], label: str, top: int = 3) -> SideSummary:
    """Average per-rank analyses (from :func:`tprimat.trace.analyze.analyze_trace`) into one side."""
    if not analyses:
        raise TprimatError(f"{label}: no traces to compare")
    buckets: dict[str, float] = defaultdict(float)
    overlapped = 0.0
    kernels = 0.0
    step_by_rank = []
    host: list[float] = []
    top_acc: dict[str, dict[str, list[Any]]] = defaultdict(dict)
    notes = []
    bases = set()
    for result in analyses:
        if result.get("temporal") is None:
            raise NoGpuActivityError(f"{label}: {Path(result['file']).name}: {result.get('note')}")
        n_steps, basis, step_us, rank_buckets, note = _rank_step(result)
        bases.add(basis)
        step_by_rank.append(step_us)
        for bucket, value in rank_buckets.items():
            buckets[bucket] += value
        if note:
            notes.append(note)
        if result.get("malformed_note"):
            notes.append(f"{Path(result['file']).name}: {result['malformed_note']}")
        if result.get("steps_note"):
            notes.append(f"{Path(result['file']).name}: {result['steps_note']}")
        notes += result.get("refused", [])
        overlapped += result["communication"]["overlapped_us"] / n_steps
        kernels += result["launches"]["kernels"] / n_steps
        host.extend(step["host_us"] for step in result.get("steps", []))
        for category, entries in result.get("top_by_category", {}).items():
            acc = top_acc[category]
            for entry in entries:
                item = acc.setdefault(entry["short_name"], [entry["name"], 0.0, 0.0])
                item[1] += entry["total_us"] / n_steps
                item[2] += entry["count"] / n_steps
    ranks_n = len(analyses)
    top_kernels = {}
    for category, acc in top_acc.items():
        ranked = sorted(acc.items(), key=lambda kv: -kv[1][1])[:top]
        top_kernels[category] = tuple(
            KernelShare(short, v[0], v[1] / ranks_n, round(v[2] / ranks_n, 1)) for short, v in ranked
        )
    # the operator split only where every rank has one
    breakdowns = [split for split in (r.get("operators") for r in analyses) if split]
    operators = summarize_operators(breakdowns) if len(breakdowns) == len(analyses) else None
    first = analyses[0]
    vendors = {r["vendor"] for r in analyses}
    devices = {r["device"] for r in analyses}
    return SideSummary(
        label=label,
        files=tuple(r["file"] for r in analyses),
        ranks=tuple(r["rank"] for r in analyses),
        vendor=vendors.pop() if len(vendors) == 1 else None,
        device=devices.pop() if len(devices) == 1 else None,
        steps=tuple(first["window"].get("steps") or ()) if first["window"]["mode"] != "all" else (),
        step_us=sum(step_by_rank) / ranks_n,
        step_us_by_rank=tuple(step_by_rank),
        host_step_us=(sum(host) / len(host)) if host else None,
        buckets={k: buckets.get(k, 0.0) / ranks_n for k in BUCKETS},
        communication_overlapped_us=overlapped / ranks_n,
        kernels_per_step=kernels / ranks_n,
        top_kernels=top_kernels,
        notes=tuple(dict.fromkeys(notes)),
        step_basis=bases.pop() if len(bases) == 1 else "mixed",
        operators=operators,
    )


def _default_label(analyses: Sequence[dict[str, Any]], fallback: str) -> str:
    devices = {r.get("device") for r in analyses}
    if len(devices) == 1:
        device = devices.pop()
        if device:
            return device.replace("NVIDIA ", "").replace("AMD Instinct ", "")
    return fallback


def all_steps(trace: RankTrace) -> tuple[int, int] | None:
    """Every profiler step of a trace as a ``steps`` range (None when it has none)."""
    numbers = sorted({step.number for step in trace.steps})
    return (numbers[0], numbers[-1]) if numbers else None


def compare_traces(
    a_paths: Iterable[str | Path],
    b_paths: Iterable[str | Path],
    labels: tuple[str | None, str | None] = (None, None),
    steps: tuple[int | None, int | None] | None = None,
    top: int = 3,
    workers: int | None = None,
    operators: bool = True,
    critical_path: bool = False,
    nvtx_step: str | None = None,
) -> TraceComparison:
    """Compare two trace sets (files, directories of traces, or run directories).

    ``labels`` name the sides (default: the GPU name recorded in the traces).
    ``steps`` restricts both sides to the same profiler steps (inclusive); by
    default every profiler step of each trace is used (a trace without
    profiler steps counts as one step).  The files of both sides are read on
    ``workers`` processes (default: every CPU), each file by one of them.  With
    ``operators`` (the default) each step is also split by operator group and the
    difference attributed to operators (:mod:`tprimat.trace.opgap`); with
    ``critical_path`` too, each group's share of GPU time on the critical path of one
    step (the last complete one of the window) on each side.  ``nvtx_step``: the NVTX ranges
    that are an Nsight Systems export's steps (:func:`~tprimat.trace.nsys.read_nsys`).
    """
    from tprimat.workers import map_files

    sides_files = []
    for paths, fallback in ((a_paths, "A"), (b_paths, "B")):
        files = [f for p in paths for f in trace_files(p)]
        if not files:
            raise TprimatError(f"side {fallback}: no trace files given")
        sides_files.append(files)
    analyse = functools.partial(
        _analyze_for_comparison,
        steps=steps,
        top=max(top, 5),
        operators=operators,
        critical_path=critical_path,
        nvtx_step=nvtx_step,
    )
    analyses = map_files(analyse, [*sides_files[0], *sides_files[1]], workers)
    split = len(sides_files[0])
    sides = [
        summarize_side(side, label or _default_label(side, fallback), top=top)
        for side, label, fallback in ((analyses[:split], labels[0], "A"), (analyses[split:], labels[1], "B"))
    ]
    if sides[0].label == sides[1].label:
        sides = [
            attrs.evolve(sides[0], label=f"{sides[0].label} (A)"),
            attrs.evolve(sides[1], label=f"{sides[1].label} (B)"),
        ]
    return TraceComparison(a=sides[0], b=sides[1])


def _analyze_for_comparison(
    file: Path,
    steps: tuple[int | None, int | None] | None,
    top: int,
    operators: bool = False,
    critical_path: bool = False,
    nvtx_step: str | None = None,
) -> dict[str, Any]:
    """One file's analysis for a side: over ``steps``, else every profiler step, with its host steps
    and, with ``operators``, their split by operator group."""
    from tprimat.trace.analyze import analyze_trace
    from tprimat.trace.host_steps import host_step_breakdown
    from tprimat.trace.opread import read_ops
    from tprimat.trace.reader import TraceFormatError, load_trace, sniff_format

    kind = sniff_format(file)
    ops = None
    if operators and kind == "kineto":
        try:
            ops = read_ops(file)
        except TraceFormatError:
            ops = None  # a broken trace: load_trace says what is wrong
    trace = ops.trace if ops is not None else load_trace(file, nvtx_step=nvtx_step)
    analysis = analyze_trace(trace, steps=steps or all_steps(trace), top=top)
    if kind != "kineto":
        analysis["refused"] = _refused(file, kind, operators, critical_path)
    host = analysis["window"]["mode"] != "all"
    if host and analysis.get("temporal") is not None:
        analysis["host_steps"] = host_step_breakdown(trace, analysis["window"]["steps"])
    if ops is not None and analysis.get("temporal") is not None:
        from tprimat.trace.opgap import operator_breakdown
        from tprimat.trace.roofline import compute_units_of, device_ceilings

        numbers = analysis["window"]["steps"] if analysis.get("host_steps") else None
        ceilings = device_ceilings(trace.device, compute_units=compute_units_of(trace))
        split = analysis["operators"] = operator_breakdown(ops, numbers, ceilings)
        if critical_path and split is not None:
            _add_critical_path(ops, split, numbers)
    return analysis


def _refused(file: Path, kind: str, operators: bool, critical_path: bool) -> list[str]:
    """What a vendor profiler's file cannot give a comparison, as notes: its format records kernels, copies
    and runtime calls, not PyTorch operators, their shapes or the launches between them."""
    from tprimat.trace.reader import FORMAT_NAMES

    what = [w for w, asked in (("operator split", operators), ("critical path", critical_path)) if asked]
    if not what:
        return []
    return [
        f"{file.name} ({FORMAT_NAMES.get(kind, kind)}): no {' and no '.join(what)}: the format has no PyTorch "
        "operators or shapes (a PyTorch profiler trace of the same run has them)"
    ]


def _add_critical_path(ops: OpTrace, split: dict[str, Any], numbers: list[int] | None) -> None:
    """Each group's GPU µs on the critical path of the window's last complete step, into ``split``."""
    from tprimat.trace.opgap import critical_path_shares

    name = Path(ops.trace.path).name
    if not numbers:
        split["critical_path_note"] = f"{name}: no profiler step: no critical path"
        return
    step = numbers[-2] if len(numbers) >= 2 else numbers[-1]
    try:
        split["critical_path"] = {"step": step, "by_group": critical_path_shares(ops, step)}
    except TprimatError as exc:
        split["critical_path_note"] = f"{name}: no critical path: {exc}"
