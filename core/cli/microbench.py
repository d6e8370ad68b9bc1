"""``tprimat microbench``: GEMM and attention microbenchmarks on every GPU of this node."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, print_table, registry_from
from tprimat.microbench.defaults import CPU_DEFAULTS as CPU
from tprimat.microbench.defaults import GPU_DEFAULTS as GPU

if TYPE_CHECKING:
    from tprimat.microbench.runner import What


def _fmt(value: float | None) -> str:
    """TFLOP/s with one decimal, or three significant digits below 10 (CPU-sized figures)."""
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def gemm_table_rows(document: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The model's GEMMs, one row per shape, operators side by side (slowest GPU's TFLOP/s)."""
    from tprimat.microbench.store import GEMM_CASE_FIELDS, case_spread

    spread = case_spread(document.get("gemm") or [], GEMM_CASE_FIELDS)
    cells: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    order: list[tuple[Any, ...]] = []
    for entry in spread:
        if entry["group"] != "model":
            continue
        key = (entry["name"], entry["pass"], entry["m"], entry["n"], entry["k"])
        if key not in cells:
            cells[key] = {}
            order.append(key)
        cells[key][f"{entry['op']} {entry['dtype']}"] = entry
    columns_ops = sorted(
        {op for c in cells.values() for op in c},
        key=lambda o: (o.split()[1], ["matmul", "linear", "linear+bias", "scaled_mm"].index(o.split()[0])),
    )
    multi = (document.get("device_count") or 1) > 1
    columns = ["layer", "pass", "m x n x k", "GFLOP"] + columns_ops
    if multi:
        columns.append("GPU spread")
    rows = []
    for key in order:
        name, pass_, m, n, k = key
        row = [name, pass_, f"{m} x {n} x {k}", f"{2 * m * n * k / 1e9:.1f}"]
        row += [_fmt(cells[key][op]["tflops_min"]) if op in cells[key] else "" for op in columns_ops]
        if multi:
            row.append(_pct(max((e["spread"] or 0) for e in cells[key].values())))
        rows.append(row)
    return columns, rows


def render(document: dict[str, Any], path: Path | None) -> None:
    """Tables for people: model GEMMs, per-GPU MAMF, attention, then the summary lines."""
    summary = document["summary"]
    config = document["config"]
    count = document.get("device_count") or 1
    where = f"{document.get('device_name')} x{count}"
    if document.get("gemm"):
        columns, rows = gemm_table_rows(document)
        print_table(
            f"{config['model']} GEMMs (TP {config['tensor_parallel']}, {config['tokens']} tokens) "
            f"on {where}: TFLOP/s at median time, slowest device",
            columns,
            rows,
        )
        dtypes = sorted(summary["mamf_per_device"])
        mamf_rows = []
        for index in range(count):
            best = [next((b for b in summary["mamf_best"][d] if b["device_index"] == index), None) for d in dtypes]
            mamf_rows.append(
                [str(index), document["devices"][index]["name"]]
                + ["-" if b is None else f"{_fmt(b['tflops'])} ({b['op']} {b['m']}x{b['n']}x{b['k']})" for b in best]
            )
        print_table(
            "Maximum achievable matmul TFLOP/s per GPU (best shape)",
            ["GPU", "device"] + [f"MAMF {d}" for d in dtypes],
            mamf_rows,
        )
    if document.get("attention"):
        rows = []
        for key, entry in summary["attention"].items():
            impl, variant, _ = key.split(" ")
            rows.append(
                [
                    variant,
                    impl,
                    entry["backend"],
                    entry["dtype"],
                    str(entry["window"] or ""),
                    _fmt(entry["fwd_tflops"]),
                    _fmt(entry["bwd_tflops"]),
                    _fmt(entry["fwd_bwd_tflops"]),
                    _pct(entry["efficiency"]),
                ]
                + ([_pct(entry["spread"])] if count > 1 else [])
            )
        print_table(
            f"Attention (b={config['micro_batch_size']}, s={config['seq_length']}) on {where}: "
            "TFLOP/s at median time, slowest device",
            ["variant", "impl", "backend", "dtype", "window", "fwd", "bwd", "fwd+bwd", "of MAMF"]
            + (["GPU spread"] if count > 1 else []),
            rows,
        )
    for dtype, value in summary["mamf_tflops"].items():
        peak = summary["peak_tflops"].get(dtype)
        line = f"MAMF {dtype}: {_fmt(value)} TFLOP/s (slowest of {count} device(s))"
        if peak:
            line += (
                f", {_pct(summary['mamf_fraction_of_peak'][dtype])} of the datasheet peak "
                f"{peak:.1f} ({summary['peak_source'][dtype]})"
            )
        else:
            line += f"; {summary['peak_source'].get(dtype)}"
        if count > 1:
            line += f"; spread across GPUs {_pct(summary['mamf_spread'][dtype])}"
        click.echo(line)
        model_gemm = summary["model_gemm"].get(dtype)
        if model_gemm:
            click.echo(
                f"  model GEMMs {dtype}: {_fmt(model_gemm['tflops'])} TFLOP/s, {_pct(model_gemm['efficiency'])} of MAMF"
            )
        for op, ratio in (summary["linear_vs_matmul"].get(dtype) or {}).items():
            click.echo(
                f"  F.{op.replace('+bias', ' with bias')} vs torch.matmul {dtype}: median "
                f"{ratio['median_ratio']:.3f}x, worst {ratio['worst_ratio']:.3f}x "
                f"({ratio['worst_name']} {'x'.join(map(str, ratio['worst_shape']))})"
            )
    for what, reason in summary["unavailable"].items():
        click.echo(f"unavailable: {what}: {reason}")
    for note in summary["notes"]:
        click.echo(f"note: {note}")
    if path is not None:
        click.echo(f"saved: {path}")


