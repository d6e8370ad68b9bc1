"""``tprimat profile``: ``tprimat run --profile``, then ``tprimat trace analyze`` on the collected traces."""

from __future__ import annotations

from typing import Any

import click

from tprimat.cli.run import RunCommand
from tprimat.cli.run import run as run_command


def _profile(ctx: click.Context, **options: Any) -> None:
    from tprimat.cli.trace import analyze

    options["profile"] = True
    exit_code = 0
    try:
        ctx.invoke(run_command, **options)
    except click.exceptions.Exit as exc:  # the run did not complete: analyse what it left
        exit_code = exc.exit_code
    prepared = ctx.meta.get("tprimat.prepared_run")
    if prepared is None:
        ctx.exit(exit_code or 1)
    traces = prepared.run_dir / "traces"
    if options.get("dry_run"):
        click.echo(f"## then\ntprimat trace analyze {traces}/")
        return
    outcome = ctx.meta.get("tprimat.run_outcome")
    if outcome is not None and not traces.is_dir() and outcome.result is None:
        ctx.exit(exit_code)  # another node's runner: rank 0's node holds the traces
    if not traces.is_dir() or not any(traces.iterdir()):
        click.echo(f"no profiler traces were collected in {traces}; see the result's notes", err=True)
        ctx.exit(exit_code or 1)
    click.echo(f"\n## trace analysis: tprimat trace analyze {traces}/\n")
    ctx.invoke(analyze, traces=(str(traces),), steps=None, top=10, hta_rounding=False, as_json=False)
    if exit_code:
        ctx.exit(exit_code)


profile = RunCommand(
    "profile",
    params=[p for p in run_command.params if p.name != "profile"],
    callback=click.pass_context(_profile),
    help="Run with the profiler on (`tprimat run --profile`, same options), then analyse the "
    "collected traces (`tprimat trace analyze runs/<id>/traces/`): the per-rank breakdown of "
    "GPU time.",
    short_help="Profile a run and analyse its traces.",
)
