"""``--tag KEY=VALUE``: the user's labels of a run, recorded in its manifest, result and ``results.csv``."""

from __future__ import annotations

import re
from typing import Any

import click

_KEY = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def parse_tags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``("team=perf", "rack=B7")`` as ``{"team": "perf", "rack": "B7"}``; a bad one is a usage error (exit 2)."""
    tags: dict[str, str] = {}
    for value in values:
        key, equals, text = value.partition("=")
        if not equals or not _KEY.match(key):
            raise click.BadParameter(
                f"{value!r}: give KEY=VALUE with a KEY of letters, digits and _ . : / - (e.g. team=perf)",
                ctx=ctx,
                param=param,
            )
        if key in tags and tags[key] != text:
            raise click.BadParameter(f"{key} is given twice ({tags[key]!r} and {text!r})", ctx=ctx, param=param)
        tags[key] = text
    return tags


def tag_option(function: Any) -> Any:
    """The repeatable ``--tag`` option, parsed into a dict (parameter ``tags``)."""
    return click.option(
        "--tag",
        "tags",
        multiple=True,
        metavar="KEY=VALUE",
        callback=parse_tags,
        help="Label the run (in a suite: every run); repeatable, e.g. --tag team=perf --tag ticket=42. "
        "Recorded in the manifest, the result (run.tags) and `tprimat compare`'s results.csv.",
    )(function)
