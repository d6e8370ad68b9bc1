"""The result's record of a run's framework settings: planned, kept, and what the framework said.

A launch plan carries every framework setting (:class:`~tprimat.contract.plans.FrameworkSettings`).
After the run, and when ``tprimat parse`` reads a log, the backend's
:class:`~tprimat.contract.plans.SettingsReadback` reads what the framework itself
printed at start-up; every rendered setting it states with another value is a
disagreement, recorded here and refused by ``tprimat compare``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from tprimat.contract.backend import STATED_LINES
from tprimat.contract.plans import FrameworkSettings
from tprimat.contract.readback import SettingsReadback, StatedSettings
from tprimat.result.schema import FrameworkRecord, SettingDisagreement


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it: tuples as lists, paths as text, enums by name."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.name
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def read_stated(files: Sequence[Path], readback: SettingsReadback | None) -> StatedSettings | None:
    """What the framework states in the first of ``files`` that has a statement (None: none does)."""
    if readback is None:
        return None
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = list(itertools.islice(handle, STATED_LINES))
        except OSError:
            continue
        stated = readback.read(head, path.name)
        if stated is not None:
            return stated
    return None


def framework_record(
    planned: FrameworkSettings | None,
    stated: StatedSettings | None,
    readback: SettingsReadback | None,
    *,
    framework: str,
    plan_digest: str | None = None,
) -> FrameworkRecord | None:
    """The record of one run (None when neither a plan nor a statement is known).

    ``framework`` names it when there is no plan (a log parsed alone); the shared
    vocabulary then comes from the statement, as far as the backend can read it.
    """
    if planned is None and stated is None:
        return None
    disagreements: list[SettingDisagreement] = []
    if planned is not None and stated is not None and readback is not None:
        disagreements = [
            SettingDisagreement(
                setting=d.setting, planned=jsonable(d.planned), stated=jsonable(d.stated), source=d.source
            )
            for d in readback.disagreements(planned.rendered, stated)
        ]
    shared: dict[str, Any] = dict(planned.shared) if planned is not None else {}
    if stated is not None and readback is not None and readback.shared is not None:
        ran = readback.shared(stated)
        # the plan's values stand; what it could not know (null) is what the framework ran with
        shared = ran if planned is None else {k: ran.get(k) if v is None else v for k, v in shared.items()}
    notes = list(planned.notes) if planned is not None else []
    if stated is not None:
        notes.extend(stated.notes)
    return FrameworkRecord(
        framework=planned.framework if planned is not None else framework,
        plan_digest=plan_digest,
        rendered=jsonable(planned.rendered) if planned is not None else {},
        kept=jsonable(planned.kept) if planned is not None else {},
        kept_from=planned.kept_from if planned is not None else None,
        shared=jsonable(shared),
        notes=notes,
        stated=jsonable(stated.values) if stated is not None else {},
        stated_from=f"{stated.form} at {stated.source}" if stated is not None else None,
        disagreements=disagreements,
    )
