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

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract import LogFile
from tprimat.contract.records import RankPeak
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import LineError, parse_units

MIB_PER_GIB = 1024.0
GIB = 2**30

_THEORETICAL_RE = re.compile(
    r"Theoretical memory footprints: weight and optimizer=([\d.]+) MB"
    r"(?:, activation=([\d.]+) MB)?(?:, total=([\d.]+) MB)?"
)
_ALLOCATOR_RE = re.compile(r"(?:\[Rank (\d+)\] )?\(([^)]*)\) memory \(MB\)\s*\|(.*)")
_AFTER_RE = re.compile(r"after (\d+) iterations?")
#: Megatron's names for the allocator's figures; PyTorch before 1.4 called reserved memory "cached".
ALLOCATOR_NAMES = {
    "allocated": "allocated",
    "max allocated": "max_allocated",
    "reserved": "reserved",
    "max reserved": "max_reserved",
    "cached": "reserved",
    "max cached": "max_reserved",
}
#: Primus's device-memory field in its iteration lines (``<field>: 153.81GB/102.17GB/255.98GB/60.09%``),
#: read by :func:`read_hip_usage`.
HIP_FIELD = "hip mem usage/free/total/usage_ratio"
# The field and its value as Primus prints it (the value in group 1), to find it in a line.
_HIP_RE = re.compile(re.escape(HIP_FIELD) + r": ((?:[\d.]+GB/){3}[\d.]+%)")
_PRIMUS_RANK_RE = re.compile(r"\[rank-(\d+)/\d+\]")
# The same tag with the colour codes Primus puts around the rank (as in ``[\x1b[36mrank-7/8\x1b[0m]``).
_PRIMUS_RANK_TAG_RE = re.compile(r"\[(?:\x1b?\[[\d;]*m)*rank-(\d+)/\d+(?:\x1b?\[[\d;]*m)*\]")
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


@attrs.frozen(kw_only=True)
class AllocatorReport:
    """Megatron-LM's ``[Rank r] (after N iterations) memory (MB) | allocated: … | …`` line."""

    rank: int | None  # None when the line does not say
    iteration: int | None  # N of "(after N iterations)"; None for another label
    mib: dict[str, float]  # the figures the line holds, by ALLOCATOR_NAMES value, in MiB (it says MB)
    problem: str | None = None  # the first figure that is not a number ("allocated: not a number: 'x'")


def read_allocator(line: str) -> AllocatorReport | None:
    """The allocator report in ``line`` as it is (colour codes are the caller's), or None.

    The one reader of these lines: the log parser's memory records and the per-rank peaks
    both come from it, so both read the same figures (also the older ``cached`` names).
    """
    match = _ALLOCATOR_RE.search(line)
    if match is None:
        return None
    rank, label, rest = match.groups()
    after = _AFTER_RE.fullmatch(label)
    mib: dict[str, float] = {}
    problem = None
    for segment in rest.split("|"):
        key, colon, value = segment.partition(":")
        name = ALLOCATOR_NAMES.get(key.strip())
        if not colon or name is None:
            continue
        text = value.strip()
        try:
            if not text.isascii() or "_" in text:
                raise ValueError(text)
            mib[name] = float(text)
        except ValueError:
            problem = f"{key.strip()}: not a number: {text[:40]!r}"
            break
    return AllocatorReport(
        rank=None if rank is None else int(rank),
        iteration=int(after.group(1)) if after else None,
        mib=mib,
        problem=problem,
    )


def parse_allocator(line: str) -> RankPeak | None:
    """Megatron-LM's ``memory (MB) | allocated: …`` report as the rank's peaks, or None."""
    # Colour codes wrap the prefix and end of these lines: the line as it is first, cleaned if need be.
    report = read_allocator(line)
    if report is None or report.rank is None or report.problem is not None:
        report = read_allocator(strip_ansi(line))
    if report is None or report.problem is not None or not report.mib:
        return None
    figures = {name: mib / MIB_PER_GIB for name, mib in report.mib.items()}
    return RankPeak(
        rank=report.rank,
        allocated_gib=figures.get("allocated"),
        max_allocated_gib=figures.get("max_allocated"),
        max_reserved_gib=figures.get("max_reserved"),
    )


