"""Upstream Megatron-LM logs across versions, and Megatron-Bridge's.

Megatron-LM's line changed over the years: no timestamp and no throughput
before 2024, ``[YYYY-MM-DD HH:MM:SS]`` and ``throughput per GPU
(TFLOP/s/GPU)`` since, microseconds in the timestamp since 2025, optional
``skipped samples``, energy and MoE segments, and no ``lm loss`` when every
iteration of the interval was skipped.  The shared parser reads all of them
(segments by name, not by position).  Megatron-Bridge prints the same line,
plus its own ``Step Time : 9.09s GPU utilization: 663.5MODEL_TFLOP/s/GPU``
before it, which is kept as reported figures of the next iteration line: the GPU utilization
is the framework's own TFLOP/s per GPU (``reported.tflops_per_gpu``, as Megatron-LM's
``throughput per GPU``; the iteration line's own figure wins where it prints one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tprimat.plugins.megatron.logparse import MegatronLogParser
from tprimat.plugins.megatron_core.lines import Event
from tprimat.plugins.megatron_core.stream import iter_events

_STEP_TIME_RE = re.compile(r"Step Time\s*:\s*([0-9.]+)\s*s\b(?:.*?GPU utilization:\s*([0-9.]+)\s*MODEL_TFLOP/s/GPU)?")


class MegatronLMLogParser(MegatronLogParser):
    name = "megatron-lm"
    triggers = (*MegatronLogParser.triggers, "Step Time")
    running_triggers = ("iteration", "Step Time")

    def extra_line(self, line: str, lineno: int) -> list[Event] | None:
        if "Step Time" in line:
            match = _STEP_TIME_RE.search(line)
            if match is not None:
                self._pending_reported["bridge_step_time_s"] = float(match.group(1))
                if match.group(2) is not None:
                    self._pending_reported["tflops_per_gpu"] = float(match.group(2))
                return []
        return super().extra_line(line, lineno)


def parse_megatron(lines: Iterable[str], source: str) -> Iterator[Event]:
    """Events from a Megatron-LM or Megatron-Bridge log."""
    return iter_events(MegatronLMLogParser(source), lines)
