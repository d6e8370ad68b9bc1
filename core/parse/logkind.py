"""What a file that no log parser reads most likely is, and why it is not read.

``tprimat parse`` refuses a file in which no backend finds training iterations.  A bare
"not a training log?" leaves the user guessing, so :func:`describe_unreadable` names the
kind of file it most likely is (what each installed backend recognises of its own formats,
``BackendSpec.explain``, asked first; then a DLLogger JSON stream, a trace, a legacy
result, a crash before the first iteration), the evidence, and what to do instead.

Logs copied out of a terminal or a web page are sometimes hard-wrapped at a fixed width
(80 columns, or whatever the window was), splitting iteration lines mid-token.
:func:`wrap_width` finds the width and :func:`unwrap_lines` joins the pieces again so the
parsers can read such a log (:func:`tprimat.parse.detect.hard_wrapped_files` decides when);
a refusal of a wrapped file says what the joined lines are, or that the file looks wrapped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract.backend import Explainer
from tprimat.parse.stopreason import find_stop_reason, line_number_at, tail_text

#: Lines read from the start of a file to tell what it is.
HEAD_LINES = 400

_HF_TRAINER_RE = re.compile(r"\{'loss': [\d.eE+-]+, 'grad_norm'|\{'loss': [\d.eE+-]+, 'learning_rate'")
_MAXTEXT_RE = re.compile(r"completed step: \d+, seconds: [\d.]+")
_EXCEPTION_RE = re.compile(r"(?:^|[\]:]\s*)((?:[A-Za-z_][\w.]*)?(?:Error|Exception)): (.*)$")

#: Largest JSON document read whole to tell which kind it is.
JSON_MAX_BYTES = 64 * 1024 * 1024

#: Shortest line length taken for a hard wrap (shorter fixed widths are tables, not wraps).
MIN_WRAP_WIDTH = 60
#: Widest hard wrap looked for (terminals and web pages are narrower; logs are often wider).
MAX_WRAP_WIDTH = 512
#: Characters at the start of a log line that the next line repeats when it starts a new line.
RECORD_PREFIX = 16
#: Share of a file's first lines exactly as long as its longest that a refusal calls hard-wrapped.
WRAP_HINT_SHARE = 0.1


def read_head(path: Path, count: int = HEAD_LINES) -> list[str]:
    """The first ``count`` lines of ``path`` as text (undecodable bytes replaced)."""
    lines: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            lines.append(line.rstrip("\r\n"))
            if len(lines) >= count:
                break
    return lines


def wrap_width(lines: Sequence[str]) -> int | None:
    """The column width ``lines`` were hard-wrapped at, or None.

    A hard-wrapped text has no line longer than the width and several lines exactly that
    long (every piece of a split line but the last).  This alone could be a narrow log, so
    ``tprimat parse`` joins the wraps only when the file as it is has no iteration lines.
    """
    return width_of(Counter(len(line.rstrip("\r\n")) for line in lines if line.strip()))


def width_of(lengths: Counter[int]) -> int | None:
    """:func:`wrap_width` from how many non-blank lines there are of each length."""
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WRAP_WIDTH or lengths[width] < 3:
        return None
    return width


def unwrap_lines(lines: Iterable[str], width: int) -> Iterator[str]:
    """``lines`` with every line exactly ``width`` characters long joined to the one after it.

    A line whose length is a multiple of ``width`` was not cut at its end, yet looks like it
    was: the line after it is taken as a new line when it starts as the held line does (the
    same first :data:`RECORD_PREFIX` characters, not all blank: a log's lines share a prefix,
    a piece cut mid-line does not).
    """
    held: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if held and _starts_alike(held[0], line):
            yield "".join(held) + "\n"
            held = []
        held.append(line)
        if len(line) != width:
            yield "".join(held) + ("\n" if raw.endswith("\n") else "")
            held = []
    if held:
        yield "".join(held)


def _starts_alike(first: str, line: str) -> bool:
    prefix = first[:RECORD_PREFIX]
    return bool(prefix.strip()) and len(prefix) == RECORD_PREFIX and line.startswith(prefix)


def _json_kind(path: Path, head: Sequence[str]) -> str | None:
    text = "\n".join(head).lstrip()
    if not text.startswith(("{", "[")):
        return None
    if '"traceEvents"' in text:  # traces can be gigabytes: the key is enough
        return "a PyTorch profiler (Kineto) trace, not a training log: read it with `tprimat trace analyze`"
    try:
        if path.stat().st_size > JSON_MAX_BYTES:
            return "a JSON document, not a training log"
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, OSError):
        return None
    if isinstance(data, dict):
        if "traceEvents" in data:
            return "a PyTorch profiler (Kineto) trace, not a training log: read it with `tprimat trace analyze`"
        if "schema_version" in data:
            return "a tprimat result, not a log: compare it with `tprimat compare`"
        if "step_times" in data or "raw_step_times" in data:
            return "a result of the earlier tprimat scripts, not a log: convert it with `tprimat import-legacy`"
    return "a JSON document, not a training log"


def _dllogger(head: Sequence[str]) -> str | None:
    for number, line in enumerate(head, 1):
        if line.startswith("DLLL {"):
            return (
                f"a DLLogger JSON stream (line {number} starts with 'DLLL {{'): NVIDIA's DLLogger "
                "records metrics for many programs, and no installed backend recognises these "
                "records as training steps"
            )
    return None


def _line_kinds(head: Sequence[str]) -> str | None:
    for number, line in enumerate(head, 1):
        if _HF_TRAINER_RE.search(line):
            return (
                f"a Hugging Face Trainer log (line {number}: {{'loss': ...}}): its lines "
                "carry no step time, and no tprimat backend runs the HF Trainer"
            )
        if _MAXTEXT_RE.search(line):
            return f"a MaxText log (line {number}: 'completed step: ...'): no tprimat backend reads it"
    return None


@attrs.frozen(kw_only=True)
class _Ending:
    """How a file ends: its last lines, the exception it ends with, what stopped the run."""

    tail: list[str] = attrs.Factory(list)
    exception: str | None = None
    stopped: str | None = None


def _ending(path: Path) -> _Ending:
    try:
        start, tail = tail_text(path, 64 * 1024)
        # numbering the lines reads the whole file: only for a stop reason to report
        stopped = find_stop_reason(tail) and find_stop_reason(tail, line_number_at(path, start))
    except OSError:
        return _Ending()
    exception = None
    for line in reversed(tail):
        match = _EXCEPTION_RE.search(line.strip())
        if match and "Warning" not in match.group(1):
            exception = f"{match.group(1)}: {match.group(2)[:120]}"
            break
    return _Ending(tail=list(tail), exception=exception, stopped=stopped)


def _explained(head: Sequence[str], ending: _Ending, explainers: Sequence[Explainer]) -> str | None:
    """What a backend says the file is, with how it ends."""
    for explain in explainers:
        known = explain(head, ending.tail)
        if known is not None:
            if ending.exception is not None:
                return f"{known}; it ends with {ending.exception}"
            return known + (f"; the run was stopped by {ending.stopped}" if ending.stopped else "")
    return None


def _crash(ending: _Ending) -> str | None:
    """A run that failed or stopped before its first iteration line."""
    if ending.exception is not None:
        return f"the error output (stderr) of a run that failed: it ends with {ending.exception}"
    if ending.stopped is not None:
        return f"a log of a run stopped before its first iteration line: {ending.stopped}"
    return None


def _stopped(path: Path) -> str:
    found = _ending(path).stopped
    return f"; the run was stopped by {found}" if found else ""


def describe_unreadable(path: Path, head_lines: Sequence[str], registry: Any = None) -> str:
    """What ``path`` most likely is and why it is not read, as one sentence (no trailing dot).

    ``head_lines`` are the first lines of the file (:func:`read_head`); the end of the file is
    read here when the start does not tell.  The installed backends (``registry``) say what
    their own formats look like when no iteration was found (``BackendSpec.explain``) and
    recognise wrapped iteration lines (``BackendSpec.sniff``).
    """
    head = [line.rstrip("\r\n") for line in head_lines]
    if not any(line.strip() for line in head):
        return "an empty file"
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic.startswith(b"\x1f\x8b"):
        return (
            "a gzip-compressed file: decompress it first (a compressed trace, "
            "*.json.gz, is read by `tprimat trace analyze`)"
        )
    if "\x00" in "".join(head[:5]):
        return "a binary file, not text"
    kind = _json_kind(path, head)
    if kind is not None:
        return kind + _stopped(path)
    specs = [e.spec for e in registry.backends().values() if not e.conflict] if registry is not None else []
    width = wrap_width(head)
    if width is not None and width > MAX_WRAP_WIDTH:
        width = None
    joined = [line.rstrip("\r\n") for line in unwrap_lines(head, width)] if width is not None else head
    if width is not None and any(s.sniff is not None and s.sniff(joined, path.name) for s in specs):
        return (
            f"a log hard-wrapped at {width} columns (iteration lines split across lines) that has no "
            "iteration line tprimat can join again; parse the original log file, not a copy from a "
            "terminal or a web page"
        )
    ending = _ending(path)
    explainers = [s.explain for s in specs if s.explain is not None]
    known = _known_kind(head, ending, explainers)
    if known is None and width is not None:  # the head was read joined
        known = _known_kind(joined, attrs.evolve(ending, tail=list(unwrap_lines(ending.tail, width))), explainers)
        if known is not None:
            return f"{known} (hard-wrapped at {width} columns: its lines are read joined)"
    if known is not None:
        return known
    crash = _crash(ending)
    if crash is not None:
        return crash
    first = next(line.strip() for line in head if line.strip())
    readers = ", ".join(sorted({s.framework for s in specs if s.sniff is not None})) or "none installed"
    return (
        f"no line of a training log format an installed backend reads ({readers}) in "
        f"its first {len(head)} lines (first line: {first[:100]!r}){_wrap_hint(head, width)}"
    )


def _known_kind(head: Sequence[str], ending: _Ending, explainers: Sequence[Explainer]) -> str | None:
    """What a backend or a well-known format says ``head`` is, with how the file ends."""
    known = _explained(head, ending, explainers)
    if known is not None:
        return known
    for kind in (_dllogger(head), _line_kinds(head)):
        if kind is not None:
            return kind + (f"; the run was stopped by {ending.stopped}" if ending.stopped else "")
    return None


def _wrap_hint(head: Sequence[str], width: int | None) -> str:
    """Why the lines may be hard-wrapped and what to do, when many are exactly ``width`` long."""
    if width is None:
        return ""
    lines = [line for line in head if line.strip()]
    cut = sum(len(line) == width for line in lines)
    if cut < max(3, len(lines) * WRAP_HINT_SHARE):
        return ""
    return (
        f"; it looks hard-wrapped at {width} columns ({cut} of its {len(lines)} lines are exactly "
        f"{width} characters long, none longer) and its lines joined again are no known log either: "
        "parse the original log file, not a copy from a terminal or a web page"
    )
