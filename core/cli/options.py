"""Options that several commands share, declared once so that they read and behave alike.

``--config FILE`` / ``--set SECTION.KEY=VALUE`` layer a benchmark config over the defaults in
every command that reads one (``run``, ``parse``, ``compare``, ``tune``, ``doctor``,
``microbench``, ``config show``, ``memory estimate``): one help text, a checked file path, and
every ``--set`` item parsed when the command line is read, so a malformed one is refused before
anything runs.  A command adds a sentence saying what the config means to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

CONFIG_HELP = "A benchmark config (TOML) layered over the defaults."
SET_HELP = "Override one config value (repeatable), e.g. --set training.seq_length=4096."


def _checked_overrides(ctx: click.Context, param: click.Parameter, items: tuple[str, ...]) -> tuple[str, ...]:
    """Each ``--set`` item, checked to be ``section.key=value`` (the config loader reads them later)."""
    from tprimat.settings.config import ConfigError, parse_override

    for item in items:
        try:
            parse_override(item)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return items


def config_options(*, config_note: str = "", set_note: str = "") -> Callable[[F], F]:
    """``--config FILE`` (parameter ``config_file``, a str path) and ``--set`` (``overrides``).

    ``config_note``/``set_note``: a sentence after the shared help saying what they mean to
    this command.
    """

    def decorate(function: F) -> F:
        function = click.option(
            "--set",
            "overrides",
            multiple=True,
            metavar="SECTION.KEY=VALUE",
            callback=_checked_overrides,
            help=" ".join(filter(None, [SET_HELP, set_note])),
        )(function)
        return click.option(
            "--config",
            "config_file",
            type=click.Path(dir_okay=False, exists=True),
            metavar="FILE",
            help=" ".join(filter(None, [CONFIG_HELP, config_note])),
        )(function)

    return decorate
