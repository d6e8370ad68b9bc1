"""What a Megatron-family run really ran with: the framework's argument dump against the plan.

Megatron-LM prints every argument at start-up, and Primus logs the same dump (and
its own list of final arguments); :mod:`~tprimat.plugins.megatron.argdump` reads
them and :mod:`~tprimat.plugins.megatron.argcheck` compares them with what tprimat
rendered.  This module adapts both to the plugin contract
(:class:`~tprimat.contract.plans.SettingsReadback`) and, for a log read without
its plan, gives the shared settings from the printed values alone.  The readers
are imported when used, so declaring a backend stays cheap.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from tprimat.contract.readback import Disagreement, SettingsReadback, StatedSettings


def read(lines: Sequence[str], source: str) -> StatedSettings | None:
    """The arguments the first lines of a log print, or None when they print none."""
    from tprimat.plugins.megatron.argdump import read_arguments

    stated = read_arguments(lines, source)
    if not stated:
        return None
    notes = stated.notes if stated.complete else (*stated.notes, f"the argument list at {stated.source} is cut off")
    return StatedSettings(
        values=dict(stated),
        source=stated.source,
        form=stated.form,
        notes=tuple(notes),
        where={name: stated.where(name) for name in stated},
    )


def compare(rendered: Mapping[str, Any], stated: StatedSettings) -> list[Disagreement]:
    """Every rendered setting the framework printed with another meaning."""
    from tprimat.plugins.megatron.argcheck import disagreements

    return [
        Disagreement(
            setting=d.setting,
            planned=d.planned,
            stated=d.stated if not d.printed_as else f"{d.stated} (as {d.printed_as})",
            source=stated.where.get(d.printed_as or d.setting, stated.source),
        )
        for d in disagreements(rendered, stated.values)
    ]


def typed(text: str) -> Any:
    """A printed value as Python reads it (``True``, ``1e-05``, ``None``, ``AttnBackend.flash`` -> ``"flash"``)."""
    if text.startswith("AttnBackend."):
        return text.partition(".")[2]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def shared(stated: StatedSettings) -> dict[str, Any]:
    """The shared settings the printed arguments give (a log read without its plan)."""
    from tprimat.plugins.megatron.framework import shared_values

    return shared_values({name: typed(text) for name, text in stated.values.items()})


READBACK = SettingsReadback(read=read, disagreements=compare, shared=shared)
