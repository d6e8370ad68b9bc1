"""An example third-party tprimat plugin providing the ``toy`` backend.

The toy "framework" is a tiny Python program that sleeps for a fixed time per
step and prints one line per step, ``toy step N time_ms T loss L``.  It is
small on purpose: it shows every piece a real backend has (declaration with
its own launch option and log sniffer, launch plan, streaming parser) with
nothing else in the way, and it imports only ``tprimat.contract``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Sequence

import tprimat
from tprimat.contract import (
    BackendSpec,
    IterationRecord,
    LaunchContext,
    LaunchOption,
    LaunchPlan,
    LogFact,
    LogMatch,
    ParseIssue,
    Requirements,
)

_STEP = re.compile(r"^toy step (\d+) time_ms ([\d.]+) loss ([-\w.+]+)\s*$")
_BATCH = re.compile(r"^toy global_batch_size (\d+)\s*$")


def sniff(lines: Sequence[str], source: str) -> LogMatch | None:
    """A toy log: its step line (cheap, no imports: ``tprimat parse`` calls it on every file it reads)."""
    for number, line in enumerate(lines, start=1):
        if _STEP.match(line):
            return LogMatch(confidence=0.9, evidence=f"toy step line at {source}:{number}")
    return None


TOY = BackendSpec(
    name="toy",
    platform="any",
    framework="toy",
    description="Example backend: a sleeping loop that logs one line per step",
    requires=Requirements(python=("tprimat_example",)),
    options=(
        LaunchOption(name="toy_step_ms", kind="int", env="TOY_STEP_MS", help="Milliseconds each toy step sleeps"),
    ),
    sniff=sniff,
)

_PROGRAM = """
import sys, time
steps, step_ms, gbs = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print(f"toy global_batch_size {gbs}", flush=True)
for step in range(1, steps + 1):
    start = time.perf_counter()
    time.sleep(step_ms / 1000)
    elapsed = (time.perf_counter() - start) * 1000
    print(f"toy step {step} time_ms {elapsed:.3f} loss {10.0 / step:.4f}", flush=True)
"""


@tprimat.hookimpl
def register_backends() -> list[BackendSpec]:
    return [TOY]


@tprimat.hookimpl
def launch(backend: str, context: LaunchContext) -> LaunchPlan:
    config = context.config
    return LaunchPlan(
        argv=(
            sys.executable,
            "toy_train.py",
            str(config.benchmark.iterations),
            str(context.options.get("toy_step_ms", 5)),
            str(config.training.global_batch_size),
        ),
        cwd=context.run_dir,
        files={"toy_train.py": _PROGRAM},
        description="toy training loop",
    )


@tprimat.hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator:
    return _parse(lines, source)


def _parse(lines: Iterable[str], source: str) -> Iterator:
    for number, line in enumerate(lines, start=1):
        if match := _STEP.match(line):
            try:
                loss = float(match.group(3))
            except ValueError:
                yield ParseIssue(source=f"{source}:{number}", message="unreadable loss")
                continue
            yield IterationRecord(
                iteration=int(match.group(1)),
                step_time_s=float(match.group(2)) / 1000,
                loss=loss,
                source=f"{source}:{number}",
            )
        elif match := _BATCH.match(line):
            yield LogFact(key="global_batch_size", value=int(match.group(1)), source=f"{source}:{number}")
        elif line.startswith("toy "):
            yield ParseIssue(source=f"{source}:{number}", message="unrecognised toy line")
