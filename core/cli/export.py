"""``tprimat export``: write results to experiment trackers; ``--report-to`` for ``run`` and ``suite run``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from tprimat.cli.output import echo_json, registry_from

if TYPE_CHECKING:
    from tprimat.export.deliver import Destination

F = TypeVar("F", bound=Callable[..., object])


def report_to_option(function: F) -> F:
    """``--report-to TRACKER[=URI]`` (repeatable): export each result as soon as it is written."""
    return click.option(
        "--report-to",
        "report_to",
        multiple=True,
        metavar="TRACKER[=URI]",
        help="Export each finished result to an experiment tracker (mlflow, wandb, tensorboard or a plugin's), "
        "optionally at URI; repeatable.  A failed export is reported and leaves the result as it is "
        "(docs/export.md).",
    )(function)


def report_destinations(ctx: click.Context, report_to: tuple[str, ...]) -> list[Destination]:
    """The trackers ``--report-to`` names, checked (known, installed) before anything runs."""
    if not report_to:
        return []
    from tprimat.export.deliver import parse_report_to

    return parse_report_to(registry_from(ctx), report_to)


def report_result(result_path: Path | None, destinations: list[Destination]) -> None:
    """Export the result just written to each destination; failures are warnings on stderr."""
    if not destinations:
        return
    from tprimat.export.deliver import report_after_run

    report_after_run(result_path, destinations, lambda line: click.echo(line, err=True))


@click.command()
@click.argument("paths", metavar="RESULTS...", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--to",
    "trackers",
    multiple=True,
    required=True,
    metavar="TRACKER",
    help="Tracker to write to: mlflow, wandb, tensorboard, or one a plugin adds (repeatable).",
)
@click.option(
    "--uri",
    help="Where: an MLflow tracking URI (default $MLFLOW_TRACKING_URI, else sqlite:///mlruns.db here), "
    "the W&B run-files directory (default $WANDB_DIR, else here) or the TensorBoard log directory "
    "(default ./tensorboard).",
)
@click.option(
    "--experiment",
    help="MLflow experiment, W&B project or TensorBoard folder the runs are filed under "
    "(default $MLFLOW_EXPERIMENT_NAME / $WANDB_PROJECT, else tprimat).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was exported as JSON.")
@click.pass_context
def export(
    ctx: click.Context,
    paths: tuple[Path, ...],
    trackers: tuple[str, ...],
    uri: str | None,
    experiment: str | None,
    as_json: bool,
) -> None:
    """Write results (files, run or suite directories) to experiment trackers.

    RESULTS are read as `tprimat compare` reads them.  Each run's flattened
    config, its facts (hardware, versions, provenance, the manifest's command
    and environment), its per-iteration series (step time, tokens/s/GPU, loss,
    memory..., by iteration number) and its summary (median, mean, p5/p95, CV,
    TFLOP/s, MFU) go to the tracker.  W&B runs are written offline unless
    WANDB_MODE=online: upload them with `wandb sync` (docs/export.md).
    """
    from tprimat.contract.exporter import ExportTarget
    from tprimat.errors import TprimatError
    from tprimat.export.deliver import destination, export_results

    names = list(dict.fromkeys(trackers))
    if uri and len(names) > 1:
        raise TprimatError(f"--uri names one tracker's store: export to {', '.join(names)} one --to at a time")
    registry = registry_from(ctx)
    target = ExportTarget(uri=uri, experiment=experiment)
    destinations = [destination(registry, name, target) for name in names]
    done, loaded = export_results(paths, destinations)
    failed = [item for item in done if item.error]
    if as_json:
        echo_json(
            {
                "exported": [
                    {"path": str(i.source), "tracker": i.tracker, "where": i.where, "error": i.error} for i in done
                ],
                "skipped": [{"path": str(s.path), "reason": s.reason} for s in loaded.skipped],
            }
        )
    else:
        for skipped in loaded.skipped:
            click.echo(f"skipped {skipped.path}: {skipped.reason}", err=True)
        for item in done:
            if item.error:
                click.echo(f"error: {item.error}", err=True)
            else:
                click.echo(f"{item.source} -> {item.where}")
    if failed:
        ctx.exit(1)
