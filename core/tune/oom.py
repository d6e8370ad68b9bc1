"""Out-of-memory deaths, recognised in a run's log.

A trial that runs out of device memory tells the tuner something true about
its configuration (it does not fit), so it is recorded as *infeasible*, not as
a failure.  The patterns are the messages PyTorch's CUDA and HIP allocators
raise (``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...``,
``HIP out of memory``), the older ``RuntimeError: CUDA error: out of memory``,
and the runtime's ``hipErrorOutOfMemory``/``cudaErrorMemoryAllocation``; rank
prefixes such as ``[rank0]:`` are allowed before them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_OOM = re.compile(
    r"(OutOfMemoryError|(CUDA|HIP) out of memory|CUDA error: out of memory|hipErrorOutOfMemory"
    r"|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory)"
)


def find_oom(lines: Iterable[str]) -> str | None:
    """The first line that reports an out-of-memory death (stripped, at most 300 characters)."""
    for line in lines:
        if _OOM.search(line):
            return line.strip()[:300]
    return None


def oom_in_run(run_dir: Path) -> str | None:
    """``"<file>: <line>"`` for the first out-of-memory line in a run's logs, else None."""
    logs = run_dir / "logs"
    if not logs.is_dir():
        return None
    for path in sorted(logs.rglob("*")):
        if not path.is_file():
            continue
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                found = find_oom(handle)
        except OSError:
            continue
        if found:
            return f"{path.relative_to(run_dir)}: {found}"
    return None
