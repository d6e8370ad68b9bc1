"""Benchmark: two installations of tprimat parse the same logs, alternating run by run.

A change to the parser is measured against the version before it on the same machine in
the same run: each round runs every input once with each ``tprimat`` executable, in
turn, so that load from anything else on the machine falls on both.  For each input and
version the table shows wall time (min / median / max), CPU time, peak RSS of the
process tree (``wait4``) and whether the results are the same: their records (compared after the
loader's migrations, so that versions that lay the result file out differently compare by
value) and the summary figures both write (``bench/dense_parse.py``'s comparison).

The inputs are built by ``bench/logshapes.py`` (never committed) under ``--root``:

* ``console``: the 1 GB interleaved console log (every rank's lines in one file);
* ``tree``: the 1 GB per-rank Primus tree;
* ``torchtitan``: a TorchTitan log whose every step is a new record (780 000 steps at 1 GB);
* ``console2g``, ``torchtitan2g``: the same at 2 GB (peak memory must not grow with the log).

    python bench/parse_versions.py --old /path/to/old-venv/bin/tprimat \\
        [--new tprimat] [--inputs console,tree,torchtitan] [--rounds 5] [--jobs 2]

Give one installation as both to see the spread of the machine alone.  ``--old-commit COMMIT``
instead of ``--old`` runs that commit of this repository, unpacked from ``git archive`` (see
``bench/oldversion.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logshapes  # noqa: E402  (bench/ is not a package)
from dense_parse import compared_apart, same_results  # noqa: E402
from oldversion import old_executable  # noqa: E402

#: name -> (builder, size in MB) of each input shape.
SHAPES = {
    "console": (logshapes.build_interleaved, 1024),
    "tree": (logshapes.build_tree, 1024),
    "torchtitan": (logshapes.build_torchtitan, 1024),
    "console2g": (logshapes.build_interleaved, 2048),
    "torchtitan2g": (logshapes.build_torchtitan, 2048),
}


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _run(executable: str, source: Path, output: Path, jobs: int) -> tuple[float, float, int, Any]:
    """One ``tprimat parse`` in a child: wall s, CPU s, peak RSS MiB, and what is compared of its result."""
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: silent, then tprimat
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        command = [executable, "parse", "--backend", "amd_primus", "-j", str(jobs), str(source), "-o", str(output)]
        os.execvp(executable, command)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{executable} parse {source} failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, compared_apart(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--old", help="the reference tprimat executable")
    group.add_argument("--old-commit", help="the reference: this commit of the repository (see bench/oldversion.py)")
    parser.add_argument("--new", default=shutil.which("tprimat") or "tprimat", help="the tprimat executable measured")
    parser.add_argument("--inputs", default="console,tree,torchtitan", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="tprimat parse --jobs")
    parser.add_argument("--root", type=Path, default=Path("/tmp/tprimat-parse-versions"))
    parser.add_argument("--keep", action="store_true", help="keep the generated inputs")
    args = parser.parse_args()

    names = [name for name in args.inputs.split(",") if name]
    unknown = sorted(set(names) - set(SHAPES))
    if unknown:
        parser.error(f"unknown inputs: {', '.join(unknown)}")
    args.root.mkdir(parents=True, exist_ok=True)
    if args.old_commit is not None:
        args.old = str(old_executable(args.old_commit, args.root / "old"))
    inputs, sizes = {}, {}
    for name in names:
        build, size_mb = SHAPES[name]
        inputs[name] = build(args.root / (name if name.startswith("tree") else f"{name}.log"), size_mb)
        sizes[name] = _size(inputs[name]) / 1e6
    versions = {"old": args.old, "new": args.new}
    runs: dict[tuple[str, str], list[tuple[float, float, int, str]]] = {}
    try:
        for round_ in range(args.rounds):
            for name, source in inputs.items():
                for version, executable in versions.items():
                    output = args.root / f"{name}-{version}.json"
                    runs.setdefault((name, version), []).append(_run(executable, source, output, args.jobs))
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(args.root, ignore_errors=True)

    columns = ["input", "MB", "version", "wall s (min / median / max)", "MB/s (median)", "CPU s (median)"]
    print("| " + " | ".join([*columns, "peak RSS MiB", "same result"]) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for name in inputs:
        megabytes = sizes[name]
        same = same_results([run[3] for version in versions for run in runs[(name, version)]])
        for version in versions:
            measured = runs[(name, version)]
            walls = sorted(run[0] for run in measured)
            median = statistics.median(walls)
            rss = sorted({run[2] for run in measured})
            peak = f"{rss[0]}" if len(rss) == 1 else f"{rss[0]}–{rss[-1]}"
            print(
                f"| {name} | {megabytes:.0f} | {version} | {walls[0]:.2f} / {median:.2f} / {walls[-1]:.2f} "
                f"| {megabytes / median:.0f} | {statistics.median(run[1] for run in measured):.2f} "
                f"| {peak} | {'yes' if same else 'NO'} |"
            )


if __name__ == "__main__":
    main()
