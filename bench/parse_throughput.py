"""Benchmark: parse a >= 1 GB multi-rank Primus log tree and compare with ``grep -c iteration``.

The tree is built under /tmp from the Primus fixture in ``tests/fixtures/logs``
(never committed): ``{workspace}/{group}/{user}/{exp}/logs/pre_trainer/rank-N/``
with ``debug.log`` rotated every 10 MB, like Primus writes it.  The last rank
holds the iteration lines, rank 0 holds them again (forwarded) plus the memory
lines, and the other ranks hold the start-up and argument lines.  Every block
of the fixture becomes 10 new iterations, so the run is one long training log.

Reported: MB/s of ``tprimat.parse.logs.parse_logs`` end to end (files -> result),
of the parser alone (events, no collection) reading a ``LogFile`` as
``tprimat parse`` does and reading plain text lines as a live run does, both
in wall time and in CPU time (the fair figure on a shared machine), peak RSS of each in a fresh
process for the full tree and for one eighth of it (flat memory: the peak
must not grow with the log), and ``grep -c iteration`` on the same files.
Each figure is the best of ``--repeat`` runs, since the machine may be shared.

    python bench/parse_throughput.py [--size-mb 1100] [--repeat 3] [--keep]

``bench/io_bench.py`` measures both log shapes (this tree and an interleaved console log)
end to end beside a plain parser and grep; this script adds the parser-only rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logshapes import build_tree  # noqa: E402  (the tree is built as bench/io_bench.py builds it)


def _measure(mode: str, tree: Path) -> dict:
    """Run one measurement in a fresh process so peak RSS is its own."""
    code = f"""
import json, resource, sys, time
from tprimat.contract.logfile import LogFile
from tprimat.parse.logs import find_log_files, parse_logs
from tprimat.contract.registry import Registry
registry = Registry.from_environment()
files, _ = find_log_files([{str(tree)!r}])
size = sum(f.stat().st_size for f in files)
start, cpu = time.perf_counter(), time.process_time()
if {mode!r} == "parse_logs":
    outcome = parse_logs([{str(tree)!r}], registry=registry, backend="amd_primus")
    iterations = len(outcome.result.iterations)
else:
    iterations = 0
    for f in files:
        lines = LogFile(f) if {mode!r} == "parser only" else open(f, errors="replace")
        for event in registry.parse_metrics("amd_primus", lines=lines, source=f.name):
            iterations += 1
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"bytes": size, "seconds": elapsed, "cpu_seconds": cpu, "peak_rss_mib": peak,
                   "items": iterations, "files": len(files)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _grep(tree: Path) -> dict:
    files = sorted(str(p) for p in tree.rglob("*.log"))
    start = time.perf_counter()
    out = subprocess.run(
        ["sh", "-c", 'cat "$@" | grep -c iteration', "sh", *files], check=True, capture_output=True, text=True
    )
    return {"seconds": time.perf_counter() - start, "count": int(out.stdout.strip())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1100)
    parser.add_argument("--root", default="/tmp/tprimat-bench-parse")
    parser.add_argument("--keep", action="store_true", help="keep the generated trees")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    args = parser.parse_args()
    root = Path(args.root)
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    full = build_tree(root / "full", args.size_mb)
    small = build_tree(root / "eighth", max(1, args.size_mb // 8))
    built = time.perf_counter() - start
    rows = []
    for label, tree in (("full", full), ("eighth", small)):
        for mode in ("parse_logs", "parser only", "parser, line by line"):
            # Best of --repeat runs, each in a fresh process (the machine may be shared).
            runs = [_measure(mode, tree) for _ in range(args.repeat)]
            m = min(runs, key=lambda r: r["seconds"])
            cpu = min(r["cpu_seconds"] for r in runs)
            rows.append(
                (
                    label,
                    mode,
                    m["bytes"] / 1e6,
                    m["files"],
                    m["seconds"],
                    m["bytes"] / 1e6 / m["seconds"],
                    m["bytes"] / 1e6 / cpu,
                    max(r["peak_rss_mib"] for r in runs),
                    m["items"],
                )
            )
        grep = min((_grep(tree) for _ in range(args.repeat)), key=lambda g: g["seconds"])
        rows.append(
            (
                label,
                "grep -c iteration",
                m["bytes"] / 1e6,
                m["files"],
                grep["seconds"],
                m["bytes"] / 1e6 / grep["seconds"],
                None,
                None,
                grep["count"],
            )
        )
    print(f"trees built in {built:.0f} s under {root} (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    header = (
        "tree",
        "what",
        "MB",
        "files",
        "wall s",
        "MB/s (wall)",
        "MB/s (CPU time)",
        "peak RSS MiB",
        "iterations / events / matching lines",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [
            row[0],
            row[1],
            f"{row[2]:.0f}",
            str(row[3]),
            f"{row[4]:.2f}",
            f"{row[5]:.0f}",
            "-" if row[6] is None else f"{row[6]:.0f}",
            "-" if row[7] is None else f"{row[7]:.0f}",
            str(row[8]),
        ]
        print("| " + " | ".join(cells) + " |")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
