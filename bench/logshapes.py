"""Deterministic large Primus logs for benchmarks, built from the real fixture in ``tests/fixtures/logs``.

Two shapes, both made of the fixture's own lines with iteration numbers, consumed samples and
memory-report iteration numbers offset so that the result is one long, consistent training log:

* :func:`build_tree`: Primus's per-rank tree (``rank-N/debug.log`` rotated every 10 MB), the last
  rank holding the iteration lines, rank 0 a forwarded copy plus the memory report, the other
  ranks the start-up and library lines (see ``bench/parse_throughput.py``);
* :func:`build_interleaved`: one file holding every line of every rank, ranks interleaved line by
  line (the shape ``tee`` and SLURM produce when all ranks print): each iteration line appears
  once per rank, the copies differing only in the rank tag; optionally with an evaluation line
  every N iterations;
* :func:`build_torchtitan`: the step lines of Primus's second engine, TorchTitan, each printed by
  every rank with its own figures (the fixture in ``tests/fixtures/logs/torchtitan``): a log
  whose reader never sees Megatron's start of training.

Nothing here is random; the same size gives the same bytes.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
FIXTURE = FIXTURES / "primus" / "primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
TITAN_FIXTURE = FIXTURES / "torchtitan" / "torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log"
ROTATE_BYTES = 10 * 1024 * 1024
RANKS = 8
_ITERATION = re.compile(r"iteration\s+(\d+)/\s+(\d+) \| consumed samples:\s+(\d+)")
_AFTER = re.compile(r"\(after (\d+) iterations\)")
_RANK_TAG = re.compile(r"rank-[0-7]/8")


def _fixture_lines() -> list[str]:
    return FIXTURE.read_text(encoding="utf-8").splitlines(True)


def _templates() -> tuple[list[str], list[str]]:
    """Rank-0 lines (start-up, arguments, memory) and the last rank's iteration lines."""
    rank0, last = [], []
    for line in _fixture_lines():
        if "rank-7/8" in line and "iteration " in line:
            last.append(line)
        else:
            rank0.append(line)
    return rank0, last


def _offset_line(line: str, offset: int, total: int) -> str:
    if "(after" in line:
        match = _AFTER.search(line)
        if match is not None:
            line = _AFTER.sub(f"(after {int(match.group(1)) + offset} iterations)", line)
    match = _ITERATION.search(line)
    if match is not None:
        n = int(match.group(1)) + offset
        line = _ITERATION.sub(f"iteration {n:>8}/{total:>8} | consumed samples: {n * 16:>12}", line)
    return line


def build_tree(root: Path, size_mb: int) -> Path:
    """A per-rank Primus tree of about ``size_mb`` MB under ``root``; returns the tree's top."""
    rank0, last = _templates()
    per_rank = size_mb * 1024 * 1024 // RANKS
    block_bytes = sum(map(len, rank0)) + sum(map(len, last))
    blocks = max(1, per_rank // block_bytes)
    total = blocks * len(last)
    base = root / "ws" / "bench" / "user" / "exp" / "logs" / "pre_trainer"
    for rank in range(RANKS):
        directory = base / f"rank-{rank}"
        directory.mkdir(parents=True, exist_ok=True)
        own = [line.replace("rank-0/8", f"rank-{rank}/8") for line in rank0]
        part, written, handle = 0, 0, None
        for block in range(blocks):
            offset = block * len(last)
            chunk = [_offset_line(line, offset, total) if rank == 0 else line for line in own]
            if rank in (0, RANKS - 1):
                chunk.extend(_offset_line(line, offset, total) for line in last)
            text = "".join(chunk)
            if handle is None or written + len(text) > ROTATE_BYTES:
                if handle is not None:
                    handle.close()
                    part += 1
                handle = open(
                    directory / f"debug.2026-05-07_13-{part // 60:02d}-{part % 60:02d}_000000.log",
                    "w",
                    encoding="utf-8",
                )
                written = 0
            handle.write(text)
            written += len(text)
        if handle is not None:
            handle.close()
            newest = sorted(directory.glob("debug.*.log"))[-1]  # the live file is the newest part
            newest.rename(directory / "debug.log")
    return root / "ws"


def build_interleaved(path: Path, size_mb: int, evaluation_every: int = 0) -> Path:
    """One console log of about ``size_mb`` MB with all 8 ranks' lines interleaved.

    ``evaluation_every``: the last rank also prints an evaluation (Megatron's ``validation loss
    at iteration N`` text, in Primus's line format) after every iteration N divisible by it,
    as a run with evaluations on does (MLPerf runs); 0 for none.
    """
    lines = _fixture_lines()
    iterations = sum(1 for line in lines if _ITERATION.search(line))

    def block(offset: int, total: int) -> str:
        out = []
        for line in lines:
            line = _offset_line(line, offset, total)
            if _RANK_TAG.search(line) is None:
                out.append(line)  # a line without a rank tag is printed once
                continue
            out.extend(_RANK_TAG.sub(f"rank-{rank}/8", line) for rank in range(RANKS))
            if evaluation_every and f"rank-{RANKS - 1}/8" in line:
                out.extend(_evaluation(line, evaluation_every))
        return "".join(out)

    blocks = max(1, size_mb * 1024 * 1024 // len(block(0, 0).encode()))
    total = blocks * iterations
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for n in range(blocks):
            handle.write(block(n * iterations, total))
    return path


def _evaluation(line: str, every: int) -> list[str]:
    """The evaluation line the last rank prints after the iteration line ``line``, if one is due."""
    match = _ITERATION.search(line)
    if match is None or int(match.group(1)) % every:
        return []
    head = line[: line.index("] : ") + 4]
    n = int(match.group(1))
    loss = 9.5 - n / 10_000
    return [f"{head}validation loss at iteration {n} | lm loss value: {loss:.6E} | lm loss PPL: 1.3E+04 |\n"]


def build_torchtitan(path: Path, size_mb: int) -> Path:
    """A TorchTitan log of about ``size_mb`` MB: the fixture's step line for steps 1, 2, ...,
    1.637 s apart (the fixture's own spacing), each printed by all 8 ranks, each rank with its
    own TFLOP/s figure (ranks' figures differ in the last digits, as the fixture's two copies of
    step 4 do)."""
    template = TITAN_FIXTURE.read_text(encoding="utf-8").splitlines(True)[2]
    stamp, step, tflops = "2026-02-24 19:46:19,145", "step:  5 ", "tflops: 313.36"
    assert stamp in template and step in template and tflops in template
    copies = "".join(template.replace(tflops, f"tflops: {313.36 - rank / 100:.2f}") for rank in range(RANKS))
    start = datetime(2026, 2, 24, 19, 46, 17, 508000)
    path.parent.mkdir(parents=True, exist_ok=True)
    written, n = 0, 0
    with open(path, "w", encoding="utf-8") as handle:
        while written < size_mb * 1024 * 1024:
            n += 1
            when = (start + timedelta(milliseconds=1637 * n)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
            text = copies.replace(stamp, when).replace(step, f"step: {n} ")
            handle.write(text)
            written += len(text)
    return path
