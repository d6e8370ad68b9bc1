"""Step lines of Primus's TorchTitan engine (``backend: torchtitan``), the second engine Primus runs.

TorchTitan logs one line per logged step::

    [titan] 2026-02-24 19:46:19,145 - root - INFO - step:  5  loss:  7.07623  grad_norm: 46.5000
      memory: 66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%

(one line; Primus puts its own ``[date][rank-N/M][INFO] [file:line] :`` prefix in front).
``tps``, ``tflops`` and ``mfu`` are TorchTitan's own figures (tokens/s per GPU, its FLOP
count, its peak) and are kept as ``reported``.  ``memory`` is the allocator's peak reserved
memory (``torch.cuda.memory_stats()["reserved_bytes.all.peak"]``) in GiB.

TorchTitan prints no step time.  The line's logging timestamp (millisecond resolution) is the
wall clock at the end of the logged step, so the step time is the time between two logged
steps divided by the steps between them, as Megatron's ``elapsed time per iteration`` is the
time between its log lines; the first logged step has none.  Without millisecond timestamps
there is no step time, and ``tprimat parse`` says so.

Every rank may print the same step: the first line of each step is read, later copies are
skipped.  A step number lower than the last one starts a new stretch (a restart).

Every step line is a record, so its reading is kept to a few C-level calls: the step pattern is
tried only where ``step:`` occurs (its search, which starts at a word boundary, would otherwise
try every position of the line), and the figures of a plain ASCII line are converted at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tprimat.contract import IterationRecord
from tprimat.contract.records import ParseIssue
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import Event, LineError, parse_float

STEP_RE = re.compile(
    r"\bstep:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)\s+(?:grad_norm:\s*(?P<grad_norm>\S+)\s+)?"
    r"memory:\s*(?P<memory>[\d.]+)GiB\((?P<memory_pct>[\d.]+)%\)\s+tps:\s*(?P<tps>[\d,]+)\s+"
    r"tflops:\s*(?P<tflops>[\d,.]+)\s+mfu:\s*(?P<mfu>[\d.]+)%"
)
#: The same pattern over a line's bytes as they are (colour codes left in: such a line is read as text).
STEP_BYTES_RE = re.compile(STEP_RE.pattern.encode())
_TIMESTAMP_RE = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})[,.](\d{3,6})")


def _first_step(line: Any, pattern: re.Pattern[Any], key: Any) -> Any:
    """``pattern.search(line)`` for :data:`STEP_RE` over a text (``key`` ``"step:"``) or
    :data:`STEP_BYTES_RE` over bytes (``b"step:"``), tried only where ``key`` occurs: every match
    starts there (after a word boundary), so the first place it matches is where the search finds it."""
    position = line.find(key)
    while position != -1:
        match = pattern.match(line, position)  # its \b still sees the character before
        if match is not None:
            return match
        position = line.find(key, position + 1)
    return None


class TorchTitanSteps:
    """Turns TorchTitan step lines into iteration records, one stream at a time."""

    def __init__(self, where: Callable[[int], str]) -> None:  # where(lineno) -> "file:line"
        self.where = where
        self._last_step: int | None = None
        self._last_time: datetime | None = None

    def state(self) -> tuple[int | None, datetime | None]:
        """The last step read and its time: the next step's time is counted from them."""
        return self._last_step, self._last_time

    def resume(self, state: tuple[int | None, datetime | None]) -> None:
        """Go on from :meth:`state` (a later range of a file, a rotated file)."""
        self._last_step, self._last_time = state

    def repeats(self, line: bytes) -> bool:
        """Whether ``line`` is another rank's copy of the step just read, which :meth:`feed`
        would skip: told from its bytes, without decoding or reading it (in a log every rank
        prints to, most step lines are such copies)."""
        if self._last_step is None:
            return False
        match = _first_step(line, STEP_BYTES_RE, b"step:")
        return match is not None and int(match["step"]) == self._last_step

    def feed(self, line: str, lineno: int) -> list[Event] | None:
        clean = strip_ansi(line)
        match = _first_step(clean, STEP_RE, "step:")
        if match is None:
            return None
        step = int(match["step"])
        if self._last_step is not None and step == self._last_step:
            return []  # another rank's copy of the same step
        stamp = _TIMESTAMP_RE.search(clean, 0, match.start())  # in the text before the step
        time = None
        if stamp is not None:
            time = datetime.fromisoformat(f"{stamp[1].replace('T', ' ')}.{stamp[2]:0<6}")
        try:
            record = self._record(match, step, lineno, time, stamp[0] if stamp else None)
        except LineError as exc:
            return [ParseIssue(source=self.where(lineno), message=f"TorchTitan step line: {exc}; skipped")]
        self._last_step, self._last_time = step, time
        return [record]

    def _record(
        self, match: re.Match[str], step: int, lineno: int, time: datetime | None, stamp: str | None
    ) -> IterationRecord:
        step_time = None
        covers = 1
        previous = self._last_step
        if previous is not None and step > previous:
            covers = step - previous
            if time is not None and self._last_time is not None and time > self._last_time:
                step_time = (time - self._last_time).total_seconds() / covers
        loss, grad_norm, memory, tps, tflops, mfu, memory_pct = _figures(match)
        return IterationRecord(
            iteration=step,
            step_time_s=step_time,
            loss=loss,
            grad_norm=grad_norm,
            covers_iterations=covers,
            mem_max_reserved_gib=memory,
            timestamp=stamp,
            source=self.where(lineno),
            reported={
                "tokens_per_s_per_gpu": tps,
                "tflops_per_gpu": tflops,
                "mfu_percent": mfu,
                "mem_max_reserved_percent": memory_pct,
            },
        )


def _figures(match: re.Match[str]) -> tuple[float, float | None, float, float, float, float, float]:
    """A step line's loss, grad norm (None when not printed), memory, tps, tflops, mfu and memory
    percentage; a figure that is not a number is a :class:`LineError` (the first, in that order)."""
    _, loss, grad_norm, memory, memory_pct, tps, tflops, mfu = match.groups()
    tps, tflops = tps.replace(",", ""), tflops.replace(",", "")
    if match.string.isascii() and "_" not in loss and (grad_norm is None or "_" not in grad_norm):
        # What parse_float reads an ASCII text without "_" as: float's own reading.
        try:
            return (
                float(loss),
                float(grad_norm) if grad_norm else None,
                float(memory),
                float(tps),
                float(tflops),
                float(mfu),
                float(memory_pct),
            )
        except ValueError:
            pass  # read again below, for the error of the first figure that is not a number
    return (
        parse_float(loss),
        parse_float(grad_norm) if grad_norm else None,
        parse_float(memory),
        parse_float(tps),
        parse_float(tflops),
        parse_float(mfu),
        parse_float(memory_pct),
    )
