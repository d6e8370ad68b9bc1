"""Gather a run's profiler traces into ``<run directory>/traces/``, one file per rank.

Every backend's profiler writes somewhere of its own (Megatron-LM:
``tensorboard/<host>_<pid>.<ts>.pt.trace.json``, Primus:
``…/tensorboard/primus-megatron-exp[<name>]-rank[<r>].<ts>.pt.trace.json.gz``,
NeMo: ``torch_profile/device/rank-<r>.json``, the torch backend:
``torch_profile/rank<r>.step<n>.pt.trace.json``).  After the run, the runner
moves the files its backend's :class:`~tprimat.contract.plans.ProfilePlan` announces
(``trace_globs``, relative to the run directory) into ``traces/`` under one
naming scheme, ``rank-<N>.pt.trace.json`` (``.gz`` when the file is gzip,
whatever its name said), so that ``tprimat trace analyze runs/<id>/traces/``
and ``tprimat compare`` find them the same way for every backend.

The rank comes from the trace itself (Kineto's ``distributedInfo``, written
before the events) and otherwise from the file name (``rank-3``, ``rank_3``,
``rank3``, ``rank[3]``).  Files of ranks outside ``ranks`` (NeMo's callback
profiles every rank) are left where they are.  A rank with several traces
(a torch profiler schedule that repeats) gets ``rank-<N>.<k>.pt.trace.json``
for the second and later ones, in the order the files were written.
Files are moved, not copied: a trace can be gigabytes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

TRACES_DIR = "traces"


@attrs.frozen(kw_only=True)
class CollectedTrace:
    source: str  # run-dir-relative path the profiler wrote
    path: str  # run-dir-relative path in traces/
    rank: int | None
    bytes: int


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def find_traces(run_dir: Path, globs: Iterable[str]) -> list[Path]:
    """Files matching the plan's globs below ``run_dir``, outside ``traces/``, oldest first."""
    run_dir = Path(run_dir)
    target = (run_dir / TRACES_DIR).resolve()
    found: set[Path] = set()
    for pattern in globs:
        for path in run_dir.glob(pattern):
            if path.is_file() and target not in path.resolve().parents:
                found.add(path)
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)))


def collect_traces(
    run_dir: Path, globs: Sequence[str], ranks: Sequence[int] | None = None
) -> tuple[list[CollectedTrace], list[str]]:
    """Move the run's traces into ``traces/`` named by rank; returns what was moved and notes."""
    run_dir = Path(run_dir)
    collected: list[CollectedTrace] = []
    notes: list[str] = []
    sources = find_traces(run_dir, globs)
    if not sources:
        return collected, notes
    target = run_dir / TRACES_DIR
    target.mkdir(exist_ok=True)
    from tprimat.trace.reader import trace_rank

    counts: dict[str, int] = {}
    skipped: list[str] = []
    wanted = set(ranks) if ranks is not None else None
    for source in sources:
        rank = trace_rank(source)
        relative = str(source.relative_to(run_dir))
        if wanted is not None and rank is not None and rank not in wanted:
            skipped.append(relative)
            continue
        stem = f"rank-{rank}" if rank is not None else "rank-unknown"
        counts[stem] = counts.get(stem, 0) + 1
        suffix = ".pt.trace.json.gz" if _is_gzip(source) else ".pt.trace.json"
        name = stem + (f".{counts[stem]}" if counts[stem] > 1 else "") + suffix
        destination = target / name
        while destination.exists():  # a file already there is never overwritten
            counts[stem] += 1
            destination = target / (f"{stem}.{counts[stem]}{suffix}")
        size = source.stat().st_size
        try:
            os.replace(source, destination)
        except OSError:
            shutil.move(str(source), str(destination))
        collected.append(
            CollectedTrace(source=relative, path=f"{TRACES_DIR}/{destination.name}", rank=rank, bytes=size)
        )
    if skipped:
        notes.append(
            f"{len(skipped)} trace(s) of ranks outside profile.ranks left in place: "
            + ", ".join(skipped[:4])
            + (" …" if len(skipped) > 4 else "")
        )
    unknown = [c.source for c in collected if c.rank is None]
    if unknown:
        notes.append("no rank found in the trace's distributedInfo or name of: " + ", ".join(unknown))
    return collected, notes
