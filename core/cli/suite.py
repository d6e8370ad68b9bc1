"""``tprimat suite``: run a matrix of benchmarks that survives interruption, and resume it."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tprimat.cli.export import report_destinations, report_result, report_to_option
from tprimat.cli.output import echo_json, print_table
from tprimat.cli.tags import tag_option

if TYPE_CHECKING:
    from tprimat.export.deliver import Destination
    from tprimat.suite.campaign import SuiteLaunch, SuiteRun
    from tprimat.suite.lock import Holder, SuiteLock

Decorated = TypeVar("Decorated", bound=Callable[..., Any])


@click.group()
def suite() -> None:
    """Run, resume and inspect benchmark campaigns (backends × models × precisions × repeats)."""


def _print_doctor(strict: bool, directory: Path) -> None:
    from tprimat.errors import TprimatError
    from tprimat.running.doctor import run_checks

    findings = run_checks(output_dir=directory)
    for finding in findings:
        click.echo(f"doctor: {finding.message} — {finding.fix}", err=True)
    if strict and findings:
        raise TprimatError(
            f"refusing to start: the pre-flight checks found {len(findings)} "
            "problem(s) (--strict); see `tprimat doctor`"
        )


def slurm_options(function: Decorated) -> Decorated:
    """``--slurm`` and the scheduler options passed through to every run's ``tprimat run``."""
    options = [
        click.option(
            "--slurm", is_flag=True, help="Run each run as a SLURM job (`tprimat run --slurm`), one at a time."
        ),
        click.option("--nodes", type=click.IntRange(min=1), help="SLURM: nodes per run."),
        click.option("--gpus-per-node", type=click.IntRange(min=1), help="SLURM: GPUs per node."),
        click.option("--partition", help="SLURM: partition."),
        click.option("--time", "time_limit", help="SLURM: time limit per run (e.g. 01:00:00)."),
        click.option("--account", help="SLURM: account."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _launch(
    directory: Path | None,
    strict: bool,
    slurm: bool,
    scheduler: dict[str, Any],
    *,
    reuse: bool,
    tags: tuple[tuple[str, str], ...] = (),
) -> SuiteLaunch:
    """The launch options: given ones, else (``reuse``) those the suite was started with (its tags too)."""
    from tprimat.suite.campaign import SuiteLaunch, slurm_launch

    given = {k: v for k, v in scheduler.items() if v is not None}
    if given and not slurm:
        names = ", ".join("--" + k.replace("_", "-") for k in given)
        raise click.UsageError(f"{names} only apply with --slurm")
    if slurm:
        return slurm_launch(given, strict=strict, tags=tags)
    if reuse and directory is not None:
        saved = SuiteLaunch.load(directory)
        return SuiteLaunch(
            slurm=saved.slurm, slurm_options=saved.slurm_options, strict=strict or saved.strict, tags=saved.tags
        )
    return SuiteLaunch(strict=strict, tags=tags)


def _announce(event: str, run: SuiteRun, totals: dict[str, int]) -> None:
    done = totals.get("completed", 0)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
    if event == "start":
        click.echo(f"suite: starting {run.id} ({summary})", err=True)
    else:
        click.echo(f"suite: {run.id} ended {event} ({done} completed)", err=True)


def wait_option(function: Decorated) -> Decorated:
    """``--wait``: queue behind another command working in the suite directory."""
    return click.option(
        "--wait",
        is_flag=True,
        help="If another command works in the suite directory, wait for it to end instead of "
        "refusing to start (exit code 2).",
    )(function)


def _locked(directory: Path, wait: bool) -> SuiteLock:
    """The suite directory's lock, announced: whom it waits for, whose stale lock it takes over."""
    from tprimat.suite.lock import acquire

    def waiting(holder: Holder | None) -> None:
        who = holder.describe() if holder is not None else "another tprimat command"
        click.echo(f"suite: {directory} is in use by {who}; waiting for it to end", err=True)

    lock = acquire(directory, wait=wait, on_wait=waiting)
    if lock.previous is not None:
        click.echo(
            f"suite: taking over {directory} from {lock.previous.describe()}, which ended without "
            "releasing it; processes it left running are stopped",
            err=True,
        )
    return lock


def _run(directory: Path, launch: SuiteLaunch, lock: SuiteLock, reporting: list[Destination] | None = None) -> None:
    from tprimat.suite.campaign import RUNS_DIR, SUITE_FILE, load_suite, run_suite, suite_overview

    def announce(event: str, run: SuiteRun, totals: dict[str, int]) -> None:
        _announce(event, run, totals)
        if event != "start":  # the run ended: its result (if it wrote one) is exported
            report_result(directory / RUNS_DIR / run.id / "result.json", reporting or [])

    spec = load_suite(directory / SUITE_FILE)
    _print_doctor(launch.strict, directory)
    launch.save(directory)
    if launch.slurm:
        click.echo("suite: each run is submitted as a SLURM job: " + " ".join(launch.run_args()), err=True)
    totals = run_suite(spec, directory, announce=announce, launch=launch, lock=lock)
    _print_overview(suite_overview(spec, directory))
    if totals.get("completed", 0) != sum(totals.values()):
        raise click.ClickException(
            f"not every run completed ({', '.join(f'{k} {v}' for k, v in sorted(totals.items()))}); "
            f"'tprimat suite resume {directory}' retries what is left"
        )


def _print_overview(rows: list[dict[str, Any]]) -> None:
    print_table(
        "Suite",
        ["run", "status", "attempts", "problem"],
        [[r["id"], r["status"], r["attempts"], (r["problem"] or "")[:120]] for r in rows],
    )


@suite.command("run")
@click.argument("suite_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Suite directory (default: suites/<name>).",
)
@click.option("--dry-run", is_flag=True, help="Print the runs and their exact commands; run nothing.")
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse to start (exit code 2) if `tprimat doctor` finds anything; every run is started with --strict too.",
)
@wait_option
@slurm_options
@report_to_option
@tag_option
@click.pass_context
def run(
    ctx: click.Context,
    suite_file: Path,
    output_dir: Path | None,
    dry_run: bool,
    strict: bool,
    wait: bool,
    slurm: bool,
    nodes: int | None,
    gpus_per_node: int | None,
    partition: str | None,
    time_limit: str | None,
    account: str | None,
    report_to: tuple[str, ...],
    tags: dict[str, str],
) -> None:
    """Run every run of SUITE_FILE that has not completed yet (re-running resumes).

    One command at a time works in a suite directory: another one holding it
    is named and this one exits with code 2 (or waits, with --wait).
    """
    from tprimat.suite.campaign import RUNS_DIR, expand, init_suite_dir, load_suite, run_command

    spec = load_suite(suite_file)
    directory = output_dir or Path("suites") / spec.name
    launch = _launch(
        None,
        strict,
        slurm,
        {
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
            "partition": partition,
            "time": time_limit,
            "account": account,
        },
        reuse=False,
        tags=tuple(tags.items()),
    )
    if dry_run:
        for item in expand(spec):
            argv = run_command(spec, item, directory / RUNS_DIR, launch)
            click.echo(f"{item.id}\n  {shlex.join(argv)}")
        return
    reporting = report_destinations(ctx, report_to)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory, wait) as lock:
        init_suite_dir(suite_file, directory)
        _run(directory, launch, lock, reporting)


