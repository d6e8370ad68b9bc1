"""What ended a run early, read from the end of its log: a watchdog, a straggler detector, a signal, OOM.

Training frameworks print why they stop.  A result keeps that reason (``caveats.stopped_by``)
so a short run is not mistaken for a complete one.  Only the last part of each file is read
(:data:`TAIL_BYTES`): these messages come at the end, and a log can be gigabytes long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tprimat.contract.logfile import count_lines

#: How much of the end of a file is searched for a stop reason.
TAIL_BYTES = 256 * 1024

#: What stopped a run that ran out of device memory (the start of its stop reason).
OUT_OF_MEMORY = "an out-of-memory error on the GPU"

_LINE_END = re.compile(rb"\r\n|\r|\n")
_LINE_END_TEXT = re.compile(r"\r\n|\r|\n")

#: (what stopped the run, pattern).  The first match in file order wins per pattern; the
#: reason reported is the earliest line that matches any of them.
STOP_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NCCL/RCCL watchdog: collective operation timeout", re.compile(r"Watchdog caught collective operation timeout")),
    (
        "NCCL/RCCL watchdog",
        re.compile(
            r"(?:failure|Exception \(either an error or timeout\)) "
            r"detected by watchdog"
        ),
    ),
    # nvidia-resiliency-ext's StragglerDetectionCallback with stop_if_detected; its warnings
    # ("STRAGGLER DETECTION WARNING: ...") do not stop the run and are not matched.
    ("straggler detector", re.compile(r"Detected stragglers\. Terminating training")),
    (
        "fault-tolerance heartbeat timeout",
        re.compile(
            r"[Hh]eartbeat.{0,60}timed out|"
            r"[Nn]o heartbeat received"
        ),
    ),
    (
        "the framework's own exit condition (exit interval or duration)",
        re.compile(r"exiting program (?:at iteration|after) "),
    ),
    ("early stop", re.compile(r"\[EarlyStop\]")),
    # PyTorch's allocator: torch.OutOfMemoryError (torch.cuda.OutOfMemoryError before 2.5),
    # "CUDA out of memory" on NVIDIA, "HIP out of memory" on ROCm.
    (OUT_OF_MEMORY, re.compile(r"OutOfMemoryError|\b(?:CUDA|HIP) out of memory")),
    ("preemption signal (graceful stop)", re.compile(r"Received signal \d+, initiating graceful stop")),
    (
        "signal",
        re.compile(
            r"Received (?:SIGTERM|SIGINT|SIGKILL|SIGUSR\d)\b|"
            r"Sending process \d+ closing signal (?:SIGTERM|SIGKILL)"
        ),
    ),
)


_ARGUMENT_RE = re.compile(r"\w \.{3,} \S")

#: Text that every line matching a stop pattern holds (one of them): the patterns are tried only
#: on lines that hold one, and on no line of a tail that holds none.
_STOP_WORDS = (
    "atchdog",
    "stragglers",
    "eartbeat",
    "exiting program",
    "[EarlyStop]",
    "Received",
    "closing signal",
    "OutOfMemoryError",
    " out of memory",
)


def tail_text(path: Path, size: int = TAIL_BYTES) -> tuple[int, list[str]]:
    """The last ``size`` bytes of ``path`` as whole lines, with the byte offset they start at.

    Lines end where the log readers end them (``\\n``, ``\\r\\n`` or a lone ``\\r``), so their
    numbers are the readers'.  Numbering them (:func:`line_number_at`) reads the whole file, so
    callers number the lines only when they found something to report.
    """
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        end = handle.tell()
        start = max(0, end - size)
        handle.seek(start)
        data = handle.read()
    if start:
        first = _LINE_END.search(data)  # the first line was cut: drop it
        start, data = (start + first.end(), data[first.end() :]) if first else (end, b"")
    lines = _LINE_END_TEXT.split(data.decode("utf-8", errors="replace"))
    if lines and lines[-1] == "":
        lines.pop()  # the text ends with a line end
    return start, lines


def line_number_at(path: Path, offset: int) -> int:
    """The 1-based number of the line that starts at byte ``offset`` of ``path``, as the readers count."""
    return 1 + count_lines(path, offset)


def find_stop_reason(lines: Iterable[str], first_lineno: int = 1, source: str = "") -> str | None:
    """The first stop reason in ``lines``: what stopped the run, the line and where it is."""
    lines = list(lines)
    text = "\n".join(lines)
    if not any(word in text for word in _STOP_WORDS):
        return None
    for offset, line in enumerate(lines):
        if not any(word in line for word in _STOP_WORDS) or _ARGUMENT_RE.search(line):
            continue  # an argument dump names the settings (straggler_*, *_timeout), not events
        for what, pattern in STOP_PATTERNS:
            if pattern.search(line):
                where = f"{source}:{first_lineno + offset}" if source else f"line {first_lineno + offset}"
                return f"{what} ({where}: {line.strip()[:160]})"
    return None
