"""Parser events as comparable text: every field of every event, a NaN equal to a NaN."""

from __future__ import annotations

from typing import Any

import attrs

from tprimat.contract.records import IterationRecord


def shown(event: Any) -> str:
    """``repr(event)``, a record's ``reported`` figures by name in sorted order: their order in a
    record means nothing, and a block's figures kept by name (``FigureColumns``) read in that order."""
    if type(event) is IterationRecord and event.reported:
        event = attrs.evolve(event, reported=dict(sorted(event.reported.items())))
    return repr(event)
