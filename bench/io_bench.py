"""One command for the I/O-bound paths: log parsing and trace analysis, beside simple references.

Builds, deterministically from the real fixtures (never committed, under ``--root``):

* a Primus console log of ``--size-mb`` MB with all 8 ranks' lines interleaved (the shape
  ``tee`` and SLURM produce) and a per-rank Primus tree of the same size
  (:mod:`logshapes`, next to this file); with ``--evaluation-every N``, also the console log
  with an evaluation every N iterations (as MLPerf runs print them), and with ``--torchtitan`` a
  TorchTitan log of the same size (Primus's second engine), both for ``tprimat parse`` only;
* Kineto traces of each ``--trace-mb`` size, by repeating an HTA test trace end to end in time
  (``make_large_trace.py``, next to this file); with ``--trace-ranks N``, also a directory of N
  copies of the smallest, one per rank, as a profiled run leaves them.

Then runs each tool in its own fresh process and measures from outside (``wait4``): wall time,
CPU time (user + system, the process and its waited-for workers) and peak RSS (the largest single
process: ``ru_maxrss``).  Rows per log shape: ``tprimat parse`` end to end (result JSON written)
on every CPU and on one, a plain single-pass Python parser that reads the same iteration fields
into a dict (the floor for a pure-Python reader), and ``grep -c iteration`` (reading speed).
Rows per trace: ``tprimat trace analyze --json`` on every CPU (a large file is read as ranges,
one per process) and HolisticTraceAnalysis's temporal breakdown when ``--hta-python`` names a
Python with it installed; for the rank directory, ``tprimat trace analyze --json`` on every CPU
and on one (one file per process).  Best of ``--repeat`` runs (by wall), with their median wall
time beside it; the tools of a log shape run in turn, one run each per
round, so that a slow minute of a shared host falls on all of them alike.  The inputs are synced
to disk before the first timed run.  Each tool (but HTA, run once) first runs once untimed; tprimat
runs with its bytecode cached, as an installed copy has it (see :mod:`bytecode`, next to this file).

    python bench/io_bench.py [--size-mb 1024] [--trace-mb 100,300,1000] [--repeat 3]
                             [--evaluation-every 500] [--torchtitan] [--trace-ranks 4]
                             [--hta-python /tmp/hta-venv/bin/python] [--skip-traces] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import logshapes  # noqa: E402
from bytecode import cached_bytecode_env  # noqa: E402

TRACE_SOURCE = HERE.parent / "tests" / "fixtures" / "traces" / "hta" / "trace_diff_control_control.json.gz"

PLAIN_PARSER = r"""
import re, sys
from pathlib import Path
LINE = re.compile(rb"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?consumed samples:\s*(\d+).*?"
                  rb"elapsed time per iteration \(ms\):\s*([\d.]+).*?learning rate:\s*([-+.\dEe]+).*?"
                  rb"global batch size:\s*(\d+).*?lm loss:\s*([-+.\dEe]+)")
records = {}
paths = [Path(p) for p in sys.argv[1:]]
files = [f for p in paths for f in (sorted(p.rglob("*.log")) if p.is_dir() else [p])]
for path in files:
    with open(path, "rb") as handle:
        for line in handle:
            if b"iteration" in line:
                m = LINE.search(line)
                if m:
                    n = int(m.group(1))
                    records.setdefault(n, (int(m.group(2)), float(m.group(3)) / 1000, float(m.group(4)),
                                           int(m.group(5)), float(m.group(6))))
print(len(records))
"""

HTA = r"""
import logging, os, sys, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
directory = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(directory, os.path.basename(sys.argv[1])))
df = TraceAnalysis(trace_dir=directory).get_temporal_breakdown(visualize=False)
print(int(df.iloc[0]["idle_time(us)"]))
"""


def run(argv: list[str], env: dict | None = None) -> dict:
    """Run ``argv`` in a fresh process: wall, CPU and peak RSS from outside, and its last line."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        lines = out.read().strip().splitlines()
        code = os.waitstatus_to_exitcode(status)
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mib": usage.ru_maxrss / 1024,
            "rc": code,
            "out": (lines[-1] if lines else "") if code == 0 else err.read()[-300:],
        }


def best(argv: list[str], repeat: int, env: dict | None = None, warm_up: bool = True) -> dict:
    """The fastest of ``repeat`` runs, after one untimed run when ``warm_up``."""
    if warm_up:
        run(argv, env)
    return fastest([run(argv, env) for _ in range(repeat)])


def in_turn(tools: list[tuple[str, list[str]]], repeat: int, env: dict | None = None) -> list[tuple[str, dict]]:
    """Each tool run once untimed, then ``repeat`` times, one run of each in turn: a slow minute
    of a shared host falls on every tool alike instead of on all the runs of one."""
    for _, argv in tools:
        run(argv, env)
    runs: dict[str, list[dict]] = {name: [] for name, _ in tools}
    for _ in range(repeat):
        for name, argv in tools:
            runs[name].append(run(argv, env))
    return [(name, fastest(runs[name])) for name, _ in tools]


