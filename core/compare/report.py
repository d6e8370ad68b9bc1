"""Write a comparison as ``report.md``, ``report.html``, ``results.csv`` and ``report.json``."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tprimat.atomic import atomic_write_text
from tprimat.compare.convergence import convergence_blocks, convergence_to_dict
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
    format_number,
    format_ratio_interval,
    to_html,
    to_markdown,
)
from tprimat.compare.group import FAIR_FIELDS
from tprimat.compare.model import (
    MEMORY_FIELDS,
    PREDICTED_MEMORY_FIELDS,
    Comparison,
    SystemSummary,
    comparison_to_dict,
)
from tprimat.compare.stats import Aggregate
from tprimat.errors import TprimatError

FORMATS = ("md", "html", "csv", "json")

#: MAD (madengine perf.csv) columns first, then tprimat's own.
CSV_COLUMNS = (
    "model",
    "performance",
    "metric",
    "n_gpus",
    "nnodes",
    "gpus_per_node",
    "training_precision",
    "machine_name",
    "gpu_architecture",
    "status",
    "dataname",
    # MAD's provenance columns (madengine's perf.csv names), filled where the run recorded them
    "tags",
    "docker_image",
    "docker_sha",
    "base_docker",
    "git_commit",
    "deployment_type",
    "launcher",
    "platform",
    "device_name",
    "backend",
    "framework",
    "seq_length",
    "global_batch_size",
    "step_time_median_s",
    "step_time_p95_s",
    "step_time_cv",
    "tflops_per_gpu",
    "mfu",
    "mamf_tflops",
    "mamf_utilisation",
    "measured_iterations",
    "warmup_iterations",
    "run_id",
    "result_file",
    "config_fingerprint",
    "group",
    "system",
    "framework_commits",
    "energy_source",
)
CSV_METRIC = "tokens_per_s_per_gpu"


def parse_formats(text: str) -> list[str]:
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise TprimatError(f"--format {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return list(dict.fromkeys(formats))


# --- number formatting ----------------------------------------------------------------------


def _range(agg: Aggregate | None, spec: str) -> str:
    if agg is None or agg.single_run:
        return DASH
    return f"{agg.min:{spec}} {DASH} {agg.max:{spec}}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    hours = seconds / 3600
    if hours < 48:
        return f"{hours:,.1f} h"
    return f"{hours / 24:,.1f} days"


def _tokens(n: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if n >= scale:
            return f"{n / scale:g}{suffix}"
    return f"{n:g}"


def _value(value: Any) -> str:
    if value is None:
        return DASH
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


# --- the document ---------------------------------------------------------------------------


def _summary_lines(c: Comparison) -> list[str]:
    base = c.system(c.baseline)
    lines = []
    for s in c.systems:
        if s.ratio is None:
            continue
        if s.ratio.ci_low is not None:
            interval = f"{s.ratio.interval} {s.ratio.ci_low:.3f} {DASH} {s.ratio.ci_high:.3f}"
        else:
            interval = s.ratio.note or "no interval"
        caveat = "" if s.same_config_as_baseline else " — configurations differ (see above)"
        lines.append(
            f"{s.label}: {s.ratio.value:.3f}× the tokens/s/GPU of {base.label} "
            f"({format_median(s.tokens_per_s_per_gpu, ',.1f')} vs "
            f"{format_median(base.tokens_per_s_per_gpu, ',.1f')}; {interval}){caveat}"
        )
    return lines


def _tuning_blocks(c: Comparison) -> list[Block]:
    """What tuning bought each system that was measured both iso and tuned."""
    if not c.tuning:
        return []
    rows = []
    for gain in c.tuning:
        ratio = gain.speedup
        rows.append(
            [
                gain.system,
                format_median(gain.iso, ",.1f"),
                format_median(gain.tuned, ",.1f"),
                DASH if ratio is None else f"{ratio.value:.3f}×",
                format_ratio_interval(ratio),
                ", ".join(gain.presets) or DASH,
                "; ".join(gain.deviations) or DASH,
            ]
        )
    return [
        Heading(2, "Tuned vs iso"),
        Paragraph(
            "For each system measured both ways: median tokens/s/GPU of its iso runs and of its tuned "
            "runs, and the speed-up tuning gave it (tuned over iso, with the bootstrap interval)."
        ),
        Table(
            ["system", "iso tokens/s/GPU", "tuned tokens/s/GPU", "speed-up", "interval", "preset", "deviations"], rows
        ),
    ]


def _systems_blocks(c: Comparison) -> list[Block]:
    """How runs were pooled into systems, and every setting that differs inside one."""
    if c.group_by is None:
        text = (
            "Runs are repeats of one system only when they launched the same thing: device, backend, "
            "framework, software and every recorded setting (the seed aside). Runs that differ in any "
            "of these are different systems, labelled by what sets them apart."
        )
    else:
        text = (
            f"Runs are pooled into systems by `--group-by {','.join(c.group_by)}`, as asked: runs of one "
            "system are treated as repeats even where they launched different settings (listed below)."
        )
    blocks: list[Block] = [Heading(2, "Systems"), Paragraph(text)]
    blocks.append(Table(["system", "runs"], [[s.label, ", ".join(s.run_keys)] for s in c.systems]))
    for label, rows in c.within_system.items():
        keys = c.system(label).run_keys
        blocks.append(
            Paragraph(
                f"Settings that differ inside {label}: its runs are not repeats of one setup, so its "
                "median and interval mix them."
            )
        )
        blocks.append(Table(["setting", *keys], [[name, *[_value(v) for v in values]] for name, values in rows]))
    return blocks


def _group_table(c: Comparison) -> Table:
    headers = ["field", *[f"group {g.id}" for g in c.groups]]
    rows = [[name, *[_value(g.fields.get(name)) for g in c.groups]] for name in FAIR_FIELDS]
    rows.append(["config fingerprint", *[g.fingerprint for g in c.groups]])
    rows.append(["runs", *[", ".join(g.run_keys) for g in c.groups]])
    return Table(headers, rows)


def _mfu_notes(c: Comparison) -> list[str]:
    notes = []
    for run in c.runs:
        if run.result.summary.mfu is None:
            reasons = [n for n in run.result.provenance.notes if "MFU" in n or "peak" in n.lower()]
            notes.append(f"{run.key} ({run.system}): no MFU" + (f" — {reasons[0]}" if reasons else ""))
    return notes


def _preflight_blocks(c: Comparison) -> list[Block]:
    """Per run, what ``tprimat doctor`` found before it started (from its manifest)."""
    if all(r.preflight is None for r in c.run_rows):
        return []
    lines = []
    for r in c.run_rows:
        if r.preflight is None:
            lines.append(f"{r.key} ({r.system}): not recorded")
        elif not r.preflight:
            lines.append(f"{r.key} ({r.system}): none found")
        else:
            found = "; ".join(f"{f.get('check', '?')}: {f.get('message', '')}" for f in r.preflight)
            lines.append(f"{r.key} ({r.system}): {len(r.preflight)} finding(s) — {found}")
    return [
        Heading(2, "Pre-flight findings"),
        Paragraph(
            "Conditions `tprimat doctor` checks before a run because they distort "
            "measurements (busy GPUs, power caps, NUMA balancing, debug switches, "
            "…), as recorded in each run's manifest."
        ),
        Bullets(lines),
    ]


def _framework_blocks(c: Comparison) -> list[Any]:
    """The shared framework settings that differ, what frameworks stated against their plans,
    and what could not be checked (docs/backends.md)."""
    blocks: list[Any] = []
    math = [row for row in c.shared_settings if row.kind == "math"]
    if c.shared_settings:
        blocks.append(Heading(2, "Framework settings that differ"))
        text = (
            "Settings of the shared vocabulary (docs/backends.md) that are not the same in every run. "
            "Speed settings compute the same step another way; "
        )
        if math:
            text += (
                "**math settings change what a step computes: these runs did not train the same "
                "step**, and are side by side only because `--allow-mismatch` was given."
            )
        else:
            text += "every setting that changes what a step computes is the same."
        blocks.append(Paragraph(text))
        blocks.append(
            Table(
                ["setting", "kind", *[r.key for r in c.runs]],
                [[row.name, row.kind, *[_value(v) for v in row.values]] for row in c.shared_settings],
            )
        )
    if c.disagreements:
        blocks.append(Heading(2, "Warning: frameworks ran other settings than planned"))
        blocks.append(
            Paragraph(
                "What the framework printed at start-up differs from what tprimat rendered; "
                "these runs are shown only because `--allow-mismatch` was given."
            )
        )
        blocks.append(
            Table(
                ["run", "setting", "planned", "as the framework ran it", "where"],
                [[d.run, d.setting, _value(d.planned), _value(d.stated), d.source or "–"] for d in c.disagreements],
            )
        )
    if c.unchecked_settings:
        blocks.append(
            Paragraph("Settings that change a step and could not be checked: " + "; ".join(c.unchecked_settings))
        )
    return blocks


def build_document(c: Comparison, plots: dict[str, Path], extra: Iterable[Block] = ()) -> list[Block]:
    """The report as blocks, section by section in reading order (``to_markdown``/``to_html`` render them).

    ``plots`` names the figures drawn (a section shows its figure only when it was drawn);
    ``extra`` (e.g. the trace section, or a note that figures were not drawn) follows the loss.
    """
    return [
        *_opening_blocks(c),
        *_summary_blocks(c),
        *_systems_blocks(c),
        *_compared_blocks(c),
        *_throughput_blocks(c, plots),
        *_tuning_blocks(c),
        *convergence_blocks(c, plots),
        *_step_time_blocks(c, plots),
        *_flops_blocks(c, plots),
        *_memory_blocks(c, plots),
        *_energy_blocks(c),
        *_cost_blocks(c),
        *_loss_blocks(c, plots),
        *extra,
        *_config_diff_blocks(c),
        *_framework_blocks(c),
        *_preflight_blocks(c),
        *_runs_blocks(c),
        *_skipped_blocks(c),
        *_method_blocks(c),
    ]


def _opening_blocks(c: Comparison) -> list[Block]:
    """The title, what the report was made from, and a warning when the runs are not one workload."""
    blocks: list[Block] = [Heading(1, "tprimat comparison report")]
    blocks.append(
        Paragraph(
            f"Generated {c.generated_at} by tprimat {c.tprimat_version} from {len(c.runs)} run(s) on "
            f"{len(c.systems)} system(s). Baseline for ratios: {c.baseline}. Every figure below "
            "is computed by tprimat from the per-iteration records in the result files listed under "
            "“Runs and provenance”."
        )
    )
    if c.tuning_only:
        blocks.append(Heading(2, "iso and tuned runs"))
        blocks.append(
            Paragraph(
                "These runs share the work (model, data, sequence length, global batch, precision) and "
                "differ only in methodology: iso runs the config as written, tuned applies each device's "
                "preset (every deviation is listed under “Tuned vs iso”). Ratios between a tuned and an "
                "iso system compare setups, not hardware alone."
            )
        )
    elif len(c.groups) > 1:
        blocks.append(Heading(2, "Warning: configurations differ"))
        blocks.append(
            Paragraph(
                "These runs do not share the fields a fair comparison needs; they are shown side by "
                "side only because `--allow-mismatch` was given. Runs are repeats of each other only "
                "within a group; ratios across groups compare different workloads."
            )
        )
        blocks.append(
            Table(
                ["field", *[f"group {g.id}" for g in c.groups]],
                [[name, *[_value(v) for v in values]] for name, values in c.mismatched],
            )
        )
    return blocks


def _summary_blocks(c: Comparison) -> list[Block]:
    """One line per system with a ratio to the baseline (nothing when there is none)."""
    lines = _summary_lines(c)
    if not lines:
        return []
    return [Heading(2, "Summary"), Bullets(lines)]


def _compared_blocks(c: Comparison) -> list[Block]:
    """The fields a fair comparison needs, per group, and those no run recorded."""
    blocks: list[Block] = [Heading(2, "What was compared")]
    blocks.append(Paragraph("Fields that must match for a fair comparison (and do within a group):"))
    blocks.append(_group_table(c))
    unknown = [
        f"group {g.id}: {name} is not recorded ({_value(g.fields.get(name))}), so it cannot be checked to match"
        for g in c.groups
        for name in FAIR_FIELDS
        if g.fields.get(name) in (None, "unknown")
    ]
    if unknown:
        blocks.append(Bullets(unknown))
    return blocks


def _throughput_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """Tokens/s/GPU per system with its interval and its ratio to the baseline."""
    blocks: list[Block] = [Heading(2, "Throughput")]
    blocks.append(
        Paragraph(
            "tokens/s/GPU = global batch × sequence length / step time / GPUs, per iteration; each "
            "run contributes its median over the measured iterations; a system's value is the "
            "median over its runs. The interval is the 95% bootstrap interval of that median, or, "
            "with too few runs for one (always with two), the range of the runs, and says which."
        )
    )
    blocks.append(
        Table(
            [
                "system",
                "runs",
                "tokens/s/GPU (median)",
                "min – max over runs",
                "interval over runs",
                f"ratio vs {c.baseline}",
                "ratio interval",
            ],
            [
                [
                    s.label,
                    ", ".join(s.run_keys),
                    format_median(s.tokens_per_s_per_gpu, ",.1f"),
                    _range(s.tokens_per_s_per_gpu, ",.1f"),
                    format_interval(s.tokens_per_s_per_gpu, ",.1f"),
                    "baseline" if s.ratio is None else f"{s.ratio.value:.3f}×",
                    format_ratio_interval(s.ratio),
                ]
                for s in c.systems
            ],
        )
    )
    if "throughput.png" in plots:
        blocks.append(Image("throughput.png", "Throughput per GPU by system"))
    return blocks


def _step_time_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """Step time per system: median, p95, CV and the spread of the runs' medians."""
    blocks: list[Block] = [Heading(2, "Step time")]
    blocks.append(
        Table(
            ["system", "median (s)", "p95 (s)", "CV", "min – max of medians over runs"],
            [
                [
                    s.label,
                    format_median(s.step_time_median_s, ".4f"),
                    format_median(s.step_time_p95_s, ".4f"),
                    format_median(s.step_time_cv, ".2%"),
                    _range(s.step_time_median_s, ".4f"),
                ]
                for s in c.systems
            ],
        )
    )
    blocks.append(
        Paragraph(
            "CV is the sample standard deviation of step time over its mean, "
            "within a run. Warm-up iterations are left out and shaded in the "
            "figure."
        )
    )
    if "step_time.png" in plots:
        blocks.append(Image("step_time.png", "Step time per iteration"))
    return blocks


