"""Worker processes for work that splits into independent files: how many, and one call per file.

``tprimat parse`` cuts logs into ranges (:mod:`tprimat.parse.parallel`); trace
analysis reads one rank's trace per file, each on its own, so its files are
simply handed out with :func:`map_files`.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether this process may fork workers: ``fork`` exists and no other thread runs (a forked
    child has none of them, and a lock one of them held would stay held in the child)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def fork_pool(size: int) -> ProcessPoolExecutor:
    """``size`` forked worker processes (see :func:`can_fork`).

    An executor, not a ``multiprocessing.Pool``: a worker that dies (out of memory, killed)
    is an error here (``BrokenProcessPool``), where a Pool would wait for it forever.
    """
    return ProcessPoolExecutor(max_workers=size, mp_context=multiprocessing.get_context("fork"))


def map_files(function: Callable[[Any], T], items: Sequence[Any], workers: int | None = None) -> list[T]:
    """``[function(item) for item in items]``, on up to ``workers`` forked processes (default: every CPU).

    In this process when there is one worker or one item, or where :func:`can_fork` says no.
    ``function`` and its results travel between processes by pickle; an exception raised
    by a call is raised here, once the calls under way have ended.  The pool is ended and
    joined before this returns: a later fork needs a process without the pool's threads.
    """
    workers = default_workers() if workers is None else max(1, workers)
    if workers < 2 or len(items) < 2 or not can_fork():
        return [function(item) for item in items]
    pool = fork_pool(min(workers, len(items)))
    try:
        return list(pool.map(function, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after an error too: the calls under way end
