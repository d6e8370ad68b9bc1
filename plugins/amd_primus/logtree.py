"""Primus's log layout: one ``rank-N`` directory per rank, one file per log level, rotated.

``BackendSpec.find_logs`` of ``amd_primus``: given a directory (an experiment's
``logs/pre_trainer/``, or anything above it), the lowest-level log family of
every ``rank-N`` directory below it, rotated files oldest first.
``BackendSpec.log_stream``: the files of one family in one directory are one
process's log, cut by rotation, and are read as one stream.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_PRIMUS_LEVELS = ("debug", "info", "warning", "error")
_ROTATED_NUMBER_RE = re.compile(r"^(?P<level>[a-z]+)\.log\.(?P<n>\d+)$")
_ROTATED_STAMP_RE = re.compile(r"^(?P<level>[a-z]+)\.(?P<stamp>.+)\.log$")


def _rotation_key(path: Path) -> tuple[int, Any, str]:
    """Oldest first: ``debug.log.3``, ``debug.log.1``, ``debug.<stamp>.log``, then ``debug.log``."""
    name = path.name
    numbered = _ROTATED_NUMBER_RE.match(name)
    if numbered:
        return (0, -int(numbered.group("n")), name)
    if name.count(".") >= 2 and _ROTATED_STAMP_RE.match(name):
        return (1, name, name)
    return (2, name, name)


def _family(name: str) -> str | None:
    """The log level whose family a file name belongs to (``debug.log.2`` -> ``debug``), or None."""
    level = name.split(".", 1)[0]
    if level not in _PRIMUS_LEVELS:
        return None
    if name == f"{level}.log" or _ROTATED_NUMBER_RE.match(name) or _ROTATED_STAMP_RE.match(name):
        return level
    return None


def log_stream(path: Path) -> tuple[str, str] | None:
    """The stream of a Primus log file: its directory and log level (None: not a Primus log name)."""
    family = _family(path.name)
    return None if family is None else (str(path.parent), family)


def _primus_rank_files(rank_dir: Path) -> list[Path]:
    """The lowest-level log family of one ``rank-N`` directory, rotated files oldest first.

    Primus writes each level and above into its own file, so ``debug.log``
    holds everything ``info.log`` does: reading one family is enough.
    """
    for level in _PRIMUS_LEVELS:
        family = [p for p in rank_dir.iterdir() if p.is_file() and _family(p.name) == level]
        if family:
            return sorted(family, key=_rotation_key)
    return []


def _rank_number(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return 1 << 30


def find_logs(directory: Path) -> tuple[list[Path], str] | None:
    """The log files of a Primus per-rank tree below ``directory`` and a note, or None."""
    rank_dirs = sorted(
        (p for p in directory.rglob("rank-*") if p.is_dir() and p.name[5:].isdigit()),
        key=lambda p: (str(p.parent), _rank_number(p)),
    )
    chosen: list[Path] = []
    for rank_dir in rank_dirs:
        chosen.extend(_primus_rank_files(rank_dir))
    if not chosen:
        return None
    families = sorted({p.name.split(".")[0] for p in chosen})
    return chosen, (
        f"Primus per-rank logs, {len(rank_dirs)} rank directories, "
        f"{len(chosen)} files ({'/'.join(families)}.log and rotations)"
    )
