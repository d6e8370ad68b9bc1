"""Memory figures that training logs print, read line by line into per-rank peaks.

Small, independent extractors, one per line shape, so they can be called on
any log without running the iteration parser:

* Megatron-LM's own prediction: ``Theoretical memory footprints: weight and
  optimizer=46038.57 MB[, activation=… MB, total=… MB]`` (MB there is 2**20 bytes);
* Megatron-LM's allocator report: ``[Rank 3] (after 100 iterations) memory (MB)
  | allocated: … | max allocated: … | reserved: … | max reserved: …`` (MiB);
* Primus: ``hip mem usage/free/total/usage_ratio: 153.81GB/102.17GB/255.98GB/60.09%``
  (the device's used memory from ``torch.cuda.mem_get_info``, 2**30 bytes labelled GB);
* NeMo 2's memory callback in the step line: ``max_memory_reserved: 64286097408 |
  max_memory_allocated: 62777982976`` (bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from tprimat.contract.records import RankPeak

MIB_PER_GIB = 1024.0
GIB = 2**30

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[(?:\d+;)*\d*m")
_THEORETICAL_RE = re.compile(
    r"Theoretical memory footprints: weight and optimizer=([\d.]+) MB"
    r"(?:, activation=([\d.]+) MB)?(?:, total=([\d.]+) MB)?"
)
_ALLOCATOR_RE = re.compile(
    r"(?:\[Rank (\d+)\] )?\((?:after (\d+) iterations?|[^)]*)\) memory \(MB\) \| allocated: ([\d.]+) \| "
    r"max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)"
)
_HIP_RE = re.compile(r"hip mem usage/free/total/usage_ratio: ([\d.]+)GB/([\d.]+)GB/([\d.]+)GB/([\d.]+)%")
_PRIMUS_RANK_RE = re.compile(r"\[rank-(\d+)/\d+\]")
_NEMO_RE = re.compile(r"max_memory_(reserved|allocated): (\d+)")


@attrs.frozen(kw_only=True)
class TheoreticalFootprint:
    """Megatron-LM's printed prediction, in MiB (it labels them MB)."""

    weight_and_optimizer_mib: float
    activation_mib: float | None = None
    total_mib: float | None = None


@attrs.frozen(kw_only=True)
class LogMemory:
    """What a log says about memory: the framework's prediction and per-rank peaks."""

    theoretical: TheoreticalFootprint | None = None
    ranks: tuple[RankPeak, ...] = ()

    def peak(self, quantity: str = "max_allocated_gib") -> RankPeak | None:
        """The rank with the largest ``quantity`` (None when no rank reported it)."""
        reported = [r for r in self.ranks if getattr(r, quantity) is not None]
        return max(reported, key=lambda r: getattr(r, quantity), default=None)


def parse_theoretical(line: str) -> TheoreticalFootprint | None:
    """Megatron-LM's ``Theoretical memory footprints`` line, or None."""
    match = _THEORETICAL_RE.search(line)
    if match is None:
        return None
    weights, activation, total = match.groups()
    return TheoreticalFootprint(
        weight_and_optimizer_mib=float(weights),
        activation_mib=None if activation is None else float(activation),
        total_mib=None if total is None else float(total),
    )


def parse_allocator(line: str) -> RankPeak | None:
    """Megatron-LM's ``memory (MB) | allocated: …`` report, or None."""
    match = _ALLOCATOR_RE.search(_ANSI_RE.sub("", line))
    if match is None:
        return None
    rank, _, allocated, max_allocated, _reserved, max_reserved = match.groups()
    return RankPeak(
        rank=None if rank is None else int(rank),
        allocated_gib=float(allocated) / MIB_PER_GIB,
        max_allocated_gib=float(max_allocated) / MIB_PER_GIB,
        max_reserved_gib=float(max_reserved) / MIB_PER_GIB,
    )