def _flops_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """The FLOPs formula per model, TFLOP/s, MFU (and MAMF utilisation where measured) per system."""
    blocks: list[Block] = [Heading(2, "TFLOP/s and MFU")]
    for entry in c.flops:
        blocks.append(
            Paragraph(
                f"{entry['model']} at sequence length {entry['seq_length']}: "
                f"{entry['flops_per_token'] / 1e9:.3f} GFLOP per token, `{entry['formula']}`."
            )
        )
    mamf = any(s.mamf_utilisation is not None for s in c.systems)
    blocks.append(
        Table(
            [
                "system",
                "TFLOP/s/GPU (median)",
                "MFU",
                *(["MAMF utilisation", "measured ceiling (TFLOP/s)"] if mamf else []),
                "peak used (TFLOP/s)",
                "peak source",
            ],
            [
                [
                    s.label,
                    format_median(s.tflops_per_gpu, ".1f"),
                    format_median(s.mfu, ".1%"),
                    *(
                        [format_median(s.mamf_utilisation, ".1%"), ", ".join(f"{m:.4g}" for m in s.mamf_tflops) or DASH]
                        if mamf
                        else []
                    ),
                    ", ".join(f"{p:g}" for p in s.peak_tflops) or DASH,
                    "; ".join(s.peak_sources) or DASH,
                ]
                for s in c.systems
            ],
        )
    )
    if mamf:
        blocks.append(
            Paragraph(
                "MAMF utilisation = achieved model TFLOP/s per GPU ÷ the maximum achievable matmul "
                "TFLOP/s measured on the same device by `tprimat microbench` (recorded in the run "
                "manifest), for the run's precision; MFU divides by the datasheet peak instead."
            )
        )
    missing = _mfu_notes(c)
    if missing:
        blocks.append(Bullets(missing))
    if "mfu.png" in plots:
        blocks.append(Image("mfu.png", "Model FLOPs utilisation"))
    return blocks


