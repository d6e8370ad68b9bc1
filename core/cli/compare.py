"""``tprimat compare``: a fair, statistical comparison report of results."""

from __future__ import annotations

from pathlib import Path

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, make_console, print_table


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    default="tprimat-report",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory the report is written to.",
)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="Put runs whose fair-comparison fields differ side by side (with a table of every differing field).",
)
@click.option(
    "--baseline",
    default=None,
    help="System the ratios are relative to (label, device, platform, backend or "
    "framework; default: the system of the first result given).",
)
@click.option(
    "--group-by",
    "group_by",
    default=None,
    metavar="KEY[,KEY]",
    help="Pool runs into systems by these keys (platform, device, backend, framework, gpus, "
    "methodology, preset, micro_batch_size, a dotted config key such as "
    "settings.training.micro_batch_size, or a run tag as tags.KEY); default: runs that differ "
    "in any launched setting are different systems.",
)
@click.option(
    "--format",
    "formats",
    default="md,html,csv,json",
    show_default=True,
    help="Comma-separated outputs: md, html, csv, json.",
)
@config_options(
    config_note="Its [cost] section holds the price table.",
    set_note="Prices and the token count are [cost] values, e.g. cost.train_tokens=15e12.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the written files as JSON.")
def compare(
    paths: tuple[Path, ...],
    output_dir: Path,
    allow_mismatch: bool,
    baseline: str | None,
    group_by: str | None,
    formats: str,
    config_file: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
) -> None:
    """Compare results (files or directories of them) in one report.

    MLPerf Training result files (`:::MLLOG`) are reported side by side by
    their time to train and olympic score instead (docs/convergence.md).

    Runs are grouped by the fields a fair comparison needs (model, dataset,
    sequence length, global batch, precision, methodology, iterations
    measured); mismatched runs are refused unless --allow-mismatch.  Within
    a group, runs are repeats of one system only when they launched the same
    settings, unless --group-by says how to pool them.
    """
    from tprimat.mlperf.reader import mllog_files

    if mllog_files(paths):  # published MLPerf result files: their own side-by-side report
        _compare_mlperf(paths, output_dir, as_json)
        return
    from tprimat.compare.group import parse_group_by
    from tprimat.compare.model import MismatchError, build_comparison
    from tprimat.compare.report import parse_formats, systems_for_terminal, write_report
    from tprimat.settings.config import load_config

    chosen = parse_formats(formats)
    cost = load_config(config_file, list(overrides)).cost
    try:
        comparison = build_comparison(
            paths, cost=cost, allow_mismatch=allow_mismatch, baseline=baseline, group_by=parse_group_by(group_by)
        )
    except MismatchError as exc:
        if not as_json:
            print_table(
                exc.title,
                ["field", *exc.columns],
                [[name, *["–" if v is None else str(v) for v in values]] for name, values in exc.rows],
            )
        raise
    written = write_report(comparison, output_dir, chosen)
    if as_json:
        echo_json(
            {
                "baseline": comparison.baseline,
                "skipped": [{"path": str(s.path), "reason": s.reason} for s in comparison.skipped],
                "files": {name: str(path) for name, path in written.items()},
            }
        )
        return
    print_table(
        "Comparison (tokens/s/GPU)",
        ["system", "runs", "tokens/s/GPU", "interval over runs", "ratio", "MFU", "MAMF util."],
        systems_for_terminal(comparison),
    )
    if any(not s.same_config_as_baseline for s in comparison.systems):
        click.echo(
            "warning: configurations differ between groups (--allow-mismatch): ratios across "
            "groups compare different workloads; the report lists every differing field",
            err=True,
        )
    for label, rows in comparison.within_system.items():
        click.echo(
            f"warning: the runs of {label} launched different settings ({', '.join(name for name, _ in rows)}); "
            "they are pooled only because of --group-by",
            err=True,
        )
    for skipped in comparison.skipped:
        click.echo(f"skipped {skipped.path}: {skipped.reason}", err=True)
    click.echo(f"report written to {output_dir}: {', '.join(sorted(written))}")


def _compare_mlperf(paths: tuple[Path, ...], output_dir: Path, as_json: bool) -> None:
    from tprimat.mlperf.report import write_mlperf_report
    from tprimat.mlperf.summary import print_summary, summarize_paths

    systems = summarize_paths(paths)
    written = write_mlperf_report(systems, output_dir)
    if as_json:
        echo_json({"files": {name: str(path) for name, path in written.items()}})
        return
    print_summary(systems, make_console())
    click.echo(f"report written to {output_dir}: {', '.join(sorted(written))}")