@functools.lru_cache(maxsize=4096)
def read_hip_usage(value: str) -> tuple[float, float]:
    """The used and total device memory, in GiB, that a value of Primus's :data:`HIP_FIELD` gives.

    The one reader of the field: the log parser's records and the per-rank peaks (from text or
    from bytes) all come from it.  ``153.81GB/102.17GB/255.98GB/60.09%`` is used/free/total/usage
    ratio from ``torch.cuda.mem_get_info``; Primus prints bytes / 1024³ labelled "GB", so the
    figures are GiB (2**30 bytes) and are returned as they are.  A value that is not four
    figures separated by "/" (a cut-off one included) is a :class:`LineError`.

    Every iteration line of every rank holds the field, mostly with a value seen before: the
    figures of the latest values are kept (a value read again costs a look-up).
    """
    used, total = parse_units(value, 4, (0, 2))
    return used, total


def parse_hip_usage(line: str) -> RankPeak | None:
    """Primus's ``hip mem usage/free/total/usage_ratio`` field, or None."""
    found = _hip_figures(line)
    if found is None:
        return None
    rank, used, total = found
    return RankPeak(rank=rank, device_used_gib=used, device_total_gib=total)


def _hip_figures(line: str, start: int = 0) -> tuple[int | None, float, float] | None:
    """The rank, used and total GiB of :func:`parse_hip_usage` (read once per iteration line).

    ``start``: where the line's first "hip mem usage" is, if known (no field starts before it).
    """
    match = _HIP_RE.search(line, start)
    rank = _PRIMUS_RANK_TAG_RE.search(line, 0, match.start()) if match is not None else None
    if match is None or rank is None:  # colour codes inside the field, or no rank tag before it: read it cleaned
        clean = strip_ansi(line)
        match = _HIP_RE.search(clean)
        if match is None:
            return None
        rank = _PRIMUS_RANK_RE.search(clean)
    try:
        used, total = read_hip_usage(match.group(1))
    except LineError:
        return None
    return None if rank is None else int(rank.group(1)), used, total


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


