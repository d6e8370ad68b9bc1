"""``tprimat doctor``: pre-flight checks that make numbers untrustworthy when ignored."""

from __future__ import annotations

from pathlib import Path

import click

from tprimat.cli.output import echo_json, print_table


@click.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    help="The benchmark config the run will use (decides which tokenizer is needed).",
)
@click.option(
    "--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE", help="Override one config value (repeatable)."
)
@click.option(
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where results will be written.",
)
@click.option("--strict", is_flag=True, help="Exit with code 2 if anything is found.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def doctor(config_file: str | None, overrides: tuple[str, ...], output_dir: Path, strict: bool, as_json: bool) -> None:
    """Check this machine for conditions that distort benchmark numbers.

    Other processes on the GPUs, a lowered power cap, NUMA auto-balancing,
    launch-blocking and debug-logging variables, TunableOp tuning during a
    timed run, a heavily loaded CPU (load average above the core count), low
    disk space, and a missing HF_TOKEN when the run's tokenizer comes from a
    gated Hugging Face repository (not when it is a local directory).
    """
    from tprimat.running.doctor import findings_to_dicts, run_checks, tokenizer_needed
    from tprimat.settings.config import load_config

    cfg = load_config(config_file, overrides)
    findings = run_checks(output_dir=output_dir, tokenizer=tokenizer_needed(cfg))
    if as_json:
        echo_json({"findings": findings_to_dicts(findings)})
    elif findings:
        print_table(
            "Doctor findings", ["check", "finding", "what to do"], [[f.check, f.message, f.fix] for f in findings]
        )
    else:
        click.echo("doctor: nothing found that would distort the measurements")
    if strict and findings:
        raise click.exceptions.Exit(2)