def _memory_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """Measured memory per system (the fields any run recorded), then predicted beside measured."""
    blocks: list[Block] = [Heading(2, "Memory")]
    fields = [(f, label) for f, label in MEMORY_FIELDS if any(f in s.memory for s in c.systems)]
    if fields:
        blocks.append(
            Table(
                ["system", *[label for _, label in fields], "device capacity (GiB)"],
                [
                    [
                        s.label,
                        *[format_median(s.memory.get(f), ".2f") for f, _ in fields],
                        format_number(s.device_memory_gib, ".2f"),
                    ]
                    for s in c.systems
                ],
            )
        )
        blocks.append(
            Paragraph(
                "GiB = 2^30 bytes. Allocator figures count tensors PyTorch "
                "holds (allocated) or caches (reserved); the driver view counts "
                "everything on the device."
            )
        )
    else:
        blocks.append(Paragraph("No memory figures were recorded by these runs."))
    if "memory.png" in plots:
        blocks.append(Image("memory.png", "Memory per GPU"))
    blocks.extend(_predicted_memory(c))
    return blocks


def _energy_blocks(c: Comparison) -> list[Block]:
    """Energy per token per system, when any run measured it."""
    if not any(s.energy_per_token_j is not None for s in c.systems):
        return []
    return [
        Heading(2, "Energy"),
        Table(
            ["system", "energy per token (J)", "interval over runs"],
            [
                [s.label, format_median(s.energy_per_token_j, ".4g"), format_interval(s.energy_per_token_j, ".4g")]
                for s in c.systems
            ],
        ),
    ]


