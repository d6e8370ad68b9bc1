"""Find and load the results a comparison is built from.

A path may be a result file or a directory.  A directory is searched
recursively for ``*.json`` files; run manifests, comparison reports and
anything under a ``traces/`` directory are not results and are passed over.
Every other file that does not load as a valid result is listed as skipped,
with the reason, and never used; so is a second file with a run id already
read (a copy must not count as a repeat).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

from tprimat.errors import TprimatError
from tprimat.result.schema import Result, ResultError, load_result

#: File names inside a run directory that are JSON but never results.
NOT_RESULTS = frozenset({"manifest.json", "report.json", "dataset.json"})


@attrs.frozen(kw_only=True)
class LoadedRun:
    path: Path
    result: Result


@attrs.frozen(kw_only=True)
class SkippedInput:
    path: Path
    reason: str


@attrs.frozen(kw_only=True)
class Loaded:
    runs: list[LoadedRun]
    skipped: list[SkippedInput]


def _candidates(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    found = []
    # result.json files first: when a copy of a run sits elsewhere, the canonical file is read.
    for candidate in sorted(path.rglob("*.json"), key=lambda p: (p.name != "result.json", p)):
        relative = candidate.relative_to(path)
        if candidate.name in NOT_RESULTS or "traces" in relative.parts[:-1]:
            continue
        if any(part.startswith(".") for part in relative.parts):
            continue
        found.append(candidate)
    return found


def ambiguous_reason(result: Result) -> str:
    """Why an ambiguous result is left out, with the inputs that would explain it."""
    caveats = result.caveats
    assert caveats is not None and caveats.ambiguous
    shown = "; ".join(caveats.candidates) or "no single input explains it"
    return (
        f"ambiguous, left out of the comparison: {caveats.ambiguous} (candidates: {shown}); "
        "state the true value, e.g. tprimat import-legacy --sequence-length N"
    )


def load_runs(paths: Iterable[str | Path]) -> Loaded:
    """Every valid result under ``paths`` (in the order given), and every file that was not one."""
    runs: list[LoadedRun] = []
    skipped: list[SkippedInput] = []
    seen: set[Path] = set()
    ids: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise TprimatError(f"{path}: no such file or directory")
        candidates = _candidates(path)
        if path.is_dir() and not candidates:
            skipped.append(SkippedInput(path=path, reason="directory holds no JSON files"))
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            try:
                result = load_result(candidate)
            except ResultError as exc:
                reason = str(exc)
                prefix = f"{candidate}: "
                skipped.append(
                    SkippedInput(path=candidate, reason=reason[len(prefix) :] if reason.startswith(prefix) else reason)
                )
                continue
            if result.caveats is not None and result.caveats.ambiguous:
                skipped.append(SkippedInput(path=candidate, reason=ambiguous_reason(result)))
                continue
            first = ids.get(result.run.id)
            if first is not None:
                skipped.append(
                    SkippedInput(
                        path=candidate,
                        reason=f"same run id {result.run.id!r} as {first}: a copy "
                        "of a run already read, not counted twice",
                    )
                )
                continue
            ids[result.run.id] = candidate
            runs.append(LoadedRun(path=candidate, result=result))
    return Loaded(runs=runs, skipped=skipped)
