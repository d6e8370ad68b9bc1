"""Benchmark: how cheap can reading a dense log's iteration lines be in CPython, beside tprimat's parser?

A target such as "300 MB/s on 2 cores" is a budget of CPU per iteration record: with ``B`` bytes
of log per record, 2 cores give ``2 * B / 300e6`` seconds per record.  This prints that budget and,
on the same dense log (``bench/denselogs.py``), the CPU per record of readers that do less and
less than tprimat does, so that the budget can be set against what the language allows:

* ``count``: ``bytes.count`` of the iteration lines' marker over 16 MB blocks (C only: the
  cost of touching the bytes);
* ``split``: one compiled pattern finds each iteration line in a block (C), then Python splits
  its `` | `` segments and their ``key: value`` pairs into one list per key, values left as bytes
  (no numbers read, no checks, no records): the least Python work that still visits every field;
* ``split+float``: the same, each value's first number (before a ``/``) read with ``float()``
  (a pattern only where ``float()`` refuses the text: units, percentages) into an ``array('d')``
  column (what a columnar reader would keep);
* ``parser``: the backend's ``parse_metrics`` over a ``LogFile`` (every check, every side reader,
  one record per iteration);
* ``parse_logs``: ``parse_logs`` with one worker (the parser, collection, checks, summary).

CPU time (of the process and the children it waits for), best of ``--repeat``: the machine may be shared.

    python bench/parse_floor.py [--kind primus] [--size-mb 60] [--repeat 3] [--target-mb-s 300] [--cores 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from array import array
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)
from cputime import cpu_s  # noqa: E402

BLOCK = 16 * 1024 * 1024
#: What marks an iteration line of each kind, and the pattern that takes its fields' text.
MARKERS = {
    "primus": (b"number of nan iterations", rb"iteration\s+\d+\s*/\s*\d+\s*\|([^\n]*)"),
    "megatron": (b"number of nan iterations", rb"iteration\s+\d+\s*/\s*\d+\s*\|([^\n]*)"),
    "nemo2": (b"Training epoch", rb"Training epoch[^\n]*?\|([^\n]*)"),
    "torchtitan": (b"tps:", rb"step:\s*\d+([^\n]*)"),
}
_NUMBER = re.compile(rb"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _blocks(path: Path) -> list[bytes]:
    """The file as blocks cut at line ends (read once, outside the timed stages)."""
    data = path.read_bytes()
    blocks, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start + BLOCK)
        end = len(data) if end < 0 else end + 1
        blocks.append(data[start:end])
        start = end
    return blocks


def _count(blocks: list[bytes], marker: bytes) -> int:
    return sum(block.count(marker) for block in blocks)


def _split(blocks: list[bytes], pattern: re.Pattern[bytes]) -> int:
    columns: dict[bytes, list[bytes]] = {}
    records = 0
    for block in blocks:
        for tail in pattern.findall(block):
            records += 1
            for segment in tail.split(b"|"):
                key, _, value = segment.partition(b":")
                column = columns.get(key)
                if column is None:
                    column = columns[key] = []
                column.append(value)
    return records


def _split_float(blocks: list[bytes], pattern: re.Pattern[bytes]) -> int:
    columns: dict[bytes, array] = {}
    records = 0
    number = _NUMBER.search
    for block in blocks:
        for tail in pattern.findall(block):
            records += 1
            for segment in tail.split(b"|"):
                key, _, value = segment.partition(b":")
                first = value.split(b"/", 1)[0]
                try:
                    figure = float(first)
                except ValueError:
                    found = number(first)
                    if found is None:
                        continue
                    figure = float(found.group())
                column = columns.get(key)
                if column is None:
                    column = columns[key] = array("d")
                column.append(figure)
    return records


def _best_cpu(function: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = cpu_s()
        function()
        best = min(best, cpu_s() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="primus", choices=tuple(MARKERS))
    parser.add_argument("--size-mb", type=float, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target-mb-s", type=float, default=300, help="the wall-time target, in MB/s")
    parser.add_argument("--cores", type=int, default=2, help="the cores the target is for")
    args = parser.parse_args()

    from tprimat.contract.logfile import LogFile
    from tprimat.contract.registry import Registry
    from tprimat.parse.logs import parse_logs

    registry = Registry.from_environment()
    backend = denselogs.BACKENDS[args.kind]
    marker, tail = MARKERS[args.kind]
    pattern = re.compile(tail)
    with tempfile.TemporaryDirectory(prefix="tprimat-parse-floor-") as folder:
        path, iterations = denselogs.build_dense(Path(folder) / f"{args.kind}.log", args.kind, args.size_mb)
        size = path.stat().st_size
        blocks = _blocks(path)
        found = {"count": _count(blocks, marker), "split": _split(blocks, pattern)}
        stages: dict[str, Callable[[], object]] = {
            "count": lambda: _count(blocks, marker),
            "split": lambda: _split(blocks, pattern),
            "split+float": lambda: _split_float(blocks, pattern),
            "parser": lambda: sum(1 for _ in registry.parse_metrics(backend, lines=LogFile(path), source=path.name)),
            "parse_logs": lambda: parse_logs([path], registry=registry, backend=backend, workers=1),
        }
        best = {name: _best_cpu(stage, args.repeat) for name, stage in stages.items()}
    per_record = size / iterations
    budget = args.cores * per_record / (args.target_mb_s * 1e6)
    print(
        f"{args.kind}: {size / 1e6:.0f} MB, {iterations} iterations ({per_record:.0f} B each; "
        f"count found {found['count']}, split found {found['split']}), CPU best of {args.repeat}"
    )
    print(
        f"budget for {args.target_mb_s:.0f} MB/s on {args.cores} cores: {budget * 1e6:.2f} µs of CPU per record, "
        "everything included"
    )
    print("| reader | CPU s | µs per record | MB/s per core | share of the budget |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in best.items():
        micro = seconds / iterations * 1e6
        print(f"| {name} | {seconds:.2f} | {micro:.2f} | {size / seconds / 1e6:.0f} | {micro / (budget * 1e6):.1f}× |")


if __name__ == "__main__":
    main()
