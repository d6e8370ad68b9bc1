"""What ``tprimat run`` shows while a run goes: a progress bar, then a summary table.

Live tokens/s/GPU comes from :func:`tprimat.result.metrics.with_throughput`, the same
function the result uses.  On a terminal the view is a rich progress bar; when
output is redirected (CI, ``| tee``) it prints one plain line per iteration.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tprimat.convergence import iteration_budget
from tprimat.result.metrics import with_throughput
from tprimat.result.schema import IterationRecord, Result, Stats
from tprimat.settings.config import BenchmarkConfig


def _fmt(value: float | None, spec: str = ".4g", unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:{spec}}{unit}"


class LiveView:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.progress: Progress | None = None
        self.task: Any = None

    def started(self, prepared: Any) -> None:
        c = prepared.config
        self.console.print(
            f"[bold]tprimat run[/] {prepared.context.run_id}: {prepared.backend} · "
            f"{prepared.model.name} · {c.world_size} process(es) · "
            f"{c.training.global_batch_size}×{c.training.seq_length} tokens/iteration",
            highlight=False,
        )
        self.console.print(f"run directory: {prepared.run_dir}", highlight=False)
        for layer in prepared.layers:
            if layer.startswith("tuned preset "):  # a user preset is shared by every run of this user
                self.console.print(layer, highlight=False, markup=False)
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[throughput]}"),
                TextColumn("loss {task.fields[loss]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self.task = self.progress.add_task("train", total=iteration_budget(c), throughput="", loss="—")
            self.progress.start()

    def iteration(self, record: IterationRecord, config: BenchmarkConfig) -> None:
        (done,) = with_throughput(
            [record],
            global_batch_size=config.training.global_batch_size,
            seq_length=config.training.seq_length,
            world_size=config.world_size,
        )
        throughput = f"{_fmt(done.tokens_per_s_per_gpu, ',.0f')} tok/s/GPU"
        loss = _fmt(done.loss, ".4f")
        if self.progress is not None:
            self.progress.update(self.task, completed=record.iteration, throughput=throughput, loss=loss)
        else:
            self.console.print(
                f"iteration {record.iteration}/{iteration_budget(config)}  "
                f"step {_fmt(done.step_time_s, '.4f', ' s')}  {throughput}  loss {loss}"
                + ("  (profiled)" if done.profiled else ""),
                highlight=False,
            )

    def finished(self, result: Result, path: Path | None, prepared: Any) -> None:
        if self.progress is not None:
            self.progress.stop()
        if path is None:
            self.console.print(
                f"node {prepared.context.node_rank}: logs in {prepared.run_dir}; node rank 0 writes the result"
            )
            return
        self.console.print(summary_table(result))
        for note in result.provenance.notes:
            if note.startswith("log: "):
                self.console.print(f"  {note}", highlight=False, markup=False)
        self.console.print(f"result: {path}", highlight=False)


def _stats(stats: Stats | None, spec: str, unit: str = "") -> str:
    if stats is None:
        return "—"
    text = f"{stats.median:{spec}}{unit} median (p5 {stats.p5:{spec}}, p95 {stats.p95:{spec}}"
    if stats.cv is not None:
        text += f", CV {stats.cv:.1%}"
    return text + ")"


def summary_table(result: Result) -> Table:
    s = result.summary
    table = Table(title=f"{result.run.id} — {result.run.status}", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    rows = [
        ("backend / model", f"{result.run.backend} / {result.run.model} ({result.run.dataset})"),
        ("device", f"{result.hardware.device_name or '—'} × {result.config.world_size}"),
        (
            "iterations",
            f"{len(result.iterations)} recorded, {s.measured_iterations} measured (warm-up {s.warmup_iterations})",
        ),
        ("step time", _stats(s.step_time_s, ".4f", " s")),
        ("tokens/s/GPU", _stats(s.tokens_per_s_per_gpu, ",.0f")),
        ("tokens/s (job)", _stats(s.tokens_per_s, ",.0f")),
        ("TFLOP/s/GPU", _fmt(s.tflops_per_gpu, ".3g")),
        ("MFU", _fmt(s.mfu, ".1%") if s.mfu is not None else "— (no peak for this device)"),
        *([("MAMF utilisation", mamf_text(s))] if s.mamf_tflops is not None else []),
        (
            "memory (GiB)",
            ", ".join(
                f"{k} {_fmt(v, '.2f')}"
                for k, v in (
                    ("max allocated", s.mem_max_allocated_gib),
                    ("max reserved", s.mem_max_reserved_gib),
                    ("device used", s.mem_device_used_gib),
                    ("RSS", s.mem_rss_gib),
                )
                if v is not None
            )
            or "—",
        ),
        (
            "energy",
            _fmt(s.energy_per_token_j, ".4g", " J/token")
            if s.energy_per_token_j is not None
            else "— (no power samples for every iteration)",
        ),
        ("final loss", _fmt(s.final_loss, ".4f")),
        *([("time to train", convergence_text(result.convergence))] if result.convergence else []),
    ]
    for what, value in rows:
        table.add_row(what, value)
    return table


def convergence_text(c: Any) -> str:
    """``target 4.6 reached at 192 samples in 43.3 s (init 7.6 s, 6 evaluations)`` or the miss."""
    if c.reached:
        text = (
            f"target {c.target_log_perplexity:g} reached at {c.samples_to_target:,} samples "
            f"in {_fmt(c.time_to_target_s, '.1f', ' s')}"
        )
    else:
        text = f"target {c.target_log_perplexity:g} not reached (best eval loss {_fmt(c.best_eval_loss, '.4f')})"
    return text + f" (init {_fmt(c.init_time_s, '.1f', ' s')}, {c.evaluations} evaluations)"


def mamf_text(summary: Any) -> str:
    """``41.2% of 612 TFLOP/s measured (microbench …)``: achieved over the measured ceiling."""
    share = _fmt(summary.mamf_utilisation, ".1%")
    return (
        f"{share} of {_fmt(summary.mamf_tflops, '.4g')} TFLOP/s measured "
        f"(microbench {Path(summary.mamf_source).name if summary.mamf_source else '?'})"
    )
