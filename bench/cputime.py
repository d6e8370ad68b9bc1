"""CPU time for the benchmarks: this process's and its waited-for children's.

A long run's parse hands a share of its summary and of its result file to a forked child
(``tprimat.workers.fork_call``); CPU counted for this process alone would leave that out.
"""

from __future__ import annotations

import resource


def cpu_s() -> float:
    """CPU seconds (user and system) of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