def parse_hip_usage(line: str) -> RankPeak | None:
    """Primus's ``hip mem usage/free/total/usage_ratio`` field, or None."""
    clean = _ANSI_RE.sub("", line)
    match = _HIP_RE.search(clean)
    if match is None:
        return None
    used, _free, total, _ratio = match.groups()
    rank = _PRIMUS_RANK_RE.search(clean)
    return RankPeak(
        rank=None if rank is None else int(rank.group(1)),
        device_used_gib=float(used),
        device_total_gib=float(total),
    )


def parse_nemo_memory(line: str) -> RankPeak | None:
    """NeMo 2's ``max_memory_reserved`` / ``max_memory_allocated`` step-line fields, or None."""
    found = dict(_NEMO_RE.findall(line))
    if not found:
        return None
    allocated, reserved = found.get("allocated"), found.get("reserved")
    return RankPeak(
        rank=None,
        max_allocated_gib=None if allocated is None else int(allocated) / GIB,
        max_reserved_gib=None if reserved is None else int(reserved) / GIB,
    )


_EXTRACTORS = (parse_allocator, parse_hip_usage, parse_nemo_memory)


def _larger(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _merge(old: RankPeak, new: RankPeak) -> RankPeak:
    return RankPeak(
        rank=old.rank,
        max_allocated_gib=_larger(old.max_allocated_gib, new.max_allocated_gib),
        max_reserved_gib=_larger(old.max_reserved_gib, new.max_reserved_gib),
        allocated_gib=new.allocated_gib if new.allocated_gib is not None else old.allocated_gib,
        device_used_gib=_larger(old.device_used_gib, new.device_used_gib),
        device_total_gib=new.device_total_gib if new.device_total_gib is not None else old.device_total_gib,
    )


_CANDIDATE_RE = re.compile(rb"mem(?:ory| usage)")
_BLOCK_BYTES = 1 << 24


def _candidate_lines(block: bytes) -> Iterator[str]:
    """The lines of ``block`` (whole lines) that mention memory, decoded."""
    end = -1
    for match in _CANDIDATE_RE.finditer(block):
        if match.start() < end:
            continue  # another mention on a line already yielded
        start = block.rfind(b"\n", 0, match.start()) + 1
        end = block.find(b"\n", match.end())
        end = len(block) if end < 0 else end
        yield block[start:end].decode("utf-8", errors="replace")


def scan_memory_file(path: str | Path) -> LogMemory:
    """:func:`scan_memory` over a log file, reading it in large blocks and decoding only the
    lines that can hold a memory figure (a log of gigabytes costs one search per block)."""

    def candidates() -> Iterator[str]:
        with open(path, "rb") as handle:
            tail = b""
            while block := handle.read(_BLOCK_BYTES):
                block = tail + block
                cut = block.rfind(b"\n") + 1
                block, tail = block[:cut], block[cut:]
                yield from _candidate_lines(block)
            yield from _candidate_lines(tail)

    return scan_memory(candidates())


def scan_memory(lines: Iterable[str]) -> LogMemory:
    """Every memory figure in ``lines``: the last theoretical footprint and each rank's peaks."""
    theoretical = None
    ranks: dict[int | None, RankPeak] = {}
    for line in lines:
        if "memory" not in line and "mem usage" not in line:
            continue
        footprint = parse_theoretical(line)
        if footprint is not None:
            theoretical = footprint
            continue
        for extract in _EXTRACTORS:
            peak = extract(line)
            if peak is not None:
                old = ranks.get(peak.rank)
                ranks[peak.rank] = peak if old is None else _merge(old, peak)
                break
    ordered = sorted(ranks.values(), key=lambda r: -1 if r.rank is None else r.rank)
    return LogMemory(theoretical=theoretical, ranks=tuple(ordered))


def memory_peaks(path: Path) -> list[RankPeak]:
    """``BackendSpec.memory_peaks`` of the Megatron family and NeMo: each rank's peaks in a log file."""
    return list(scan_memory_file(path).ranks)