class RankMemory:
    """Each rank's memory figures as lines are read.

    Primus prints ``hip mem usage`` in every iteration line of every rank (and some logs the
    allocator report too), so these are kept as their distinct (rank, figures) pairs and each
    rank's last figures, merged by :meth:`peaks`.  The log parser keeps one of these too (see
    :mod:`tprimat.plugins.megatron.logparse`): it reads each line once and hands copies of a
    line it already read (another rank's, the same text from the key on) to :meth:`read_copy`.
    """

    def __init__(self) -> None:
        self.theoretical: TheoreticalFootprint | None = None
        self.ranks: dict[int | None, RankPeak] = {}
        self.hip_used: dict[tuple[int | None, float], None] = {}
        self.hip_total: dict[int | None, float] = {}
        self.allocator_seen: dict[tuple[int | None, RankPeak], None] = {}  # figures without their rank
        self.allocator_last: dict[int | None, float] = {}  # each rank's last "allocated"

    def add(self, peak: RankPeak) -> None:
        old = self.ranks.get(peak.rank)
        self.ranks[peak.rank] = peak if old is None else old.merged(peak)

    def _allocator(self, rank: int | None, figures: RankPeak) -> None:
        self.allocator_seen[(rank, figures)] = None
        if figures.allocated_gib is not None:
            self.allocator_last[rank] = figures.allocated_gib

    def read_line(self, line: str, *, hip: bool = True) -> Any:
        """Every memory figure of one text line (``hip``: its ``hip mem usage`` field too).

        Returns what :meth:`read_copy` needs for a copy of the line from another rank: the
        ``hip mem usage`` (used, total) and the allocator figures without their rank, or True
        to read the copy again, or None when the line holds no figure.
        """
        hip_figures = allocator = None
        field = line.find("hip mem usage") if hip else -1
        if field >= 0:
            found = _hip_figures(line, field)
            if found is not None:
                rank, used, total = found
                self.hip_used[(rank, used)] = None
                self.hip_total[rank] = total
                hip_figures = (used, total)
        if "memory" in line:
            # Each report is looked for only where its words are (a TorchTitan step line's "memory:"
            # holds none of them); the allocator's as parse_allocator reads it, colour codes cut too.
            footprint = parse_theoretical(line) if "Theoretical memory footprints" in line else None
            if footprint is not None:
                self.theoretical = footprint
                return True
            # (strip_ansi changes only a line with an ESC byte or a reset: the test is made here)
            allocator_words = "memory (MB)" in line or (
                ("\x1b" in line or "[0m" in line) and "memory (MB)" in strip_ansi(line)
            )
            peak = parse_allocator(line) if allocator_words else None
            if peak is not None:
                allocator = attrs.evolve(peak, rank=None)
                self._allocator(peak.rank, allocator)
            elif "max_memory_" in line:
                peak = parse_nemo_memory(line)
                if peak is not None:
                    self.add(peak)
                    return True
        if hip_figures is None and allocator is None:
            return None
        return (hip_figures, allocator)

    def read_hip_run(self, ranks: Sequence[int], used: Sequence[float], totals: Sequence[float]) -> None:
        """The ``hip mem usage`` rank, used and total of consecutive lines, as :meth:`read_line` reads each."""
        self.hip_used.update(dict.fromkeys(zip(ranks, used, strict=True)))
        self.hip_total.update(zip(ranks, totals, strict=True))

    def read_copy(self, line: bytes, copy: Any) -> None:
        """A copy of a line :meth:`read_line` read: its figures, for the rank the copy names."""
        if copy is not True:
            hip_figures, allocator = copy
            hip_rank = allocator_rank = None
            if hip_figures is not None:
                position = line.find(_HIP_FIELD)
                hip_rank = _RANK_TAG_B.search(line, 0, position) if position >= 0 else None
            if allocator is not None:
                allocator_rank = _ALLOCATOR_RANK_B.search(line)
            if (hip_figures is None or hip_rank is not None) and (allocator is None or allocator_rank is not None):
                if hip_rank is not None:
                    rank = int(hip_rank.group(1))
                    self.hip_used[(rank, hip_figures[0])] = None
                    self.hip_total[rank] = hip_figures[1]
                if allocator_rank is not None:
                    self._allocator(int(allocator_rank.group(1)), allocator)
                return
        self.read_line(line.decode("utf-8", errors="replace"))  # a rank the bytes do not show

    def peaks(self) -> list[RankPeak]:
        """Each rank's peaks so far, ranks in order (a line without a rank first); starts afresh."""
        for rank, used in self.hip_used:
            self.add(RankPeak(rank=rank, device_used_gib=used, device_total_gib=self.hip_total[rank]))
        for rank, figures in self.allocator_seen:
            self.add(attrs.evolve(figures, rank=rank, allocated_gib=None))
        for rank, allocated in self.allocator_last.items():
            self.add(RankPeak(rank=rank, allocated_gib=allocated))
        self.hip_used.clear()
        self.allocator_seen.clear()
        self.allocator_last.clear()
        ordered = sorted(self.ranks.values(), key=lambda r: -1 if r.rank is None else r.rank)
        self.ranks = {}
        return ordered

    def memory(self) -> LogMemory:
        """What was read: the last theoretical footprint and each rank's peaks."""
        return LogMemory(theoretical=self.theoretical, ranks=tuple(self.peaks()))


