"""Hand results to the exporters a user names: ``tprimat export`` and ``--report-to``.

An exporter is looked up in the registry and its requirements are checked
before anything is written, so a missing library is one line naming the extra
that brings it (exit code 2).  ``tprimat export`` reads results the way
``tprimat compare`` does (:func:`tprimat.compare.load.load_runs`).  After a run,
:func:`report_after_run` reads the result file just written and exports it; a
failure there is reported and never touches the result, which can be exported
again later with ``tprimat export``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract.exporter import ExporterSpec, ExportTarget, TrackerRun
from tprimat.errors import TprimatError


class ExportFailed(TprimatError):
    """A tracker refused or failed to take a run (the result itself is untouched)."""

    exit_code = 1


@attrs.frozen(kw_only=True)
class Destination:
    """One tracker to write to, where, and the exporter that writes it."""

    tracker: str
    target: ExportTarget
    spec: ExporterSpec


@attrs.frozen(kw_only=True)
class Exported:
    """One result written to one tracker, or why it was not."""

    source: Path
    tracker: str
    where: str | None = None
    error: str | None = None


def destination(registry: Any, tracker: str, target: ExportTarget) -> Destination:
    """The usable exporter called ``tracker``: known, claimed once, its libraries installed."""
    spec = registry.exporter(tracker)
    missing = spec.requires.missing()
    if missing:
        hint = spec.requires.hint or "install them"
        raise TprimatError(f"exporting to {tracker} needs {', '.join(missing)}, not installed here: {hint}")
    return Destination(tracker=tracker, target=target, spec=spec)


def parse_report_to(registry: Any, values: Iterable[str]) -> list[Destination]:
    """``--report-to TRACKER[=URI]`` values as destinations, checked before the run starts."""
    found = []
    for value in values:
        tracker, _, uri = value.partition("=")
        found.append(destination(registry, tracker.strip(), ExportTarget(uri=uri.strip() or None)))
    return found


def write(run: TrackerRun, to: Destination) -> str:
    """Export one laid-out run; where it went, or :class:`ExportFailed` / the exporter's own error."""
    try:
        return to.spec.export(run, to.target)
    except TprimatError:
        raise
    except ImportError as exc:
        hint = to.spec.requires.hint or "install it"
        raise TprimatError(f"exporting to {to.tracker}: {exc}: {hint}") from exc
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise ExportFailed(f"exporting {run.source} to {to.tracker} failed: {type(exc).__name__}: {text}") from exc


def export_results(paths: Sequence[str | Path], destinations: Sequence[Destination]) -> tuple[list[Exported], Any]:
    """Every result under ``paths`` written to every destination; a failure is recorded, the rest go on.

    Returns what was exported (or failed) and the loader's answer (for its skipped inputs).
    """
    from tprimat.compare.load import load_runs
    from tprimat.export.layout import tracker_run

    loaded = load_runs(paths)
    if not loaded.runs:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in loaded.skipped[:3])
        raise TprimatError(
            f"no tprimat results found in {', '.join(map(str, paths))}" + (f" ({reasons})" if reasons else "")
        )
    done = []
    for entry in loaded.runs:
        run = tracker_run(entry.result, entry.path)
        for to in destinations:
            try:
                done.append(Exported(source=entry.path, tracker=to.tracker, where=write(run, to)))
            except TprimatError as exc:
                done.append(Exported(source=entry.path, tracker=to.tracker, error=str(exc)))
    return done, loaded


def report_after_run(result_path: Path | None, destinations: Sequence[Destination], say: Callable[[str], None]) -> None:
    """Export the result just written at ``result_path``; report each outcome with ``say``.

    Never raises for a failed export: the run's outcome is its result, which an
    export only reads, and which ``tprimat export`` can export again later.
    """
    if not destinations or result_path is None or not result_path.exists():
        return
    from tprimat.export.layout import tracker_run
    from tprimat.result.schema import load_result

    try:
        run = tracker_run(load_result(result_path), result_path)
    except Exception as exc:
        say(f"tprimat: warning: --report-to: cannot read {result_path}: {exc}")
        return
    for to in destinations:
        try:
            say(f"exported to {to.tracker}: {write(run, to)}")
        except Exception as exc:
            say(
                f"tprimat: warning: --report-to {to.tracker}: {exc}; the result is kept at {result_path} "
                f"(export it later with: tprimat export {result_path} --to {to.tracker})"
            )
