"""``-j/--jobs``: one option for the worker processes of the commands that read large inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def jobs_option(reading: str) -> Callable[[Any], Any]:
    """The ``-j/--jobs`` option (default None: every CPU), its help saying what the processes read."""
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        help=f"Processes reading {reading} (default: every CPU; the result is the same).",
    )