def scan_memory(lines: Iterable[str]) -> LogMemory:
    """Every memory figure in ``lines``: the last theoretical footprint and each rank's peaks."""
    peaks = RankMemory()
    for line in lines:
        peaks.read_line(line)
    return peaks.memory()


# The file scan looks for these bytes and decodes only the lines that hold one.  Primus prints
# ``hip mem usage`` in every iteration line of every rank, so those are read from the bytes:
# the values after the field, the rank from the tag before it (colour codes allowed around the
# rank, as the text scan strips them).  A field the byte pattern does not read (colour codes
# inside the values) sends its line to the text scan.
_HIP_FIELD = f"{HIP_FIELD}: ".encode()
_HIP_VALUES_B = re.compile(_HIP_RE.pattern.encode())
_RANK_TAG_B = re.compile(_PRIMUS_RANK_TAG_RE.pattern.encode())
# The rank of a copy of an allocator report, where the line shows it as it is (no colour codes).
_ALLOCATOR_RANK_B = re.compile(rb"\[Rank (\d+)\] \([^)]*\) memory \(MB\) \| allocated: ")
_OTHER_FIELDS = (b"Theoretical memory footprints", b"memory (MB)", b"max_memory_")
_BLOCK_BYTES = 1 << 20  # a block and its copy while its last line is completed are held at once


def _line_at(block: bytes, position: int) -> tuple[int, int]:
    start = block.rfind(b"\n", 0, position) + 1
    end = block.find(b"\n", position)
    return start, len(block) if end < 0 else end


def _scan_block(block: bytes, peaks: RankMemory) -> None:
    """The memory figures of ``block`` (whole lines), in the order the text scan finds them."""
    slow: set[int] = set()  # starts of lines read as text
    fields = block.count(_HIP_FIELD)
    if fields:
        read = 0
        for match in _HIP_VALUES_B.finditer(block):
            position = match.start()
            line_start = block.rfind(b"\n", 0, position) + 1
            tag = _RANK_TAG_B.search(block, line_start, position)
            if tag is None:
                slow.add(line_start)
                continue
            try:
                used, total = read_hip_usage(match.group(1).decode("ascii"))
            except LineError:  # not figures after all ("1.2.3GB"): the text scan leaves it out
                slow.add(line_start)
                continue
            read += 1
            rank = int(tag.group(1))
            peaks.hip_used[(rank, used)] = None
            peaks.hip_total[rank] = total
        if read != fields:  # some fields are not in the byte form: their lines are read as text
            position = block.find(_HIP_FIELD)
            while position != -1:
                line_start, line_end = _line_at(block, position)
                if _HIP_VALUES_B.match(block, position) is None:
                    slow.add(line_start)
                position = block.find(_HIP_FIELD, line_end)
    others: set[int] = set()
    for needle in _OTHER_FIELDS:
        position = block.find(needle)
        while position != -1:
            line_start, line_end = _line_at(block, position)
            others.add(line_start)
            position = block.find(needle, line_end)
    for line_start in sorted(slow | others):
        _, line_end = _line_at(block, line_start)
        line = block[line_start:line_end].decode("utf-8", errors="replace")
        peaks.read_line(line, hip=line_start in slow)


def scan_memory_file(path: str | Path) -> LogMemory:
    """:func:`scan_memory` over a log file, reading it in large blocks and decoding only the
    lines that can hold a memory figure (a log of gigabytes costs a few searches per block)."""
    peaks = RankMemory()
    for block in LogFile(path, chunk_bytes=_BLOCK_BYTES).byte_chunks():  # whole lines, an unfinished last one too
        _scan_block(block, peaks)
    return peaks.memory()


def memory_peaks(path: Path) -> list[RankPeak]:
    """``BackendSpec.memory_peaks`` of the Megatron family and NeMo: each rank's peaks in a log file."""
    return list(scan_memory_file(path).ranks)