def _cost_blocks(c: Comparison) -> list[Block]:
    """Cost per 1T tokens and time to train per system, with the price table's source."""
    cost = c.cost_settings
    blocks: list[Block] = [Heading(2, "Cost and time to train")]
    blocks.append(
        Table(
            [
                "system",
                f"price ({cost.currency}/GPU-hour)",
                "GPU-hours per 1T tokens",
                f"cost per 1T tokens ({cost.currency})",
                "range from the throughput CI",
                f"time to train {_tokens(cost.train_tokens)} tokens",
            ],
            [
                [
                    s.label,
                    format_number(s.cost.price_per_gpu_hour, ",.2f"),
                    format_number(s.cost.gpu_hours_per_1t_tokens, ",.0f"),
                    format_number(s.cost.cost_per_1t_tokens, ",.0f"),
                    DASH
                    if s.cost.cost_per_1t_tokens_range is None
                    else f"{s.cost.cost_per_1t_tokens_range[0]:,.0f} {DASH} {s.cost.cost_per_1t_tokens_range[1]:,.0f}",
                    _duration(s.cost.time_to_train_s) + (f" on {s.cost.world_size} GPUs" if s.cost.world_size else ""),
                ]
                for s in c.systems
                if s.cost is not None
            ],
        )
    )
    blocks.append(
        Paragraph(
            f"Prices: {cost.prices_source} ({cost.prices_date}). Override them with "
            '`--set \'cost.gpu_hour_prices={ "MI300X" = 2.10, "H100-SXM" = 2.99 }\'` or a '
            "`[cost]` section in `--config`. Cost per 1T tokens = 10^12 / (tokens/s/GPU) / 3600 × "
            "price; time to train = tokens / (tokens/s/GPU × GPUs of the run)."
        )
    )
    no_price = [f"{s.label}: {s.cost.note}" for s in c.systems if s.cost and s.cost.note]
    if no_price:
        blocks.append(Bullets(no_price))
    return blocks


