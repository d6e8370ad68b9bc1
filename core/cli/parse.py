"""``tprimat parse``: turn training logs into a result, on any machine, without torch."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from tprimat.cli.jobs import jobs_option
from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, make_console, registry_from


def _shortcut_overrides(
    model: str | None,
    seq_length: int | None,
    global_batch_size: int | None,
    precision: str | None,
    warmup: int | None,
) -> list[str]:
    """The shortcut options (``--model``, ``--seq-length`` ...) as ``--set`` overrides, those given only."""
    pairs = [
        ("benchmark.model", model),
        ("training.seq_length", seq_length),
        ("training.global_batch_size", global_batch_size),
        ("precision.dtype", precision),
        ("benchmark.warmup_iterations", warmup),
    ]
    return [f"{key}={json.dumps(value)}" for key, value in pairs if value is not None]


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--backend", help="Log format (a backend name); detected when left out.")
@config_options(config_note="Give the one the run used: the log is checked against it.")
@click.option("--model", help="Model name (see `tprimat models`); needed for TFLOP/s and MFU.")
@click.option("--seq-length", type=click.IntRange(min=1), help="Sequence length of the run.")
@click.option(
    "--global-batch-size", type=click.IntRange(min=1), help="Global batch size of the run (checked against the log)."
)
@click.option("--world-size", type=click.IntRange(min=1), help="Number of GPUs of the run.")
@click.option("--precision", help="Training precision, e.g. bf16 or fp8.")
@click.option(
    "--warmup-iterations",
    type=click.IntRange(min=0),
    help="Iterations left out of the statistics (default: the config's).",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(dir_okay=False, exists=True),
    help="Run manifest with hardware and software (default: manifest.json near the log).",
)
@click.option(
    "--hardware",
    "hardware_file",
    type=click.Path(dir_okay=False, exists=True),
    help="Saved nvidia-smi, rocm-smi or amd-smi output of the machine that ran the log: the device (for MFU), "
    "recorded as read from this file.",
)
@click.option(
    "--allow-mismatch", is_flag=True, help="Keep the declared workload when the log disagrees (recorded in the result)."
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@jobs_option("the logs")
@click.pass_context
def parse(
    ctx: click.Context,
    paths: tuple[str, ...],
    backend: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    model: str | None,
    seq_length: int | None,
    global_batch_size: int | None,
    world_size: int | None,
    precision: str | None,
    warmup_iterations: int | None,
    manifest_path: str | None,
    hardware_file: str | None,
    allow_mismatch: bool,
    output: str | None,
    as_json: bool,
    jobs: int | None,
) -> None:
    """Parse Primus, Megatron-LM, Megatron-Bridge or NeMo logs into a result.

    MLPerf Training result files (`:::MLLOG` lines, e.g. a submission's
    `results/<system>/<benchmark>/` folder) give time to train per run and
    MLPerf's olympic score per system instead, also scaled by the folder's
    scaling.json as MLPerf publishes it.

    PATHS are log files or directories (a Primus experiment's per-rank
    `logs/pre_trainer/rank-N/` tree is recognised).  Throughput is computed
    from the step times and the workload: given by --config/--set (the full
    benchmark config, checked against the log), or else by --model,
    --seq-length, --global-batch-size, --world-size and --precision, each
    falling back to what the log itself states.

    The device (for MFU) comes from the run's manifest (--manifest, or
    manifest.json near the log), or from a saved `nvidia-smi`/`rocm-smi`
    output of the machine that ran it (--hardware); never from this machine.
    """
    from tprimat.errors import TprimatError
    from tprimat.mlperf.reader import mllog_files
    from tprimat.parse.logs import Workload, cycle_collection_paused, parse_logs
    from tprimat.result.resultjson import write_result
    from tprimat.result.schema import result_to_dict
    from tprimat.settings.config import load_config

    if backend is None and mllog_files(paths):  # MLPerf result files: time to train, olympic score
        _parse_mlperf(paths, output, as_json)
        return

    _check_model(model)
    saved_hardware = None
    if hardware_file is not None:
        from tprimat.parse.saved_hardware import read_saved_hardware

        saved_hardware = read_saved_hardware(hardware_file)
    config, label = None, "the command line"
    if config_file or overrides:
        if world_size is not None:
            raise TprimatError(
                "--world-size cannot be combined with --config/--set: the "
                "config's world size is launch.nnodes × launch.nproc_per_node"
            )
        extra = _shortcut_overrides(model, seq_length, global_batch_size, precision, warmup_iterations)
        config = load_config(config_file, [*overrides, *extra])
        label = f"config {config_file}" if config_file else "the default config with --set"
        if overrides or extra:
            label += " (with overrides)" if config_file else ""
    workload = Workload(
        model=model,
        seq_length=seq_length,
        global_batch_size=global_batch_size,
        world_size=world_size,
        precision=precision,
        warmup_iterations=warmup_iterations,
    )
    with cycle_collection_paused():  # until the result is written and shown (see there)
        outcome = parse_logs(
            list(paths),
            registry=registry_from(ctx),
            backend=backend,
            config=config,
            config_label=label,
            workload=workload,
            manifest_path=manifest_path,
            allow_mismatch=allow_mismatch,
            workers=jobs,
            saved_hardware=saved_hardware,
            written=bool(output),
        )
        result = outcome.result
        if outcome.detected:
            click.echo(f"detected {outcome.backend}: {outcome.detected}", err=True)
        _echo_warnings(outcome.warnings)
        if output:
            write_result(result, output)
        if as_json:
            echo_json(result_to_dict(result))
            return
        _print_summary(result, outcome)
    if output:
        click.echo(f"wrote {output}")


def _check_model(model: str | None) -> None:
    from tprimat.errors import TprimatError
    from tprimat.settings.models import UnknownModelError, get_model

    if model is None:
        return
    try:
        get_model(model)
    except UnknownModelError as exc:
        raise TprimatError(f"--model: {exc} (leave --model out to parse without FLOPs)") from None


def _parse_mlperf(paths: tuple[str, ...], output: str | None, as_json: bool) -> None:
    from tprimat.atomic import atomic_write_text
    from tprimat.mlperf.summary import print_summary, summarize_paths, summary_to_dict

    systems = summarize_paths(paths)
    data = summary_to_dict(systems)
    if output:
        atomic_write_text(output, json.dumps(data, indent=2) + "\n")
    if as_json:
        echo_json(data)
        return
    print_summary(systems, make_console())
    if output:
        click.echo(f"wrote {output}")


#: Framework-reported figures shown (secondary) next to tprimat's own numbers.
_THROUGHPUT_WORDS = ("tflops", "tokens", "step_time", "elapsed")


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def _stats_row(name: str, stats: Any, scale: float = 1.0) -> list[str]:
    if stats is None:
        return [name, "-", "", "", "", ""]
    return [
        name,
        _fmt(stats.median * scale),
        _fmt(stats.mean * scale),
        f"{_fmt(stats.p5 * scale)} – {_fmt(stats.p95 * scale)}",
        _fmt(stats.cv * 100, 3) + " %" if stats.cv is not None else "-",
        str(stats.count),
    ]


def _echo_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _print_summary(result: Any, outcome: Any) -> None:
    from rich.table import Table

    console = make_console()
    s, c, run = result.summary, result.config, result.run
    records = result.iterations
    console.print(
        f"[bold]{run.backend}[/bold] ({run.framework})  status: {run.status}  "
        f"model: {c.model}  seq {_fmt(c.seq_length)}  global batch {_fmt(c.global_batch_size)}  "
        f"world size {_fmt(c.world_size)}  precision {_fmt(c.precision)}"
    )
    console.print(
        f"iterations {records[0].iteration}–{records[-1].iteration} ({len(records)} records), "
        f"{s.measured_iterations} measured after {s.warmup_iterations} warm-up; "
        f"hardware: {result.hardware.device_name or 'unknown (no manifest)'}"
    )
    table = Table(title="Summary (computed by tprimat from per-iteration step times)", title_justify="left")
    for column in ("metric", "median", "mean", "p5 – p95", "CV", "n"):
        table.add_column(column)
    table.add_row(*_stats_row("step time (s)", s.step_time_s))
    table.add_row(*_stats_row("tokens/s/GPU", s.tokens_per_s_per_gpu))
    table.add_row(*_stats_row("tokens/s (job)", s.tokens_per_s))
    if s.tflops_per_gpu is not None:
        table.add_row("TFLOP/s/GPU (model)", _fmt(s.tflops_per_gpu), "", "", "", "")
    if s.mfu is not None:
        table.add_row("MFU", f"{s.mfu * 100:.1f} %", "", s.peak_source or "", "", "")
    if s.mamf_utilisation is not None:
        table.add_row(
            "MAMF utilisation",
            f"{s.mamf_utilisation * 100:.1f} %",
            "",
            f"of {_fmt(s.mamf_tflops)} TFLOP/s measured ({s.mamf_source})",
            "",
            "",
        )
    for key, stats in sorted(s.reported.items()):
        if not any(word in key for word in _THROUGHPUT_WORDS):
            continue  # memory and counters stay in the result file
        table.add_row(*_stats_row(f"reported: {key}", stats))
    console.print(table)
    if s.tokens_per_s_per_gpu is None:
        missing = [
            option
            for option, value in (
                ("--global-batch-size", c.global_batch_size),
                ("--seq-length", c.seq_length),
                ("--world-size", c.world_size),
            )
            if value is None
        ]
        if missing:
            console.print(
                f"no tokens/s: the log does not state it; give {', '.join(missing)}", markup=False, highlight=False
            )
    memory = [
        ("max allocated", s.mem_max_allocated_gib),
        ("max reserved", s.mem_max_reserved_gib),
        ("device used", s.mem_device_used_gib),
    ]
    shown = ", ".join(f"{name} {v:.2f} GiB" for name, v in memory if v is not None)
    if shown:
        console.print(f"memory peaks: {shown}")
    console.print(f"final loss: {_fmt(s.final_loss, 6)}")
    collector = outcome.collector
    if collector.issue_count:
        console.print(f"{collector.issue_count} log lines skipped (see provenance notes)")
    for note in result.provenance.notes:
        console.print(f"  note  {note}", markup=False, highlight=False)
