"""Benchmark: where the wall time of one ``tprimat parse -o`` goes, step by step, on a dense log.

``tprimat parse`` reads the ranges (workers), checks what the log states, summarises the records
and writes the result.  This runs those steps as the command does (``parse_logs(..., written=True)``
with the default workers, then ``write_result``) on one ``bench/denselogs.py`` log, and prints
when each step started and ended (wall seconds from the start) and how long it took: which part
of the run a change shortened.  CPU seconds of the whole process tree (the forked children
included, see ``cputime``) are printed below the table.  ``bench/dense_profile.py`` gives the
CPU per record of each stage in one process instead.  Run with ``PYTHONPATH`` pointing at another
version's package (``bench/oldversion.py`` lays one out under ``FOLDER/path``) to time that version
(one without ``written`` is called without it).

    python bench/parse_phases.py [--kind primus] [--size-mb 1024] [--log PATH]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)
from cputime import cpu_s  # noqa: E402

#: The steps of ``parse_logs`` timed, by the name of the function that makes each.
STEPS = {
    "_read_files": "read the ranges",
    "_checked_config": "check the workload",
    "_missing_iterations": "find missing iterations",
    "assemble_result": "summarise (and write the iterations ahead)",
}


def _timed(function: Callable[..., Any], label: str, rows: list[tuple[str, float, float]], start: float) -> Any:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            rows.append((label, began - start, time.perf_counter() - start))

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="primus", choices=denselogs.KINDS)
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--log", type=Path, help="an existing log of that kind, instead of building one")
    args = parser.parse_args()

    import tprimat.parse.logs as logs
    from tprimat.contract.registry import Registry
    from tprimat.result.resultjson import write_result

    with tempfile.TemporaryDirectory(prefix="tprimat-parse-phases-") as folder:
        path = args.log or denselogs.build_dense(Path(folder) / f"{args.kind}.log", args.kind, args.size_mb)[0]
        registry = Registry.from_environment()
        rows: list[tuple[str, float, float]] = []
        cpu_before, start = cpu_s(), time.perf_counter()
        for name, label in STEPS.items():
            setattr(logs, name, _timed(getattr(logs, name), label, rows, start))
        ahead = {"written": True} if "written" in inspect.signature(logs.parse_logs).parameters else {}
        outcome = logs.parse_logs([path], registry=registry, backend=denselogs.BACKENDS[args.kind], **ahead)
        _timed(write_result, "write the result (wait, copy)", rows, start)(outcome.result, Path(folder) / "r.json")
        total, cpu = time.perf_counter() - start, cpu_s() - cpu_before
        print(f"{args.kind}: {path.stat().st_size / 1e6:.0f} MB, {len(outcome.result.iterations):,} records")
        print("| step | from s | to s | wall s |")
        print("|---|---|---|---|")
        for label, began, ended in rows:
            print(f"| {label} | {began:.2f} | {ended:.2f} | {ended - began:.2f} |")
        print(f"| whole | 0.00 | {total:.2f} | {total:.2f} |")
        print(f"CPU s of the process tree: {cpu:.1f}")


if __name__ == "__main__":
    main()