def _loss_blocks(c: Comparison, plots: dict[str, Path]) -> list[Block]:
    """The final loss per system and the loss curves."""
    blocks: list[Block] = [Heading(2, "Loss")]
    blocks.append(
        Table(
            ["system", "final loss (median over runs)", "min – max over runs"],
            [[s.label, format_median(s.final_loss, ".5g"), _range(s.final_loss, ".5g")] for s in c.systems],
        )
    )
    blocks.append(
        Paragraph(
            "Final loss is the last recorded loss of each run. Losses are "
            "comparable only when dataset, tokenizer and seed match."
        )
    )
    if "loss.png" in plots:
        blocks.append(Image("loss.png", "Training loss"))
    return blocks


def _config_diff_blocks(c: Comparison) -> list[Block]:
    """Recorded settings, hardware and software that are not the same in every run."""
    if not c.config_diff:
        return []
    return [
        Heading(2, "Configuration differences"),
        Paragraph(
            "Recorded settings, hardware and software that are not the "
            "same in every run (parallel layout and kernels may be tuned "
            "per platform; the fields that must match are above)."
        ),
        Table(
            ["setting", *[r.key for r in c.runs]],
            [[name, *[_value(v) for v in values]] for name, values in c.config_diff],
        ),
    ]


def _runs_blocks(c: Comparison) -> list[Block]:
    """One row per run, then each run's result file, parser, inputs and notes."""
    run_mamf = any(r.mamf_utilisation is not None for r in c.run_rows)
    blocks: list[Block] = [Heading(2, "Runs and provenance")]
    blocks.append(
        Table(
            [
                "run",
                "system",
                "group",
                "result file",
                "run id",
                "status",
                "iterations measured",
                "warm-up",
                "tokens/s/GPU",
                "step time median (s)",
                "TFLOP/s/GPU",
                "MFU",
                *(["MAMF utilisation"] if run_mamf else []),
            ],
            [
                [
                    r.key,
                    r.system,
                    r.group,
                    f"`{r.path}`",
                    r.run_id,
                    r.status,
                    f"{r.measured_range} ({r.measured_iterations})",
                    str(r.warmup_iterations),
                    format_number(r.tokens_per_s_per_gpu, ",.1f"),
                    format_number(r.step_time_median_s, ".4f"),
                    format_number(r.tflops_per_gpu, ".1f"),
                    format_number(r.mfu, ".1%"),
                    *([format_number(r.mamf_utilisation, ".1%")] if run_mamf else []),
                ]
                for r in c.run_rows
            ],
        )
    )
    for r in c.run_rows:
        blocks.append(Heading(3, f"{r.key}: {r.run_id}"))
        items = [f"result: `{r.path}`", f"parser: {r.parser or DASH}"]
        items += [f"input: `{i}`" for i in r.inputs]
        items += [f"note: {n}" for n in r.notes]
        blocks.append(Bullets(items))
    return blocks


