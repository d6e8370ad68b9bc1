"""Framework settings across compared runs: the shared vocabulary, and what the frameworks said.

Runs of different frameworks are compared under the shared names of
:mod:`tprimat.settings.shared`.  A ``math`` setting that differs between runs
means they computed different steps (one masked the loss at document
boundaries, another used another norm epsilon): ``tprimat compare`` refuses
them, naming the setting, unless ``--allow-mismatch`` is given.  So does a run
whose framework stated a rendered setting with another value than the plan
(:class:`~tprimat.result.schema.SettingDisagreement`).  ``speed`` settings may
differ; the report lists them.

A run without a framework record (a log parsed alone, a result from before
these were recorded) or with a value it could not know (null) is not counted
as different; the report says which settings it could not check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from tprimat.compare.group import Run
from tprimat.settings.shared import SHARED_SETTINGS


@attrs.frozen(kw_only=True)
class SharedRow:
    """One shared setting across the runs (None: not known for that run)."""

    name: str
    kind: str
    values: list[Any]


@attrs.frozen(kw_only=True)
class StatedDisagreement:
    """A run whose framework stated a rendered setting with another value."""

    run: str  # R1, R2, ...
    setting: str
    planned: Any
    stated: Any
    source: str | None


def shared_rows(runs: Sequence[Run]) -> list[SharedRow]:
    """Every shared setting whose known values are not all the same, in vocabulary order."""
    rows = []
    for name, setting in SHARED_SETTINGS.items():
        values = [_shared(run, name) for run in runs]
        known = {repr(value) for value in values if value is not None}
        if len(known) > 1:
            rows.append(SharedRow(name=name, kind=setting.kind, values=values))
    return rows


def unknown_math(runs: Sequence[Run]) -> list[str]:
    """Runs and math settings that could not be checked (no record, or a null value)."""
    lines = []
    for run in runs:
        framework = run.result.config.framework
        if framework is None:
            lines.append(f"{run.key}: no framework settings recorded")
            continue
        missing = [name for name, s in SHARED_SETTINGS.items() if s.kind == "math" and name not in framework.shared]
        if missing:
            lines.append(f"{run.key}: {', '.join(missing)} not recorded")
    return lines


def disagreements(runs: Sequence[Run]) -> list[StatedDisagreement]:
    """Every rendered setting a run's framework stated with another value."""
    found = []
    for run in runs:
        framework = run.result.config.framework
        for d in framework.disagreements if framework is not None else []:
            found.append(
                StatedDisagreement(run=run.key, setting=d.setting, planned=d.planned, stated=d.stated, source=d.source)
            )
    return found


def refusal(runs: Sequence[Run]) -> tuple[str, list[tuple[str, list[Any]]]] | None:
    """Why these runs may not stand side by side at the framework level, and each differing
    setting's values by run; None: they may."""
    math = [row for row in shared_rows(runs) if row.kind == "math"]
    stated = disagreements(runs)
    if not math and not stated:
        return None
    reasons = []
    table: list[tuple[str, list[Any]]] = []
    if math:
        reasons.append(
            "the runs' frameworks compute different steps: " + ", ".join(row.name for row in math) + " differ"
        )
        table += [(row.name, row.values) for row in math]
    if stated:
        reasons.append(
            "a framework ran with other settings than its plan: "
            + ", ".join(f"{d.run} {d.setting} (planned {_text(d.planned)}, ran {_text(d.stated)})" for d in stated)
        )
        for d in stated:
            values = [d.stated if run.key == d.run else None for run in runs]
            table.append((f"{d.setting} as run (planned {_text(d.planned)})", values))
    return "; ".join(reasons), table


def _shared(run: Run, name: str) -> Any:
    framework = run.result.config.framework
    return None if framework is None else framework.shared.get(name)


def _text(value: Any) -> str:
    return "–" if value is None else str(value)
