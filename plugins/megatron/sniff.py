"""Recognising Megatron-family logs (``BackendSpec.sniff``): cheap regexes over a file's first lines.

Primus, ROCm Megatron-LM and upstream Megatron-LM print the same iteration
line; what tells them apart is elsewhere in the log: Primus's rank-tagged
prefix and memory fields, ROCm's version lines.  Each backend's sniffer looks
for the iteration line and its own signs, and answers with a confidence that
ranks the most specific match first (Primus over ROCm over upstream).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tprimat.contract.backend import LogMatch

_ITERATION_RE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*elapsed time per iteration")
_BRIDGE_STEP_RE = re.compile(r"Step Time\s*:.*MODEL_TFLOP")
_PRIMUS_RE = re.compile(r"\[rank-\d+/\d+\]|hip mem usage|rocm mem usage|primus", re.I)
#: A step line of Primus's TorchTitan engine (``step: N  loss: X ... tps: T``).
#: A TorchTitan step line (Primus's second engine), as the sniffer and the explainer tell it.
TORCHTITAN_STEP_RE = re.compile(r"\bstep:\s*\d+\s+loss:.*\btps:\s*[\d,]+")
_ROCM_RE = re.compile(r"\bmem usages:|ROCm version|HIP version|RCCL|MI[23]\d\dX?|rocm", re.I)


def _first(lines: Sequence[str], pattern: re.Pattern[str], source: str, needle: str | None = None) -> str | None:
    for number, line in enumerate(lines, 1):
        if (needle is None or needle in line) and pattern.search(line):
            return f"{source}:{number}"
    return None


def iteration_line(lines: Sequence[str], source: str) -> str | None:
    """Where the first Megatron iteration line is, or None."""
    return _first(lines, _ITERATION_RE, source, needle="iteration")


def primus_sign(lines: Sequence[str], source: str) -> str | None:
    return _first(lines, _PRIMUS_RE, source)


def rocm_sign(lines: Sequence[str], source: str) -> str | None:
    return _first(lines, _ROCM_RE, source)


def sniff_primus(lines: Sequence[str], source: str) -> LogMatch | None:
    """Primus's Megatron engine (iteration line + Primus signs), or its TorchTitan engine in a Primus/ROCm log."""
    where = iteration_line(lines, source)
    sign = primus_sign(lines, source) if where else None
    if where and sign:
        return LogMatch(confidence=0.95, evidence=f"Megatron iteration line at {where}, Primus log format at {sign}")
    titan = _first(lines, TORCHTITAN_STEP_RE, source, needle="tps:")
    sign = (primus_sign(lines, source) or rocm_sign(lines, source)) if titan else None
    if titan and sign:
        return LogMatch(confidence=0.95, evidence=f"TorchTitan step line at {titan} in a Primus/ROCm log ({sign})")
    return None


def sniff_rocm_megatron(lines: Sequence[str], source: str) -> LogMatch | None:
    where = iteration_line(lines, source)
    sign = rocm_sign(lines, source) if where else None
    if where and sign:
        return LogMatch(confidence=0.9, evidence=f"Megatron iteration line at {where}, ROCm at {sign}")
    return None


def sniff_megatron(lines: Sequence[str], source: str) -> LogMatch | None:
    bridge = _first(lines, _BRIDGE_STEP_RE, source, needle="Step Time")
    if bridge:
        return LogMatch(confidence=0.9, evidence=f"Megatron-Bridge step-time line at {bridge}")
    where = iteration_line(lines, source)
    if where:
        return LogMatch(confidence=0.6, evidence=f"Megatron iteration line at {where}, no ROCm or Primus sign")
    return None