def _skipped_blocks(c: Comparison) -> list[Block]:
    """The input files that were not valid results, with the reason."""
    if not c.skipped:
        return []
    return [
        Heading(2, "Skipped inputs"),
        Paragraph("These files were not used: they are not valid tprimat results."),
        Table(["file", "reason"], [[f"`{s.path}`", s.reason] for s in c.skipped]),
    ]


def _method_blocks(c: Comparison) -> list[Block]:
    """How the figures were computed (the comparison's method record)."""
    method = []
    for key, value in c.method.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        method.append(f"{key.replace('_', ' ')}: {shown}")
    return [Heading(2, "Method"), Bullets(method)]


# --- CSV --------------------------------------------------------------------------------------


def results_csv(c: Comparison) -> str:
    """One row per run, MAD-compatible (``model,performance,metric`` first)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    fingerprints = {g.id: g.fingerprint for g in c.groups}
    for run, row in zip(c.runs, c.run_rows, strict=True):
        r = run.result
        hw = r.hardware
        system = c.system(run.system)
        writer.writerow(
            {
                "model": r.config.model,
                "performance": "" if row.tokens_per_s_per_gpu is None else f"{row.tokens_per_s_per_gpu:.3f}",
                "metric": CSV_METRIC,
                "n_gpus": r.config.world_size or "",
                "nnodes": hw.nodes or "",
                "gpus_per_node": hw.device_count_per_node or "",
                "training_precision": r.config.precision or "",
                "machine_name": hw.hostname or "",
                "gpu_architecture": system.device,
                "status": "SUCCESS" if r.run.status == "completed" else r.run.status.upper(),
                "dataname": r.run.dataset,
                **_provenance_cells(r),
                "platform": r.run.platform or "",
                "device_name": hw.device_name or "",
                "backend": r.run.backend,
                "framework": r.run.framework or "",
                "seq_length": r.config.seq_length or "",
                "global_batch_size": r.config.global_batch_size or "",
                "step_time_median_s": _csv(row.step_time_median_s),
                "step_time_p95_s": _csv(row.step_time_p95_s),
                "step_time_cv": _csv(row.step_time_cv),
                "tflops_per_gpu": _csv(row.tflops_per_gpu),
                "mfu": _csv(row.mfu),
                "mamf_tflops": _csv(row.mamf_tflops),
                "mamf_utilisation": _csv(row.mamf_utilisation),
                "measured_iterations": row.measured_iterations,
                "warmup_iterations": row.warmup_iterations,
                "run_id": r.run.id,
                "result_file": run.path,
                "config_fingerprint": fingerprints[run.group],
                "group": run.group,
                "system": run.system,
            }
        )
    return buffer.getvalue()


def _provenance_cells(r: Any) -> dict[str, str]:
    """MAD's provenance columns and tprimat's framework commits, from the result ("" where unknown).

    ``tags`` is comma-separated ``key=value`` (madengine joins a list of tags with commas);
    ``git_commit`` is tprimat's commit; ``framework_commits`` is ``directory=commit`` pairs joined by ";".
    """
    sw = r.software
    return {
        "tags": ",".join(f"{key}={value}" for key, value in sorted(r.run.tags.items())),
        "docker_image": sw.container_image or "",
        "docker_sha": sw.container_digest or "",
        "base_docker": sw.container_base_image or "",
        "git_commit": sw.tprimat_commit or "",
        "deployment_type": r.run.deployment or "",
        "launcher": r.run.launcher or "",
        "framework_commits": ";".join(f"{path}={commit}" for path, commit in sorted(sw.framework_commits.items())),
        "energy_source": r.summary.energy_source or "",
    }


def _csv(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# --- writing ------------------------------------------------------------------------------------


class ReportWriteError(TprimatError):
    """A report file that could not be written (a full disk, a file-size limit, permissions)."""


def write_report(c: Comparison, out_dir: str | Path, formats: Iterable[str] = FORMATS) -> dict[str, Path]:
    """Write the requested formats (and the figures the md/html reports show) into ``out_dir``.

    All or nothing: the files are written into a hidden folder inside ``out_dir`` and
    moved into place once every one was written, so a full disk leaves the previous
    report (or none), never a partial one that looks complete.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    except OSError as exc:
        raise ReportWriteError(f"cannot write the report into {out}: {exc.strerror or exc}") from None
    try:
        staged = _write_files(c, staging, list(formats))
        for name in staged:
            os.replace(staging / name, out / name)
    except OSError as exc:
        name = Path(exc.filename).name if exc.filename else "the report"
        raise ReportWriteError(
            f"cannot write {out / name}: {exc.strerror or exc}; no report was written (free some space, "
            "raise the file-size limit or write elsewhere with -o)"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {name: out / name for name in staged}


def _put(out: Path, name: str, text: str) -> Path:
    """``atomic_write_text`` whose error names the file (a failed write() names none)."""
    try:
        return atomic_write_text(out / name, text)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), name) from None


