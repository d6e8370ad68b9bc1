"""``tprimat doctor``: pre-flight checks that make numbers untrustworthy when ignored."""

from __future__ import annotations

from pathlib import Path

import click

from tprimat.cli.options import config_options
from tprimat.cli.output import echo_json, print_table, registry_from


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
    """
    from tprimat.hardware.platform import trains_on_cpu
    from tprimat.running.doctor import findings_to_dicts, run_checks, tokenizer_needed
    from tprimat.settings.config import default_config_dict, load_config

    # the config as `tprimat run` would layer it on this machine (the CPU preset without a GPU)
    cpu = trains_on_cpu(registry_from(ctx).detect_platform())
    cfg = load_config(config_file, overrides, base=default_config_dict(cpu=cpu))
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
