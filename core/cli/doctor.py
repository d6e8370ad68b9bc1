"""``tprimat doctor``: pre-flight checks that make numbers untrustworthy when ignored."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, print_table, registry_from

if TYPE_CHECKING:
    from tprimat.contract.compiled import CompiledState


@click.command()
@config_options(config_note="Give the one the run will use: it decides which tokenizer is needed.")
@click.option(
    "-o",
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where results will be written.",
)
@click.option("--strict", is_flag=True, help="Exit with code 2 if anything is found.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def doctor(
    ctx: click.Context,
    config_file: str | None,
    overrides: tuple[str, ...],
    output_dir: Path,
    strict: bool,
    as_json: bool,
) -> None:
    """Check this machine for conditions that distort benchmark numbers.

    Other processes on the GPUs, a lowered power cap, NUMA auto-balancing,
    launch-blocking and debug-logging variables, TunableOp tuning during a
    timed run, a heavily loaded CPU (load average above the core count), low
    disk space, and a missing HF_TOKEN when the run's tokenizer comes from a
    gated Hugging Face repository (not when it is a local directory).

    It also says whether tprimat's compiled modules are in use.  They change
    only speed, never results, so they are no finding (and never make
    --strict fail).
    """
    from tprimat.contract.compiled import compiled_state
    from tprimat.hardware.platform import trains_on_cpu
    from tprimat.running.doctor import findings_to_dicts, run_checks, tokenizer_needed
    from tprimat.settings.config import default_config_dict, load_config

    # the config as `tprimat run` would layer it on this machine (the CPU preset without a GPU)
    cpu = trains_on_cpu(registry_from(ctx).detect_platform())
    cfg = load_config(config_file, overrides, base=default_config_dict(cpu=cpu))
    findings = run_checks(output_dir=output_dir, tokenizer=tokenizer_needed(cfg))
    compiled = compiled_state()
    if as_json:
        echo_json({"findings": findings_to_dicts(findings), "compiled_modules": [attrs.asdict(s) for s in compiled]})
    else:
        if findings:
            print_table(
                "Doctor findings", ["check", "finding", "what to do"], [[f.check, f.message, f.fix] for f in findings]
            )
        else:
            click.echo("doctor: nothing found that would distort the measurements")
        click.echo(compiled_line(compiled))
    if strict and findings:
        raise click.exceptions.Exit(2)


def compiled_line(states: Sequence[CompiledState]) -> str:
    """One line on the compiled modules: how many are in use, and for each one that is not,
    why and what to do."""
    from tprimat.contract.compiled import NOT_BUILT, NOT_LOADED, PURE_PYTHON, TURNED_OFF

    head = f"compiled modules: {sum(s.in_use for s in states)} of {len(states)} in use"
    off = [s for s in states if not s.in_use]
    if not off:
        return f"{head} (full speed)"
    fixes = {
        NOT_BUILT: "install a C compiler and the Python headers (python3-dev), then reinstall tprimat",
        NOT_LOADED: "reinstall tprimat with this Python",
        TURNED_OFF: f"unset {PURE_PYTHON}",
    }
    # each fix once, in the order of the modules that need it
    todo = dict.fromkeys(next(fix for reason, fix in fixes.items() if s.reason.startswith(reason)) for s in off)
    why = "; ".join(f"{s.module}: {s.reason}" for s in off)
    return f"{head}; {why} — results are the same, computed in Python, more slowly; to use them: {', or '.join(todo)}"