def _write_files(c: Comparison, out: Path, formats: list[str]) -> dict[str, Path]:
    written: dict[str, Path] = {}
    plots: dict[str, Path] = {}
    extra: list[Block] = []
    if "md" in formats or "html" in formats:
        from tprimat.compare.plots import render_plots
        from tprimat.compare.traces import trace_section

        try:
            plots = render_plots(c, out)
        except ImportError:
            extra.append(Paragraph("Figures were not drawn: they need matplotlib (`pip install 'tprimat[plot]'`)."))
        written.update(plots)
        extra += trace_section(c, out)
        for block in extra:
            if isinstance(block, Image):
                written[block.file] = out / block.file
        blocks = build_document(c, plots, extra)
        if "md" in formats:
            written["report.md"] = _put(out, "report.md", to_markdown(blocks))
        if "html" in formats:
            written["report.html"] = _put(
                out, "report.html", to_html(blocks, title="tprimat comparison report", base_dir=out)
            )
    if "csv" in formats:
        written["results.csv"] = _put(out, "results.csv", results_csv(c))
    if "json" in formats:
        data = comparison_to_dict(c)
        data["convergence"] = convergence_to_dict(c)
        data["files"] = sorted(written)
        written["report.json"] = _put(out, "report.json", json.dumps(data, indent=2, allow_nan=False) + "\n")
    return written