def fastest(runs: list[dict]) -> dict:
    """The fastest run, with the median wall time, the least CPU time and the largest RSS of all."""
    failed = [r for r in runs if r["rc"] != 0]
    if failed:
        return failed[0]  # shown with its exit status and error
    chosen = dict(min(runs, key=lambda r: r["wall_s"]))
    chosen["median_wall_s"] = statistics.median(r["wall_s"] for r in runs)
    chosen["cpu_s"] = min(r["cpu_s"] for r in runs)
    chosen["rss_mib"] = max(r["rss_mib"] for r in runs)
    return chosen


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def measure(args: argparse.Namespace, inputs: list, traces: list, rank_dir: Path | None, env: dict) -> list:
    """The table's rows: (input, tool, bytes, measurement) for every input and tool."""
    tprimat = [sys.executable, "-m", "tprimat.cli"]
    rows = []
    for label, path in inputs:
        size = size_of(path)
        result = args.root / "result.json"
        parse = [*tprimat, "parse", str(path), "--backend", "amd_primus", "-o", str(result)]
        tools = [
            (f"tprimat parse (-j {os.cpu_count()})", parse),
            ("tprimat parse -j 1", [*parse, "-j", "1"]),
            ("plain single-pass Python parser", [sys.executable, "-c", PLAIN_PARSER, str(path)]),
            ("grep -c iteration", ["sh", "-c", 'find "$1" -type f | xargs cat | grep -c iteration', "sh", str(path)]),
        ]
        chosen = tools[:2] if "evaluation" in label or "TorchTitan" in label else tools
        rows.extend((label, name, size, measured) for name, measured in in_turn(chosen, args.repeat, env))
    for label, path in traces:
        size = size_of(path)
        rows.append(
            (
                label,
                f"tprimat trace analyze --json (-j {os.cpu_count()})",
                size,
                best([*tprimat, "trace", "analyze", str(path), "--json"], args.repeat, env),
            )
        )
        if args.hta_python and size <= args.hta_max_mb * 1_000_000:
            rows.append(
                (
                    label,
                    "HolisticTraceAnalysis temporal breakdown",
                    size,
                    best([args.hta_python, "-c", HTA, str(path)], 1, warm_up=False),
                )
            )

    if rank_dir is not None:
        analyze = [*tprimat, "trace", "analyze", str(rank_dir), "--json"]
        tools = [
            (f"tprimat trace analyze --json (-j {os.cpu_count()})", analyze),
            ("tprimat trace analyze --json -j 1", [*analyze, "-j", "1"]),
        ]
        label = f"{args.trace_ranks} ranks, {traces[0][0]} each"
        rows.extend((label, name, size_of(rank_dir), measured) for name, measured in in_turn(tools, args.repeat, env))

    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of each log shape")
    parser.add_argument("--trace-mb", default="100,300,1000", help="trace sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--root", type=Path, default=Path("/tmp/tprimat-io-bench"))
    parser.add_argument("--hta-python", default=None, help="a Python with HolisticTraceAnalysis")
    parser.add_argument("--hta-max-mb", type=int, default=1000, help="largest trace given to HTA")
    parser.add_argument(
        "--evaluation-every", type=int, default=0, help="also a console log with an evaluation every N iterations"
    )
    parser.add_argument("--torchtitan", action="store_true", help="also a TorchTitan log (Primus's second engine)")
    parser.add_argument("--trace-ranks", type=int, default=0, help="also N copies of the smallest trace, one per rank")
    parser.add_argument("--skip-traces", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = parser.parse_args()

    root = args.root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    inputs = [
        ("interleaved console log", logshapes.build_interleaved(root / "console.log", args.size_mb)),
        ("per-rank tree", logshapes.build_tree(root / "tree", args.size_mb)),
    ]
    if args.evaluation_every:
        evaluated = root / "console_evaluations.log"
        logshapes.build_interleaved(evaluated, args.size_mb, evaluation_every=args.evaluation_every)
        inputs.append((f"interleaved console log, an evaluation every {args.evaluation_every} iterations", evaluated))
    if args.torchtitan:
        inputs.append(("TorchTitan log", logshapes.build_torchtitan(root / "torchtitan.log", args.size_mb)))
    traces = []
    if not args.skip_traces:
        for mb in (int(x) for x in args.trace_mb.split(",") if x):
            out = root / f"trace_{mb}mb.json"
            subprocess.run(
                [
                    sys.executable,
                    str(HERE / "make_large_trace.py"),
                    str(TRACE_SOURCE),
                    str(out),
                    "--min-bytes",
                    str(mb * 1_000_000),
                ],
                check=True,
                capture_output=True,
            )
            traces.append((f"Kineto trace {mb} MB", out))
    rank_dir = None
    if traces and args.trace_ranks:
        rank_dir = root / "trace_ranks"
        rank_dir.mkdir(exist_ok=True)
        for rank in range(args.trace_ranks):
            shutil.copyfile(traces[0][1], rank_dir / f"rank-{rank}.pt.trace.json")
    # The inputs at rest, as a finished run's logs are: writing back the gigabytes just built
    # would otherwise take CPU and disk from the first measured runs.
    os.sync()
    print(f"inputs built and synced in {time.perf_counter() - started:.0f} s under {root}")

    with cached_bytecode_env() as env:
        rows = measure(args, inputs, traces, rank_dir, env)

    load = os.getloadavg()
    load = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the end\n")
    print(f"best of {args.repeat} runs, each tool of an input run in turn; the median wall time beside it\n")
    print(
        "| input | tool | MB | wall s | wall s (median) | CPU s | MB/s (wall) | MB/s (CPU) | peak RSS MiB "
        "| exit | output |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, name, size, m in rows:
        mb = size / 1e6
        median = m.get("median_wall_s", m["wall_s"])
        print(
            f"| {label} | {name} | {mb:.0f} | {m['wall_s']:.2f} | {median:.2f} | {m['cpu_s']:.2f} | "
            f"{mb / m['wall_s']:.0f} | {mb / m['cpu_s']:.0f} | {m['rss_mib']:.0f} | {m['rc']} | {m['out'][:40]} |"
        )
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
