"""Which backend wrote a log: every installed backend's sniffer is asked, the most confident answers.

Backends declare ``BackendSpec.sniff`` (see :mod:`tprimat.contract.backend`);
the core knows no log format itself.  Each file's first lines are shown to
every sniffer, first a short head and, when nobody recognises it, a long one
(a real log may print thousands of start-up lines before its first
iteration).  The highest confidence wins; two backends at the same
confidence are an error that names both, since guessing would pick a
platform.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from tprimat.contract.backend import SNIFF_LINES, LogMatch
from tprimat.contract.registry import Registry
from tprimat.parse.errors import ParseError
from tprimat.parse.logkind import unwrap_lines

#: How many lines are read when the short head (``SNIFF_LINES``) shows nothing known.
LONG_HEAD_LINES = 200_000


def _head(path: Path, limit: int, width: int | None = None) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = unwrap_lines(handle, width) if width else handle
            return list(itertools.islice(lines, limit))
    except OSError as exc:
        raise ParseError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _ask(registry: Registry, lines: Sequence[str], source: str) -> list[tuple[LogMatch, str]]:
    answers = []
    for name, entry in registry.backends().items():
        sniff = entry.spec.sniff
        if sniff is None or entry.conflict:
            continue
        try:
            match = sniff(lines, source)
        except Exception as exc:  # a broken sniffer must not hide the others
            raise ParseError(
                f"backend {name}'s log sniffer ({entry.distribution or entry.plugin_name}) failed on "
                f"{source}: {type(exc).__name__}: {exc}"
            ) from None
        if match is not None:
            answers.append((match, name))
    return sorted(answers, key=lambda item: -item[0].confidence)


def detect_backend(files: Sequence[Path], registry: Registry, wraps: dict[Path, int] | None = None) -> tuple[str, str]:
    """The backend whose log format ``files`` are in, and the evidence.

    ``wraps`` gives the width of files hard-wrapped at a fixed column (read joined).
    """
    wraps = wraps or {}
    for limit in (SNIFF_LINES, LONG_HEAD_LINES):
        cut = False  # whether any file is longer than what was read
        for path in files:
            lines = _head(path, limit, wraps.get(path))
            cut = cut or len(lines) >= limit
            answers = _ask(registry, lines, path.name)
            if not answers:
                continue
            best, name = answers[0]
            tied = [other for match, other in answers[1:] if match.confidence == best.confidence]
            if tied:
                raise ParseError(
                    f"{path}: recognised equally by backends {', '.join([name, *tied])} "
                    f"({best.evidence}); choose one with --backend"
                )
            return name, best.evidence
        if not cut:
            break  # every file was read whole: a longer head shows nothing more
    shown = ", ".join(str(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
    known = ", ".join(name for name, e in registry.backends().items() if e.spec.sniff is not None) or "none"
    raise ParseError(
        f"{shown}: no training iterations that an installed backend recognises (backends that read logs: {known}); "
        "give --backend if you know which framework wrote it"
    )
