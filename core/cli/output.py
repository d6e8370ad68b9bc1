"""Terminal output shared by the commands: rich tables for people, plain JSON for programs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def echo_json(data: Any) -> None:
    """Print ``data`` as indented, strict JSON on stdout (nothing else is printed)."""
    click.echo(json.dumps(data, indent=2, allow_nan=False, default=str))


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a rich table (imported here: listing commands that emit JSON never load rich)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    Console().print(table)


def registry_from(ctx: click.Context):
    """The registry for this invocation (tests inject a factory through ``ctx.obj``)."""
    root = ctx.find_root()
    root.ensure_object(dict)
    if "registry" not in root.obj:
        from tprimat.contract.registry import Registry

        factory = root.obj.get("registry_factory", Registry.from_environment)
        root.obj["registry"] = factory()
    return root.obj["registry"]
