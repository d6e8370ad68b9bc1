"""``tprimat tune``: search a backend's fastest configuration on this device, write it as a preset."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, print_table

if TYPE_CHECKING:
    from tprimat.tune import Plan
    from tprimat.tune.search import Outcome
    from tprimat.tune.space import Candidate


@click.command()
@click.option("--backend", required=True, help="Backend to tune (see `tprimat backends`).")
@click.option("--model", required=True, help="Model to tune for (see `tprimat models`).")
@config_options(
    config_note="The search starts from it.",
    set_note="It applies to every trial; a knob set here is not searched.",
)
@click.option(
    "--space",
    "space_items",
    multiple=True,
    metavar="SECTION.KEY=V1,V2",
    help="Search these values for a knob (replaces the backend's values; repeatable).",
)
@click.option(
    "--device-capacity",
    "capacity_gib",
    type=click.FloatRange(min=0, min_open=True),
    metavar="GIB",
    help="Device memory in GiB for the memory estimator's pruning.",
)
@click.option(
    "--budget", default="24", show_default=True, help="Trial runs (24, 24-trials) or trial time (90s, 20m, 1h30m)."
)
@click.option(
    "--min-iterations",
    type=click.IntRange(min=2),
    help="Iterations of round 0 (default: warm-up + 3); each round doubles them.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=2),
    default=3,
    show_default=True,
    help="Runs of each finalist in the last round (the winner's interval needs at least 2).",
)
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Tune directory: trials and state (default: tunes/<backend>-<model>). "
    "Running the same command again resumes it.",
)
@click.option(
    "--preset-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the preset is written (default: the user preset directory, "
    "$TPRIMAT_PRESET_DIR or ~/.config/tprimat/presets).",
)
@click.option("--dry-run", is_flag=True, help="Print the search space and candidates; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def tune(
    ctx: click.Context,
    backend: str,
    model: str,
    config_file: str | None,
    overrides: tuple[str, ...],
    space_items: tuple[str, ...],
    capacity_gib: float | None,
    budget: str,
    min_iterations: int | None,
    repeats: int,
    output_dir: Path | None,
    preset_dir: Path | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Find the fastest configuration of BACKEND for MODEL on this device.

    Searches settings that change speed but not what is computed (micro-batch
    size, recompute, parallel layout, optimizer and overlap switches, the
    backend's own tunables), prunes what cannot fit in memory, runs short
    benchmarks in rounds of successive halving, and writes the winner as a
    preset that `benchmark.methodology = "tuned"` uses.  Every trial is kept.
    When the measurements cannot tell the finalists apart the tune is
    undecided: it says so, writes no preset and exits with code 1.
    """
    from tprimat import tune as tuning
    from tprimat.tune.search import worst_case_trials

    registry = ctx.obj["registry_factory"]()
    plan = tuning.prepare(
        registry,
        backend=backend,
        model=model,
        config_file=config_file,
        overrides=overrides,
        space_items=space_items,
        budget=tuning.parse_budget(budget),
        capacity_gib=capacity_gib,
        min_iterations=min_iterations,
        final_repeats=repeats,
    )
    spec = plan.spec
    if dry_run:
        _print_plan(
            plan,
            worst_case_trials(
                len(spec.candidates), eta=spec.eta, finalists=spec.finalists, final_repeats=spec.final_repeats
            ),
        )
        return
    from tprimat.running.prepare import require_backend

    require_backend(registry, backend, {})  # one line and exit code 2 before any trial, not N failed trials
    directory = output_dir or Path("tunes") / f"{backend}-{spec.model}"
    plan, started_at = tuning.open_directory(plan, directory)
    outcome, pruned = _search(ctx, plan, directory, as_json)
    winner = _winner_or_exit(outcome, directory, as_json)
    path = _write_presets(plan, outcome, pruned, started_at, backend, directory, preset_dir)
    if as_json:
        echo_json(
            {
                "preset": str(path),
                "winner": winner.as_dict(),
                "decision": outcome.decision,
                "directory": str(directory),
            }
        )
        return
    click.echo(f"winner: {winner.describe(plan.base)} ({outcome.decision})")
    click.echo(f"preset: {path}  (use it with --set benchmark.methodology=tuned)")


