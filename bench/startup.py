"""Start-up time of ``tprimat backends`` and ``tprimat --help``, one or more installations side by side.

Each installation is named by its ``tprimat`` command (default: the one beside
this Python).  The commands run in turn, round by round, so that a slow minute
of the machine hits every installation alike; the table gives the median, the
fastest and the slowest wall time of each.

Bytecode is cached the way any installed package has it (see
:mod:`bytecode`, next to this file), filled by warm-up runs.

    python bench/startup.py --repeat 10
    python bench/startup.py --tprimat /path/to/old-venv/bin/tprimat --tprimat /path/to/new-venv/bin/tprimat
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bytecode import cached_bytecode_env  # noqa: E402

#: The commands timed, with the targets tprimat keeps on a 2-core machine (seconds).
COMMANDS = {"backends": (["backends"], 0.2), "--help": (["--help"], 0.1)}
WARMUP_RUNS = 2


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def measure(executables: list[str], repeat: int) -> dict[tuple[str, str], list[float]]:
    """Wall times by (executable, command), the executables taking turns within each round."""
    with cached_bytecode_env() as env:
        for exe in executables:
            for args, _target in COMMANDS.values():
                for _ in range(WARMUP_RUNS):
                    _time([exe, *args], env)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(repeat):
            for exe in executables:
                for name, (args, _target) in COMMANDS.items():
                    times.setdefault((exe, name), []).append(_time([exe, *args], env))
        return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tprimat",
        action="append",
        dest="executables",
        help="a tprimat command to time (repeatable; default: the one beside this Python)",
    )
    parser.add_argument("--repeat", type=int, default=10, help="rounds (default 10)")
    args = parser.parse_args(argv)
    executables = args.executables or [str(Path(sys.executable).with_name("tprimat"))]
    times = measure(executables, args.repeat)
    print(f"{args.repeat} rounds after {WARMUP_RUNS} warm-up runs, bytecode cached")
    print("| tprimat | command | median s | min s | max s | target s |")
    print("|---|---|---:|---:|---:|---:|")
    for (exe, name), values in times.items():
        target = COMMANDS[name][1]
        print(
            f"| {exe} | {name} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} | {target} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
