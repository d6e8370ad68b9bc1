"""``tprimat config``: inspect the effective benchmark config."""

from __future__ import annotations

import click

from tprimat.cli.output import echo_json


@click.group()
def config() -> None:
    """Inspect benchmark configs (TOML)."""


@config.command("show")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    help="A benchmark config file layered over the defaults.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Override one value (repeatable), e.g. --set training.seq_length=4096.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
def show(config_file: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Print the effective config and its fairness fingerprint."""
    from tprimat.settings.config import dump_toml, load_config

    cfg = load_config(config_file, overrides)
    if as_json:
        echo_json({"config": cfg.to_dict(), "config_fingerprint": cfg.fingerprint()})
        return
    click.echo(f"# config_fingerprint = {cfg.fingerprint()}")
    click.echo(dump_toml(cfg), nl=False)