def _search(ctx: click.Context, plan: Plan, directory: Path, as_json: bool) -> tuple[Outcome, list[dict[str, Any]]]:
    """Run the trials of ``plan`` in ``directory`` and write its summary: (the outcome, the pruned candidates).

    Tests inject an in-process trial launcher (``ctx.obj["trial_launcher"]``); by default each
    trial is a child ``tprimat run``.  The table of trials is printed unless ``as_json``.
    """
    from tprimat.tune.search import tune as run_search
    from tprimat.tune.search import write_summary

    for note in plan.notes:
        click.echo(f"tune: {note}", err=True)
    click.echo(f"tune: {len(plan.spec.candidates)} candidate(s) in {directory}", err=True)
    with _stdout_to_stderr(as_json):  # the trials' own output must not mix with the JSON
        outcome = run_search(
            plan.spec,
            directory,
            launcher=ctx.obj.get("trial_launcher"),
            announce=lambda line: click.echo(f"tune: {line}", err=True),
        )
    pruned = [
        {"id": p.candidate.id, "settings": p.candidate.as_dict(), "reason": p.reason, "total_gib": p.total_gib}
        for p in plan.pruned
    ]
    write_summary(directory, plan.spec, outcome, {"device": plan.device, "notes": list(plan.notes), "pruned": pruned})
    if not as_json:
        _print_outcome(plan, outcome)
    return outcome, pruned


def _winner_or_exit(outcome: Outcome, directory: Path, as_json: bool) -> Candidate:
    """The search's winner; exit with code 1 when there is none: undecided (measured, not told
    apart) or nothing completed.  No preset then names a winner the search could not find."""
    if outcome.undecided:
        if as_json:
            echo_json({"preset": None, "winner": None, "decision": outcome.decision, "directory": str(directory)})
        raise click.ClickException(f"{outcome.decision}; no preset written; see {directory}/summary.json")
    if outcome.winner is None:
        raise click.ClickException(
            f"no configuration completed a run ({outcome.decision}); see {directory}/summary.json"
        )
    return outcome.winner


def _write_presets(
    plan: Plan,
    outcome: Outcome,
    pruned: list[dict[str, Any]],
    started_at: str,
    backend: str,
    directory: Path,
    preset_dir: Path | None,
) -> Path:
    """Write the winner as a preset (into ``preset_dir``, default the user preset directory) and
    a copy into the tune directory; the preset's path."""
    from tprimat.settings.methodology import user_preset_dir
    from tprimat.tune.preset import preset_name, render_preset, write_preset

    text = render_preset(
        spec=plan.spec,
        outcome=outcome,
        base=plan.base,
        device=plan.device,
        platform=plan.platform,
        space=plan.space,
        started_at=started_at,
        notes=list(plan.notes),
        pruned=pruned,
    )
    name = preset_name(plan.device, backend, plan.spec.model)
    path = write_preset(text, preset_dir or user_preset_dir(), name)
    write_preset(text, directory, "preset")
    return path


def _print_plan(plan: Plan, worst: int) -> None:
    spec = plan.spec
    for note in plan.notes:
        click.echo(f"tune: {note}", err=True)
    print_table(
        "Search space", ["knob", "values"], [[k, ", ".join(str(v) for v in values)] for k, values in plan.space.items()]
    )
    print_table(
        "Candidates (simplest first)",
        ["id", "changes from the config"],
        [[c.id, c.describe(plan.base)] for c in spec.candidates],
    )
    click.echo(
        f"{len(spec.candidates)} candidate(s) ({plan.invalid} refused by the config or model, "
        f"{len(plan.pruned)} pruned, {len(plan.dropped)} beyond the budget); at most {worst} "
        f"trial run(s); round 0 runs {spec.min_iterations} iterations"
    )


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """Point file descriptor 1 at stderr (children inherit it) while the trials run."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _print_outcome(plan: Plan, outcome: Outcome) -> None:
    rows = []
    for candidate in plan.spec.candidates:
        stats = outcome.statistics.get(candidate.id)
        median = f"{stats['median']:.1f}" if stats else ""
        interval = (
            f"[{stats['ci_low']:.1f}, {stats['ci_high']:.1f}] ({stats.get('interval')})"
            if stats and stats["ci_low"] is not None
            else ""
        )
        rows.append(
            [candidate.id, candidate.describe(plan.base), outcome.status.get(candidate.id, "not run"), median, interval]
        )
    print_table("Tune", ["candidate", "changes", "status", "tokens/s/GPU", "interval over runs"], rows)
