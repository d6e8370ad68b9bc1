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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

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
        match = STEP_BYTES_RE.search(line)
        return match is not None and int(match["step"]) == self._last_step

    def feed(self, line: str, lineno: int) -> list[Event] | None:
        clean = strip_ansi(line)
        match = STEP_RE.search(clean)
        if match is None:
            return None
        step = int(match["step"])
        if self._last_step is not None and step == self._last_step:
            return []  # another rank's copy of the same step
        stamp = _TIMESTAMP_RE.search(clean[: match.start()])
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
        return IterationRecord(
            iteration=step,
            step_time_s=step_time,
            loss=parse_float(match["loss"]),
            grad_norm=parse_float(match["grad_norm"]) if match["grad_norm"] else None,
            covers_iterations=covers,
            mem_max_reserved_gib=parse_float(match["memory"]),
            timestamp=stamp,
            source=self.where(lineno),
            reported={
                "tokens_per_s_per_gpu": parse_float(match["tps"].replace(",", "")),
                "tflops_per_gpu": parse_float(match["tflops"].replace(",", "")),
                "mfu_percent": parse_float(match["mfu"]),
                "mem_max_reserved_percent": parse_float(match["memory_pct"]),
            },
        )
