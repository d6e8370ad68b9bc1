"""What a file that no log parser reads most likely is, and why it is not read.

``tprimat parse`` refuses a file in which no backend finds training iterations.  A bare
"not a training log?" leaves the user guessing, so :func:`describe_unreadable` names the
kind of file it most likely is (a DLLogger JSON stream, a TorchTitan log, a trace, a legacy
result, a crash before the first iteration, ...), the evidence, and what to do instead.

Logs copied out of a terminal or a web page are sometimes hard-wrapped at a fixed width
(80 columns), splitting iteration lines mid-token.  :func:`wrap_width` detects that and
:func:`unwrap_lines` joins the pieces again so the parsers can read such a log.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tprimat.parse.stopreason import find_stop_reason, tail_lines

#: Lines read from the start of a file to tell what it is.
HEAD_LINES = 400

_MEGATRON_ITER_RE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*elapsed time per iteration")
_TORCHTITAN_RE = re.compile(r"\bstep:\s*\d+\s+loss:\s*\S+.*\btps:\s*[\d,]+")
_HF_TRAINER_RE = re.compile(r"\{'loss': [\d.eE+-]+, 'grad_norm'|\{'loss': [\d.eE+-]+, 'learning_rate'")
_MAXTEXT_RE = re.compile(r"completed step: \d+, seconds: [\d.]+")
_PROGRESS_BAR_RE = re.compile(r"Epoch \d+:\s+\d+%\|.*\d+/\d+ \[")
_PRIMUS_RE = re.compile(r"\[rank-\d+/\d+\]|primus", re.IGNORECASE)
_MEGATRON_START_RE = re.compile(
    r"\[before the start of training step\]|^-+ arguments -+$|"
    r"building GPT model|> building .* tokenizer"
)
_EXCEPTION_RE = re.compile(r"(?:^|[\]:]\s*)((?:[A-Za-z_][\w.]*)?(?:Error|Exception)): (.*)$")

#: Largest JSON document read whole to tell which kind it is.
JSON_MAX_BYTES = 64 * 1024 * 1024

#: Shortest line length taken for a hard wrap (shorter fixed widths are tables, not wraps).
MIN_WRAP_WIDTH = 60


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
    lengths = Counter(len(line.rstrip("\r\n")) for line in lines if line.strip())
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WRAP_WIDTH or lengths[width] < 3:
        return None
    return width


def unwrap_lines(lines: Iterable[str], width: int) -> Iterator[str]:
    """``lines`` with every line exactly ``width`` characters long joined to the one after it."""
    held: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        held.append(line)
        if len(line) != width:
            yield "".join(held) + ("\n" if raw.endswith("\n") else "")
            held = []
    if held:
        yield "".join(held)


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
                f"a DLLogger JSON stream (line {number} starts with 'DLLL {{'): the structured "
                "output of NeMo's and NVIDIA's DLLogger, not a console log; no tprimat backend "
                "reads it yet: parse the run's console log instead"
            )
    return None


def _line_kinds(head: Sequence[str]) -> str | None:
    for number, line in enumerate(head, 1):
        if _TORCHTITAN_RE.search(line):
            engine = "a Primus log of its TorchTitan engine" if _PRIMUS_RE.search(line) else "a TorchTitan log"
            return (
                f"{engine} (line {number}: 'step: ... loss: ... tps: ...') with no sign of Primus "
                "or ROCm: tprimat reads TorchTitan only as Primus's engine; if it is one, name "
                "the Primus backend with --backend (see `tprimat backends`)"
            )
        if _HF_TRAINER_RE.search(line):
            return (
                f"a Hugging Face Trainer log (line {number}: {{'loss': ...}}): its lines "
                "carry no step time, and no tprimat backend runs the HF Trainer"
            )
        if _MAXTEXT_RE.search(line):
            return f"a MaxText log (line {number}: 'completed step: ...'): no tprimat backend reads it"
        if _PROGRESS_BAR_RE.search(line):
            return (
                f"a PyTorch Lightning progress bar (NeMo 1.x; line {number}): it prints rates "
                "averaged by the bar, not the step time of each iteration, so it cannot be "
                "measured; configure NeMo to log train_step_timing per step (DLLogger or "
                "console)"
            )
    return None


def _crash(path: Path, head: Sequence[str]) -> str | None:
    try:
        first, tail = tail_lines(path, 64 * 1024)
    except OSError:
        return None
    exception = None
    for line in reversed(tail):
        match = _EXCEPTION_RE.search(line.strip())
        if match and "Warning" not in match.group(1):
            exception = f"{match.group(1)}: {match.group(2)[:120]}"
            break
    stopped = find_stop_reason(tail, first)
    started = any(_MEGATRON_START_RE.search(line) for line in head)
    primus_end = next((line for line in tail if "[EarlyStop]" in line or "[TimeToTrain]" in line), None)
    if primus_end is not None:
        return (
            "Primus's end-of-run summary lines ([EarlyStop]/[TimeToTrain]) without the "
            "iteration lines: an excerpt of a log, not the log; parse the full console log"
        )
    if exception is not None:
        where = (
            "a training log of a run that failed before its first iteration line"
            if started
            else "the error output (stderr) of a run that failed"
        )
        return f"{where}: it ends with {exception}"
    if stopped is not None:
        return f"a log of a run stopped before its first iteration line: {stopped}"
    if started:
        return (
            "a Megatron-LM start-up log that ends before the first iteration line (the run stopped or the log was cut)"
        )
    return None


def _stopped(path: Path) -> str:
    try:
        first, tail = tail_lines(path, 64 * 1024)
    except OSError:
        return ""
    found = find_stop_reason(tail, first)
    return f"; the run was stopped by {found}" if found else ""


def describe_unreadable(path: Path, head_lines: Sequence[str]) -> str:
    """What ``path`` most likely is and why it is not read, as one sentence (no trailing dot).

    ``head_lines`` are the first lines of the file (:func:`read_head`); the end of the file is
    read here when the start does not tell.
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
    for kind in (_json_kind(path, head), _dllogger(head), _line_kinds(head)):
        if kind is not None:
            return kind + _stopped(path)
    width = wrap_width(head)
    if width is not None and any(_MEGATRON_ITER_RE.search(x) for x in unwrap_lines(head, width)):
        return (
            f"a log hard-wrapped at {width} columns (iteration lines split across lines); "
            "parse it without --backend to have the wraps joined"
        )
    crash = _crash(path, head)
    if crash is not None:
        return crash
    first = next(line.strip() for line in head if line.strip())
    return (
        f"no line of a Primus, Megatron-LM, Megatron-Bridge or NeMo training log format in "
        f"its first {len(head)} lines (first line: {first[:100]!r})"
    )
