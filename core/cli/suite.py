"""``tprimat suite``: run a matrix of benchmarks that survives interruption, and resume it."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from tprimat.cli.output import echo_json, print_table


@click.group()
def suite() -> None:
    """Run, resume and inspect benchmark campaigns (backends × models × precisions × repeats)."""


def _print_doctor(strict: bool) -> None:
    from tprimat.doctor import run_checks

    findings = run_checks()
    for finding in findings:
        click.echo(f"doctor: {finding.message} — {finding.fix}", err=True)
    if strict and findings:
        raise click.ClickException("refusing to start: doctor found problems (--strict)")


def _announce(event: str, run, totals: dict[str, int]) -> None:
    done = totals.get("completed", 0)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
    if event == "start":
        click.echo(f"suite: starting {run.id} ({summary})", err=True)
    else:
        click.echo(f"suite: {run.id} ended {event} ({done} completed)", err=True)


def _run(directory: Path, strict: bool) -> None:
    from tprimat.suite import SUITE_FILE, load_suite, run_suite, suite_overview

    spec = load_suite(directory / SUITE_FILE)
    _print_doctor(strict)
    totals = run_suite(spec, directory, announce=_announce)
    _print_overview(suite_overview(spec, directory))
    if totals.get("completed", 0) != sum(totals.values()):
        raise click.ClickException(
            f"not every run completed ({', '.join(f'{k} {v}' for k, v in sorted(totals.items()))}); "
            f"'tprimat suite resume {directory}' retries what is left")


def _print_overview(rows: list[dict]) -> None:
    print_table("Suite", ["run", "status", "attempts", "problem"],
                [[r["id"], r["status"], r["attempts"], (r["problem"] or "")[:120]] for r in rows])


@suite.command("run")
@click.argument("suite_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Suite directory (default: suites/<name>).")
@click.option("--dry-run", is_flag=True, help="Print the runs and their exact commands; run nothing.")
@click.option("--strict", is_flag=True, help="Refuse to start if `tprimat doctor` finds anything.")
def run(suite_file: Path, output_dir: Path | None, dry_run: bool, strict: bool) -> None:
    """Run every run of SUITE_FILE that has not completed yet (re-running resumes)."""
    from tprimat.suite import RUNS_DIR, expand, init_suite_dir, load_suite, run_command

    spec = load_suite(suite_file)
    directory = output_dir or Path("suites") / spec.name
    if dry_run:
        for item in expand(spec):
            click.echo(f"{item.id}\n  {shlex.join(run_command(spec, item, directory / RUNS_DIR))}")
        return
    init_suite_dir(suite_file, directory)
    _run(directory, strict)


@suite.command("resume")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--strict", is_flag=True, help="Refuse to start if `tprimat doctor` finds anything.")
def resume(directory: Path, strict: bool) -> None:
    """Continue the suite in DIRECTORY: skip completed runs, retry the rest."""
    _run(directory, strict)


@suite.command("status")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def status(directory: Path, as_json: bool) -> None:
    """Show done / failed / pending runs of the suite in DIRECTORY, read from disk."""
    from tprimat.suite import SUITE_FILE, load_suite, suite_overview

    rows = suite_overview(load_suite(directory / SUITE_FILE), directory)
    if as_json:
        echo_json({"runs": rows})
        return
    _print_overview(rows)


@suite.command("report")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("-o", "--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the reports (default: DIRECTORY/report).")
@click.option("--format", "formats", default="md,html,csv,json", show_default=True,
              help="Comma-separated report formats: md, html, csv, json.")
@click.option("--json", "as_json", is_flag=True, help="Print the written reports as JSON.")
def report(directory: Path, output_dir: Path | None, formats: str, as_json: bool) -> None:
    """Compare the completed runs of the suite in DIRECTORY, repeats aggregated.

    One report per model × precision × methodology (the runs a fair comparison
    may put side by side), written to OUTPUT/<model>-<precision>-<methodology>/.
    """
    from tprimat.compare import build_comparison, write_report
    from tprimat.compare.report import parse_formats
    from tprimat.config import load_config
    from tprimat.suite import SUITE_FILE, load_suite, report_groups

    spec = load_suite(directory / SUITE_FILE)
    groups = report_groups(spec, directory)
    if not groups:
        raise click.ClickException(f"no completed runs in {directory} yet")
    chosen = parse_formats(formats)
    base = load_config(spec.config) if spec.config else load_config()
    target = output_dir or directory / "report"
    written = {}
    for name, paths in groups.items():
        comparison = build_comparison(paths, cost=base.cost)
        files = write_report(comparison, target / name, chosen)
        written[name] = {"runs": len(paths), "files": {k: str(v) for k, v in files.items()}}
        if not as_json:
            click.echo(f"{name}: {len(paths)} completed run(s) -> {target / name}")
    if as_json:
        echo_json({"reports": written})
