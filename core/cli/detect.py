"""``tprimat detect``: what this machine is, as ``detect_platform`` sees it."""

from __future__ import annotations

import attrs
import click

from tprimat.cli.output import echo_json, print_table, registry_from


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def detect(ctx: click.Context, as_json: bool) -> None:
    """Show the platform, devices, memory, driver and stack versions of this machine."""
    info = registry_from(ctx).detect_platform()
    data = attrs.asdict(info)
    data["notes"] = list(info.notes)
    if as_json:
        echo_json(data)
        return
    if info.partition is not None:
        from tprimat.hardware.partitions import describe

        data["partition"] = describe(info.partition)
    print_table("Platform", ["field", "value"], [[k, v] for k, v in data.items() if k != "notes"])
    for note in info.notes:
        click.echo(f"  note  {note}")
