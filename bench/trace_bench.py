"""Bench: analyse one large trace with tprimat and with HolisticTraceAnalysis; time and peak memory.

Each tool runs in its own fresh process; wall time and peak resident memory
(``ru_maxrss`` of that process, from ``wait4``) are measured from outside.
tprimat computes its full analysis (temporal breakdown, categories, top
kernels, per-step breakdown); HTA computes its temporal breakdown only.
HolisticTraceAnalysis is not a tprimat dependency: give the Python of a
separate environment where it is installed::

    python bench/make_large_trace.py tests/fixtures/traces/hta/trace_diff_control_control.json.gz /tmp/large.json
    python bench/trace_bench.py /tmp/large.json --hta-python /tmp/hta-venv/bin/python

With ``--roofline``, the per-operator roofline (``tprimat trace roofline``: CPU
operators and their shapes read as well) is timed beside ``trace analyze`` on
the same file, both on every CPU; build its trace from one recorded with
shapes::

    python bench/make_large_trace.py tests/fixtures/traces/tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz \
        /tmp/large_shapes.json
    python bench/trace_bench.py /tmp/large_shapes.json --roofline --repeat 3

Prints a Markdown table (for BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TPRIMAT = """
import json, sys
from tprimat.trace.analyze import analyze_paths
result = analyze_paths([sys.argv[1]])[0]
print(json.dumps(result["temporal"]))
"""

ROOFLINE = """
import json, sys
from tprimat.trace.roofline import roofline_file
result = roofline_file(sys.argv[1])
print(json.dumps({"groups": len(result["groups"]), **result["totals"]}))
"""

HTA = """
import json, logging, os, sys, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
directory = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(directory, os.path.basename(sys.argv[1])))
df = TraceAnalysis(trace_dir=directory).get_temporal_breakdown(visualize=False)
row = df.iloc[0]
print(json.dumps({"total_us": float(row["kernel_time(us)"]), "idle_us": float(row["idle_time(us)"]),
                  "compute_us": float(row["compute_time(us)"]), "non_compute_us": float(row["non_compute_time(us)"])}))
"""


def measure(python: str, code: str, trace: Path) -> dict:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([python, "-c", code, str(trace)], stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().strip().splitlines()
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9,  # ru_maxrss is KiB on Linux
            "rc": proc.returncode,
            "result": json.loads(text[-1]) if proc.returncode == 0 and text else None,
            "error": None if proc.returncode == 0 else err.read()[-500:],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--hta-python", default=None, help="python of an environment with HolisticTraceAnalysis")
    parser.add_argument("--skip-tprimat", action="store_true", help="measure HTA only")
    parser.add_argument("--roofline", action="store_true", help="also time tprimat trace roofline")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tprimat tool, alternated; best kept")
    args = parser.parse_args()

    size_gb = args.trace.stat().st_size / 1e9
    rows = []
    if not args.skip_tprimat:
        tools = [("tprimat trace analyze", TPRIMAT)]
        if args.roofline:
            tools.append(("tprimat trace roofline", ROOFLINE))
        best: dict[str, dict] = {}
        for _ in range(max(args.repeat, 1)):
            for name, code in tools:
                m = measure(sys.executable, code, args.trace)
                if name not in best or m["wall_s"] < best[name]["wall_s"]:
                    best[name] = m
        rows.extend(best.items())
    if args.hta_python:
        rows.append(("HolisticTraceAnalysis 0.5.0 temporal breakdown", measure(args.hta_python, HTA, args.trace)))
    print(f"trace: {args.trace} ({size_gb:.2f} GB)\n")
    print("| tool | wall (s) | CPU (s) | peak RSS (GB) | peak RSS / file size | exit |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in rows:
        print(
            f"| {name} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {m['peak_rss_gb']:.2f} | "
            f"{m['peak_rss_gb'] / size_gb:.2f}× | {m['rc']} |"
        )
    if args.roofline and len(rows) >= 2:
        a, r = rows[0][1], rows[1][1]
        print(f"\nroofline / analyze: wall {r['wall_s'] / a['wall_s']:.2f}×, CPU {r['cpu_s'] / a['cpu_s']:.2f}×")
    elif len(rows) == 2 and rows[1][1]["rc"] == 0:
        a, b = rows[0][1], rows[1][1]
        print(
            f"\nHTA / tprimat: wall {b['wall_s'] / a['wall_s']:.1f}×, CPU {b['cpu_s'] / a['cpu_s']:.1f}×, "
            f"peak memory {b['peak_rss_gb'] / a['peak_rss_gb']:.1f}×"
        )
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, m in rows:
        print(f"\n{name}: {json.dumps(m['result']) if m['result'] else m['error']}")


if __name__ == "__main__":
    main()
