"""Benchmark: the work after collection, per record, on a dense log's records kept in a file.

A ``bench/denselogs.py`` log is parsed once by ``parse_logs`` (one worker); the records it
collected (a :class:`~tprimat.result.spill.RecordSequence`, as the collector hands them on) and
everything else it gives :func:`~tprimat.result.builder.assemble_result` are kept.  Then, on
those same records, each stage after collection is timed alone, CPU time per record:

* ``summarize``: per-iteration throughput, the checks (gaps, warm-up, profiled, untimed and
  implausible iterations) and the statistics of every figure;
* ``memory_report``: the memory section (the records' memory peaks);
* ``with_step_clock``: the times of evaluations the log does not time, one every 1000
  iterations, from the step times (the dense logs have no evaluation lines: these are made up);
* ``assemble_result``: the whole result, the two above included;
* ``write_result``: the result file, CPU time of this process and of any child it waited for
  (versions before schema 5 encoded half of the records in a forked child: wall time is
  printed too).

Each stage is the best of ``--repeat`` runs.  The SHA-256 of the result file (the temporary
folder's name and the run id left out) is printed, so that two versions' files can be compared
(``--output`` keeps that file).  ``--profile N`` prints the N most costly functions (own time) of
one ``assemble_result`` and ``write_result``.  Run with ``PYTHONPATH`` pointing at another
version's package (see ``bench/oldversion.py``) to time that version on the same log.

    python bench/summary_profile.py [--kind primus] [--size-mb 300] [--repeat 3] [--profile 25] [--output FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import pstats
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import denselogs  # noqa: E402  (bench/ is not a package)
from cputime import cpu_s  # noqa: E402


def _timed(function: Any) -> tuple[float, float]:
    """CPU and wall seconds of one call of ``function``."""
    cpu, wall = cpu_s(), time.perf_counter()
    function()
    return cpu_s() - cpu, time.perf_counter() - wall


def _captured(path: Path, backend: str) -> dict[str, Any]:
    """What ``parse_logs`` of ``path`` gives ``assemble_result`` (keyword arguments)."""
    import tprimat.parse.logs as logs
    from tprimat.contract.registry import Registry

    found: dict[str, Any] = {}
    real = logs.assemble_result

    def capture(**kwargs: Any) -> Any:
        found.update(kwargs)
        return real(**kwargs)

    logs.assemble_result = capture  # type: ignore[assignment]
    try:
        logs.parse_logs([path], registry=Registry.from_environment(), backend=backend, workers=1)
    finally:
        logs.assemble_result = real  # type: ignore[assignment]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="primus", choices=denselogs.KINDS)
    parser.add_argument("--size-mb", type=float, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="print this many functions of a cProfile run")
    parser.add_argument("--output", type=Path, help="keep the result file here (the folder's name left out)")
    args = parser.parse_args()

    from tprimat.result.builder import assemble_result
    from tprimat.result.convergence import with_step_clock
    from tprimat.result.memory import memory_report
    from tprimat.result.metrics import summarize, with_throughput
    from tprimat.result.resultjson import write_result
    from tprimat.result.schema import EvalPoint

    with tempfile.TemporaryDirectory(prefix="tprimat-summary-profile-") as folder:
        path, iterations = denselogs.build_dense(Path(folder) / f"{args.kind}.log", args.kind, args.size_mb)
        given = _captured(path, denselogs.BACKENDS[args.kind])
        records, config = given["records"], given["config"]
        result: list[Any] = []
        output = Path(folder) / "result.json"

        def filled() -> Any:
            return with_throughput(
                records,
                global_batch_size=config.global_batch_size,
                seq_length=config.seq_length,
                world_size=config.world_size,
                owned=True,
            )

        def summary() -> None:
            summarize(
                filled(),
                model=None,
                seq_length=config.seq_length,
                world_size=config.world_size,
                precision=config.precision,
                device_name=None,
                warmup_iterations=given["warmup_iterations"],
            )

        def memory() -> None:
            memory_report(
                settings=config.settings,
                model_name=config.model,
                trainer=given["trainer"],
                device_name=None,
                capacity_gib=None,
                records=filled(),
            )

        every = range(1000, len(records) + 1, 1000)
        points = [EvalPoint(iteration=iteration, eval_loss=1.0) for iteration in every]

        def step_clock() -> None:
            with_step_clock(points, filled())

        def assemble() -> None:
            result[:] = [assemble_result(**given)]

        def write() -> None:
            write_result(result[0], output)

        stages = {
            "summarize": summary,
            "memory_report": memory,
            "with_step_clock": step_clock,
            "assemble_result": assemble,
            "write_result": write,
        }
        best = {
            name: min((_timed(stage) for _ in range(args.repeat)), key=lambda t: t[0]) for name, stage in stages.items()
        }
        # The file names the log's temporary folder, and its run id is made from it: left out, the
        # digest is the same for any version.
        text = re.sub(
            rb'"id": "log-[^"]*"', b'"id": "ID"', output.read_bytes().replace(folder.encode(), b"FOLDER"), count=1
        )
        digest = hashlib.sha256(text).hexdigest()
        if args.output:
            args.output.write_bytes(text)
        print(
            f"{args.kind}: {path.stat().st_size / 1e6:.0f} MB, {iterations} iterations, {len(records)} records "
            f"({type(records).__name__}), best of {args.repeat}; result file sha256 {digest[:16]}"
        )
        print("| stage | CPU s | wall s | µs per record (CPU) |")
        print("|---|---|---|---|")
        for name, (cpu, wall) in best.items():
            print(f"| {name} | {cpu:.2f} | {wall:.2f} | {cpu / len(records) * 1e6:.2f} |")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(assemble)
            profile.runcall(write)
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.profile)
            print(text.getvalue())


if __name__ == "__main__":
    main()
