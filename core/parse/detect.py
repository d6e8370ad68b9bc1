"""Which backend wrote a log: every installed backend's sniffer is asked, the most confident answers.

Backends declare ``BackendSpec.sniff`` (see :mod:`tprimat.contract.backend`);
the core knows no log format itself.  Each file's first lines are shown to
every sniffer, first a short head and, when nobody recognises it, a long one
(a real log may print thousands of start-up lines before its first
iteration).  The highest confidence wins; two backends at the same
confidence are an error that names both, since guessing would pick a
platform.

A log copied out of a terminal or a web page may be hard-wrapped at a fixed
width, its iteration lines split mid-token; a sniffer can still recognise the
first piece.  :func:`hard_wrapped_files` tells such a file from a log that is
merely narrow by reading the start of it both ways with the backend's parser:
the wraps are joined only when that reads more timed iterations.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tprimat.contract.backend import SNIFF_LINES, LogMatch
from tprimat.contract.logfile import LogFile
from tprimat.contract.records import IterationBlock, IterationRecord
from tprimat.contract.registry import Registry
from tprimat.parse.errors import ParseError
from tprimat.parse.logkind import MAX_WRAP_WIDTH, unwrap_lines, width_of

#: How many lines are read when the short head (``SNIFF_LINES``) shows nothing known.
LONG_HEAD_LINES = 200_000

#: Timed iterations that settle the comparison of a file read as it is and read joined.
WRAP_PROBE_RECORDS = 5


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


def hard_wrapped_files(files: Sequence[Path], registry: Registry, backend: str) -> dict[Path, int]:
    """The files among ``files`` whose lines are hard-wrapped, with the width: read them joined.

    A file counts as wrapped at width W (:func:`~tprimat.parse.logkind.width_of` its first
    :data:`LONG_HEAD_LINES` lines, at most :data:`MAX_WRAP_WIDTH`) when those lines, read by
    ``backend``'s parser with every W-character line joined to the next, give more timed
    iterations (then more iterations) than the same lines as they are.  A narrow log is never
    joined, since joining its lines loses iterations instead, and a file that reads
    :data:`WRAP_PROBE_RECORDS` timed iterations as it is is not looked at further.  The files
    of one run are captured the same way, so the others are looked at only when the first
    file is wrapped.
    """
    found: dict[Path, int] = {}
    for index, path in enumerate(files):
        try:
            width = _joined_width(path, registry, backend)
        except OSError as exc:
            raise ParseError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if width is not None:
            found[path] = width
        elif index == 0:
            break
    return found


def _joined_width(path: Path, registry: Registry, backend: str) -> int | None:
    if any(len(line.rstrip("\r\n")) > MAX_WRAP_WIDTH for line in _head(path, SNIFF_LINES)):
        return None  # a line longer than any wrap: not wrapped (most logs; no parse needed to tell)
    lengths: Counter[int] = Counter()

    def measured(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if line.strip():
                lengths[len(line.rstrip("\r\n"))] += 1
            yield line

    as_is = _iterations(measured(itertools.islice(LogFile(path), LONG_HEAD_LINES)), registry, backend, path.name)
    if as_is[0] >= WRAP_PROBE_RECORDS:
        return None
    width = width_of(lengths)
    if width is None or width > MAX_WRAP_WIDTH:
        return None
    lines = itertools.islice(LogFile(path), LONG_HEAD_LINES)
    joined = _iterations(unwrap_lines(lines, width), registry, backend, path.name)
    return width if joined > as_is else None


def _iterations(lines: Iterable[str], registry: Registry, backend: str, source: str) -> tuple[int, int]:
    """(timed iterations, iterations) ``backend`` reads from ``lines``, up to :data:`WRAP_PROBE_RECORDS` timed."""
    timed = records = 0
    for event in registry.parse_metrics(backend, lines=lines, source=source):
        if isinstance(event, IterationRecord):
            records += 1
            timed += event.step_time_s is not None
            if timed >= WRAP_PROBE_RECORDS:
                break
        elif isinstance(event, IterationBlock):
            steps = event.column("step_time_s")
            wanted = WRAP_PROBE_RECORDS - timed  # its records counted one by one, up to the one that ends the count
            timed_places = list(itertools.islice((i for i, step in enumerate(steps) if step is not None), wanted))
            if len(timed_places) < wanted:
                records += len(steps)
                timed += len(timed_places)
            else:
                return WRAP_PROBE_RECORDS, records + timed_places[-1] + 1
    return timed, records
