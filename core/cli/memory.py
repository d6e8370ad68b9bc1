"""``tprimat memory``: predict a configuration's per-GPU memory before running it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, print_table, registry_from

if TYPE_CHECKING:
    from tprimat.memory.estimate import MemoryEstimate
    from tprimat.settings.trainers import Trainer


@click.group()
def memory() -> None:
    """Training memory: what a configuration needs per GPU, and whether it fits."""


@memory.command("estimate")
@click.option("--model", help="Registered model (default: the config's benchmark.model).")
@config_options()
@click.option(
    "--device",
    help="Device whose capacity to check against, matched exactly, e.g. MI300X, H100, GH200-96GB "
    "(a name that does not say the memory, such as GH200, is refused).",
)
@click.option(
    "--capacity-gib",
    type=click.FloatRange(min=0, min_open=True),
    help="Capacity per GPU in GiB (instead of, or overriding, --device).",
)
@click.option(
    "--backend",
    help="Backend whose memory layout to assume, as it declares it: a PyTorch DDP/FSDP2 "
    "trainer (torch) or Megatron-core (Primus, Megatron-LM, NeMo; the default).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def estimate(
    ctx: click.Context,
    model: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    device: str | None,
    capacity_gib: float | None,
    backend: str | None,
    as_json: bool,
) -> None:
    """Per-GPU memory of training MODEL under the config, term by term, with the formula of each."""
    from tprimat.memory import estimate_memory
    from tprimat.settings.config import load_config
    from tprimat.settings.models import UnknownModelError, get_model

    cfg = load_config(config_file, overrides)
    trainer: Trainer = "megatron-core"
    if backend is not None:
        registry = registry_from(ctx)
        known = registry.backends()
        if backend not in known:
            raise click.BadParameter(
                f"unknown backend {backend!r}; known: {', '.join(sorted(known))}", param_hint="--backend"
            )
        trainer = registry.backend(backend).spec.trainer
    try:
        spec = get_model(model or cfg.benchmark.model)
    except UnknownModelError as exc:
        raise click.BadParameter(str(exc), param_hint="--model") from None
    result = estimate_memory(cfg, spec, capacity_gib=capacity_gib, device=device, trainer=trainer)
    if as_json:
        from tprimat.memory.verdict import error_band_gib, fit_verdict

        found = fit_verdict(result)
        extra = {"verdict": found.value if found else None, "error_band_gib": error_band_gib(result)}
        echo_json({**result.to_dict(), **extra})
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


def verdict(result: MemoryEstimate) -> str:
    """One line: the verdict (fits, within the estimator's error, does not fit), by how much, against what."""
    from tprimat.memory.verdict import Verdict, describe_fit, fit_verdict

    line = describe_fit(result)
    if line is None:
        return "capacity unknown: give --device NAME or --capacity-gib X to check whether it fits"
    remedies = "; or ".join(result.remedies)
    verdict_now = fit_verdict(result)
    if verdict_now is Verdict.DOES_NOT_FIT:
        return f"{line}; try {remedies}"
    if verdict_now is Verdict.WITHIN_ERROR:
        return f"{line}; if it runs out of memory, try {remedies}"
    return line


@memory.command("summarize")
@click.argument("snapshot", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--top", type=click.IntRange(min=1), default=8, show_default=True, help="How many allocation sites to list."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def summarize(snapshot: str, top: int, as_json: bool) -> None:
    """Peak of an allocator SNAPSHOT and what was live at it, by category (parameters, gradients, ...)."""
    import attrs

    from tprimat.memory.snapshot import summarize_snapshot

    summary = summarize_snapshot(snapshot, top=top)
    if as_json:
        echo_json(attrs.asdict(summary))
        return
    for device in summary.devices:
        peak = device.peak_bytes or 1
        where = (
            "before the first recorded event"
            if device.peak_event is None
            else (
                f"at event {device.peak_event + 1} of {device.events}"
                + (f", {device.peak_offset_s:.3f} s into the history" if device.peak_offset_s is not None else "")
            )
        )
        print_table(
            f"device {device.device}: peak allocated {_size(device.peak_bytes)} ({where})",
            ["live at the peak", "size", "share", "allocations"],
            [[u.category, _size(u.bytes), f"{u.bytes / peak:.1%}", u.allocations] for u in device.at_peak],
        )
        print_table(
            f"device {device.device}: largest allocation sites live at the peak",
            ["site", "size", "allocations"],
            [[s.where, _size(s.bytes), s.allocations] for s in device.sites],
        )
        click.echo(
            f"when the snapshot was taken: allocated {_size(device.end_allocated_bytes)}, "
            f"reserved {_size(device.end_reserved_bytes)}"
        )
        if device.no_stack_bytes:
            click.echo(
                f"note: {_size(device.no_stack_bytes)} live at the peak has no recorded stack (allocated "
                "before the history was recorded) and is counted as other"
            )
        if device.marker_mismatches or device.replayed_end_bytes != device.end_allocated_bytes:
            click.echo(
                "note: the recorded history is incomplete (it does not reproduce the allocator's own "
                "totals); record with a larger max_entries"
            )
    click.echo(f"open it in PyTorch's memory viewer: {summary.viewer} (drag and drop {snapshot})")


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.2f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.2f} MiB"