@click.command()
@click.argument("what", type=click.Choice(["gemm", "attention", "all"]), default="all")
@click.option("--model", help="Registered model (default: the benchmark config's).")
@click.option(
    "--dtype",
    "dtypes",
    default=None,
    help=f"Comma-separated dtypes: bf16, fp16, fp32, fp8 (default: {GPU.dtypes} on GPUs, {CPU.dtypes} on a CPU).",
)
@click.option(
    "--tp",
    type=click.IntRange(min=1),
    default=None,
    help="Tensor-parallel size the shapes are split by (default: the config's).",
)
@click.option("--seq-length", type=click.IntRange(min=1), default=None, help="Sequence length (default: the config's).")
@click.option(
    "--micro-batch-size", type=click.IntRange(min=1), default=None, help="Micro-batch size (default: the config's)."
)
@config_options(config_note="Its model and layout give the defaults.")
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=None,
    help=f"Untimed iterations per case (default: {GPU.warmup} on GPUs, {CPU.warmup} on a CPU).",
)
@click.option(
    "--iterations",
    type=click.IntRange(min=1),
    default=None,
    help=f"Timed iterations per case (default: {GPU.iterations} on GPUs, {CPU.iterations} on a CPU).",
)
@click.option(
    "--sweep-step",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Step of the sweep around each forward shape's n and k.",
)
@click.option(
    "--sweep-radius",
    type=click.IntRange(min=0),
    default=None,
    help=(
        "Steps each side of n and k in the sweep, 0: no sweep "
        f"(default: {GPU.sweep_radius} on GPUs, {CPU.sweep_radius} on a CPU)."
    ),
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Sliding-window size (keys per query, itself included).",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cuda", "cpu"]),
    default="auto",
    show_default=True,
    help="auto: every GPU of the node, else the CPU.",
)
@click.option(
    "--flush-mib",
    type=click.FloatRange(min=0),
    default=None,
    help="Cache-flush buffer size (default: twice the cache, at least 512 MiB on a GPU).",
)
@click.option("--no-flash-attn", is_flag=True, help="Do not run flash-attn even if installed.")
@click.option(
    "-o",
    "--output",
    "--output-dir",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to save the result (default: $TPRIMAT_MICROBENCH_DIR or ~/.cache/tprimat/microbench).",
)
@click.option("--no-save", is_flag=True, help="Do not save the result.")
@click.option("--quiet", is_flag=True, help="No progress lines (bar, count, time left) on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the result document as JSON.")
@click.pass_context
def microbench(
    ctx: click.Context,
    what: What,
    model: str | None,
    dtypes: str | None,
    tp: int | None,
    seq_length: int | None,
    micro_batch_size: int | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    warmup: int | None,
    iterations: int | None,
    sweep_step: int,
    sweep_radius: int | None,
    window: int,
    device: str,
    flush_mib: float | None,
    no_flash_attn: bool,
    output_dir: Path | None,
    no_save: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Time the model's GEMMs and attention; find the maximum achievable matmul FLOP/s.

    WHAT is gemm, attention or all.  Every GPU of the node is measured
    separately; the result is saved so that later runs on this device report
    MFU against the measured ceiling too.  Without a GPU the defaults are the
    CPU preset's workload (tiny model, sequence 256), fp32, 1+5 iterations
    per case and no sweep; options given explicitly always win.
    """
    from tprimat.microbench.defaults import defaults_for, device_kind
    from tprimat.microbench.runner import run_microbench
    from tprimat.microbench.store import save
    from tprimat.settings.config import default_config_dict, load_config
    from tprimat.settings.models import UnknownModelError, get_model

    kind = device_kind(device, registry_from(ctx).detect_platform())
    chosen = defaults_for(kind)
    cfg = load_config(config_file, overrides, base=default_config_dict(cpu=True) if kind == "cpu" else None)
    dtypes = dtypes or chosen.dtypes
    warmup = chosen.warmup if warmup is None else warmup
    iterations = chosen.iterations if iterations is None else iterations
    sweep_radius = chosen.sweep_radius if sweep_radius is None else sweep_radius
    if kind == "cpu" and not quiet:
        click.echo(
            f"no GPU: CPU defaults (the CPU preset's workload, {chosen.describe()}); options "
            "given on the command line win",
            err=True,
        )
    try:
        spec = get_model(model or cfg.benchmark.model)
    except UnknownModelError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    progress = None if quiet else (lambda line: click.echo(line, err=True))
    document = run_microbench(
        what=what,
        model=spec,
        dtypes=dtypes,
        tensor_parallel=tp if tp is not None else cfg.parallel.tensor,
        seq_length=seq_length or cfg.training.seq_length,
        micro_batch_size=micro_batch_size or cfg.training.micro_batch_size,
        warmup=warmup,
        iterations=iterations,
        sweep_step=sweep_step,
        sweep_radius=sweep_radius,
        window=window,
        device="cpu" if kind == "cpu" else device,
        flush_bytes=None if flush_mib is None else int(flush_mib * 2**20),
        use_flash_attn=not no_flash_attn,
        progress=progress,
    )
    path = None if no_save else save(document, output_dir)
    if as_json:
        if path is not None:
            click.echo(f"saved: {path}", err=True)
        echo_json(document)
        return
    render(document, path)