@suite.command("resume")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--strict", is_flag=True, help="Refuse to start (exit code 2) if `tprimat doctor` finds anything.")
@wait_option
@slurm_options
@report_to_option
@click.pass_context
def resume(
    ctx: click.Context,
    directory: Path,
    strict: bool,
    wait: bool,
    slurm: bool,
    nodes: int | None,
    gpus_per_node: int | None,
    partition: str | None,
    time_limit: str | None,
    account: str | None,
    report_to: tuple[str, ...],
) -> None:
    """Continue the suite in DIRECTORY: skip completed runs, retry the rest.

    Runs are started the way the suite was (locally or with --slurm and its
    options, kept in DIRECTORY/launch.json) unless --slurm is given again.
    One command at a time works in a suite directory: another one holding it
    is named and this one exits with code 2 (or waits, with --wait).
    """
    from tprimat.suite.campaign import SUITE_FILE, load_suite

    load_suite(directory / SUITE_FILE)  # a suite directory, before anything is written into it
    launch = _launch(
        directory,
        strict,
        slurm,
        {
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
            "partition": partition,
            "time": time_limit,
            "account": account,
        },
        reuse=True,
    )
    reporting = report_destinations(ctx, report_to)
    with _locked(directory, wait) as lock:
        _run(directory, launch, lock, reporting)


@suite.command("status")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def status(directory: Path, as_json: bool) -> None:
    """Show done / failed / pending runs of the suite in DIRECTORY, read from disk."""
    from tprimat.suite.campaign import SUITE_FILE, load_suite, suite_overview

    rows = suite_overview(load_suite(directory / SUITE_FILE), directory)
    if as_json:
        echo_json({"runs": rows})
        return
    _print_overview(rows)


@suite.command("report")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the reports (default: DIRECTORY/report).",
)
@click.option(
    "--format",
    "formats",
    default="md,html,csv,json",
    show_default=True,
    help="Comma-separated report formats: md, html, csv, json.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the written reports as JSON.")
def report(directory: Path, output_dir: Path | None, formats: str, as_json: bool) -> None:
    """Compare the completed runs of the suite in DIRECTORY, repeats aggregated.

    One report per model × precision × methodology (the runs a fair comparison
    may put side by side), written to OUTPUT/<model>-<precision>-<methodology>/.
    """
    from tprimat.compare import build_comparison, write_report
    from tprimat.compare.report import parse_formats
    from tprimat.settings.config import load_config
    from tprimat.suite.campaign import SUITE_FILE, load_suite, report_groups

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
