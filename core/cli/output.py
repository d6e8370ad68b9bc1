"""Terminal output shared by the commands: rich tables for people, plain JSON for programs.

Every rich console comes from :func:`make_console`: in a terminal it fits the window; anywhere
else (a pipe, a file, a CI log) it wraps nothing, so a path or a name is printed whole on one
line and can be copied (rich would otherwise cut lines at 80 columns, inside a path).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

    from tprimat.contract.registry import Registry

#: Width of a console that is not a terminal: wider than any line tprimat prints.
UNWRAPPED_WIDTH = 1_000_000


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A rich console on stdout (or stderr): the window's width in a terminal, no wrapping elsewhere."""
    from rich.console import Console

    console = Console(stderr=stderr, quiet=quiet)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, quiet=quiet, width=UNWRAPPED_WIDTH, soft_wrap=True)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented, strict JSON on stdout (nothing else is printed)."""
    click.echo(json.dumps(data, indent=2, allow_nan=False, default=str))


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a rich table (imported here: listing commands that emit JSON never load rich)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    make_console().print(table)


def registry_from(ctx: click.Context) -> Registry:
    """The registry for this invocation (tests inject a factory through ``ctx.obj``)."""
    root = ctx.find_root()
    root.ensure_object(dict)
    if "registry" not in root.obj:
        from tprimat.contract.registry import Registry

        factory = root.obj.get("registry_factory", Registry.from_environment)
        root.obj["registry"] = factory()
    return root.obj["registry"]
