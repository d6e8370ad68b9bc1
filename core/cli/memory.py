"""``tprimat memory``: predict a configuration's per-GPU memory before running it."""

from __future__ import annotations

import click

from tprimat.cli.output import echo_json, print_table


@click.group()
def memory() -> None:
    """Training memory: what a configuration needs per GPU, and whether it fits."""


@memory.command("estimate")
@click.option("--model", help="Registered model (default: the config's benchmark.model).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    help="A benchmark config file layered over the defaults.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Override one value (repeatable), e.g. --set training.recompute=full.",
)
@click.option("--device", help="Device whose capacity to check against, e.g. MI300X, H100.")
@click.option(
    "--capacity-gib",
    type=click.FloatRange(min=0, min_open=True),
    help="Capacity per GPU in GiB (instead of, or overriding, --device).",
)
@click.option(
    "--backend",
    help="Backend whose memory layout to assume: torch, or a Megatron-core "
    "backend (amd_primus, amd_megatron, nvd_megatron, nvd_nemo; the default).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def estimate(
    model: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    device: str | None,
    capacity_gib: float | None,
    backend: str | None,
    as_json: bool,
) -> None:
    """Per-GPU memory of training MODEL under the config, term by term, with the formula of each."""
    from tprimat.config import load_config
    from tprimat.memory import estimate_memory
    from tprimat.models import UnknownModelError, get_model

    cfg = load_config(config_file, overrides)
    try:
        spec = get_model(model or cfg.benchmark.model)
    except UnknownModelError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    result = estimate_memory(cfg, spec, capacity_gib=capacity_gib, device=device, backend=backend)
    if as_json:
        echo_json(result.to_dict())
        return
    p, t = cfg.parallel, cfg.training
    title = (
        f"Memory per GPU: {spec.name}, micro-batch {t.micro_batch_size} × sequence {t.seq_length}, "
        f"TP {p.tensor} PP {p.pipeline} CP {p.context} DP {cfg.data_parallel}, {cfg.precision.dtype}, "
        f"recompute {t.recompute}"
    )
    from rich.markup import escape  # formulas hold [brackets] that rich would read as markup

    rows = [[name.replace("_", " "), f"{gib:.2f}", escape(formula)] for name, gib, formula in result.terms()]
    rows.append(
        ["total", f"{result.total_gib:.2f}", f"peak allocated {result.allocated_gib:.2f} GiB + slack and runtime"]
    )
    print_table(title, ["term", "GiB", "formula"], rows)
    click.echo(f"layout: {result.layout}")
    for note in result.notes:
        click.echo(f"note: {note}")
    click.echo(verdict(result))


def verdict(result) -> str:
    """One line: fits or not, by how much, against which capacity."""
    if result.capacity_gib is None:
        return "capacity unknown: give --device NAME or --capacity-gib X to check whether it fits"
    where = f"{result.device} ({result.capacity_gib:.2f} GiB)" if result.device else f"{result.capacity_gib:.2f} GiB"
    if result.fits:
        return f"fits on {where}: {result.margin_gib:.2f} GiB to spare"
    return (
        f"does NOT fit on {where}: {-result.margin_gib:.2f} GiB short; try training.recompute=full, "
        "a smaller micro-batch, or more tensor/pipeline parallelism"
    )
