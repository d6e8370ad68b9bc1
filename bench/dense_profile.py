"""Benchmark: where a dense log's time goes, per record, in one process (``--jobs 1``).

For one kind of ``bench/denselogs.py`` log, CPU time per iteration record of each stage (with the
forked children's the summary and the writer wait for):

* the parser alone (the backend's ``parse_metrics`` over a ``LogFile``, events counted, nothing kept);
* ``parse_logs`` with one worker (the parser, collection, checks and summary);
* writing the result file.

Each stage is the best of ``--repeat`` runs (the machine may be shared).  With ``--profile N`` the
parse is also run under cProfile and its N most costly functions (own time) are printed.  Run with
``PYTHONPATH`` pointing at another version's package to profile that version the same way.

    python bench/dense_profile.py [--kind primus] [--size-mb 60] [--repeat 3] [--profile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)
from cputime import cpu_s  # noqa: E402


def _cpu(function) -> float:
    """CPU seconds of ``function()``, with the children it forked (see ``cputime``)."""
    start = cpu_s()
    function()
    return cpu_s() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="primus", choices=denselogs.KINDS)
    parser.add_argument("--size-mb", type=float, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="print this many functions of a cProfile run")
    args = parser.parse_args()

    from tprimat.contract.logfile import LogFile
    from tprimat.contract.registry import Registry
    from tprimat.parse.logs import parse_logs
    from tprimat.result.resultjson import write_result

    registry = Registry.from_environment()
    backend = denselogs.BACKENDS[args.kind]
    with tempfile.TemporaryDirectory(prefix="tprimat-dense-profile-") as folder:
        path, iterations = denselogs.build_dense(Path(folder) / f"{args.kind}.log", args.kind, args.size_mb)
        outcome = []

        def parser_only() -> None:
            for _ in registry.parse_metrics(backend, lines=LogFile(path), source=path.name):
                pass

        def parse() -> None:
            outcome[:] = [parse_logs([path], registry=registry, backend=backend, workers=1)]

        def write() -> None:
            write_result(outcome[0].result, Path(folder) / "result.json")

        stages = {"parser alone": parser_only, "parse_logs, 1 worker": parse, "write the result": write}
        best = {name: min(_cpu(stage) for _ in range(args.repeat)) for name, stage in stages.items()}
        size = path.stat().st_size
        print(f"{args.kind}: {size / 1e6:.0f} MB, {iterations} iterations, best of {args.repeat}")
        print("| stage | CPU s | µs per record | records per CPU-second |")
        print("|---|---|---|---|")
        for name, seconds in best.items():
            print(f"| {name} | {seconds:.2f} | {seconds / iterations * 1e6:.1f} | {iterations / seconds:,.0f} |")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(parse)
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.profile)
            print(text.getvalue())


if __name__ == "__main__":
    main()