def _terminal_ratio(s: SystemSummary) -> str:
    if s.ratio is None:
        return "baseline"
    text = f"{s.ratio.value:.3f}×"
    return text if s.same_config_as_baseline else text + " (configurations differ)"


def systems_for_terminal(c: Comparison) -> list[list[str]]:
    rows = []
    for s in c.systems:
        rows.append(
            [
                s.label,
                ", ".join(s.run_keys),
                format_median(s.tokens_per_s_per_gpu, ",.1f"),
                format_interval(s.tokens_per_s_per_gpu, ",.1f"),
                _terminal_ratio(s),
                format_median(s.mfu, ".1%"),
                format_median(s.mamf_utilisation, ".1%"),
            ]
        )
    return rows


__all__ = [
    "FORMATS",
    "ReportWriteError",
    "SystemSummary",
    "build_document",
    "parse_formats",
    "results_csv",
    "systems_for_terminal",
    "write_report",
]


def _predicted_memory(c: Comparison) -> list[Any]:
    """Predicted beside measured memory per system (the estimator of docs/memory.md)."""
    if not any(s.predicted_memory for s in c.systems):
        return []
    fields = [(f, label) for f, label in PREDICTED_MEMORY_FIELDS if any(f in s.predicted_memory for s in c.systems)]
    rows = []
    for s in c.systems:
        predicted, measured = (
            s.predicted_memory.get("predicted_allocated_gib"),
            s.predicted_memory.get("measured_peak_allocated_gib"),
        )
        ratio = f"{measured.median / predicted.median:.2f}" if predicted and measured and predicted.median else ""
        rows.append(
            [
                s.label,
                *[format_median(s.predicted_memory.get(f), ".2f") for f, _ in fields],
                ratio,
                ", ".join(s.memory_peak_ranks),
            ]
        )
    return [
        Heading(3, "Predicted and measured memory"),
        Table(["system", *[label for _, label in fields], "measured ÷ predicted", "rank that peaked"], rows),
        Paragraph(
            "The prediction is `tprimat memory estimate` for each run's own config (formulas in "
            "docs/memory.md); the measured peak is the largest any rank reported."
        ),
    ]
