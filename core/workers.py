"""Worker processes for work that splits into independent files: how many, and one call per file.

``tprimat parse`` cuts logs into ranges (:mod:`tprimat.parse.parallel`); trace
analysis reads one rank's trace per file, each on its own, so its files are
simply handed out with :func:`map_files`.  Once a long log is read, the summary and
the result file each hand one share of their work to a forked child (:func:`fork_call`)
and do the rest meanwhile.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import IO, Any, Generic, TypeVar

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


class ForkedCall(Generic[T]):
    """A call made in a forked child while this process goes on (see :func:`fork_call`)."""

    def __init__(self, function: Callable[[], T], pid: int | None, output: IO[bytes] | None) -> None:
        self._function = function
        self._pid = pid
        self._output = output

    def result(self) -> T:
        """The call's value: the child's, or where no child ran or it failed, the call made here
        (which raises what the call raises: an error is never the child's alone)."""
        if self._pid is not None and self._output is not None:
            _, status = os.waitpid(self._pid, 0)
            self._pid = None
            with self._output:
                if os.waitstatus_to_exitcode(status) == 0:
                    self._output.seek(0)
                    return pickle.load(self._output)  # noqa: S301  # written by this process's own child
        return self._function()

    def cancel(self) -> None:
        """End the child if it still runs (this process no longer wants its value)."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:  # it had ended
                pass
            os.waitpid(self._pid, 0)
            self._pid = None
        if self._output is not None:
            self._output.close()

    def __enter__(self) -> ForkedCall[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()


def fork_helps() -> bool:
    """Whether a forked child would work beside this process: it may fork (:func:`can_fork`) and
    may run on two CPUs or more (on one, a child would only take turns with it)."""
    return default_workers() >= 2 and can_fork()


#: The niceness a yielding child adds to its own (see :func:`fork_call`).
YIELDING_NICENESS = 10


def fork_call(function: Callable[[], T], *, fork: bool = True, yielding: bool = False) -> ForkedCall[T]:
    """Start ``function()`` in a forked child; its value comes back by :meth:`ForkedCall.result`.

    The child sees this process's memory as it was (records in a file are read there through
    the same open files), and sends its value back pickled through a temporary file.  With
    ``fork`` False, or where a child would not help (:func:`fork_helps`), nothing starts and
    :meth:`ForkedCall.result` makes the call here.  ``function`` must give the same value
    wherever it runs, and change nothing this process keeps: it may run in the child and again
    here.  A ``yielding`` child runs at a lower priority (:data:`YIELDING_NICENESS`): work
    started ahead of when it is needed, which should take what CPU this process and its other
    children leave, not slow them.
    """
    if not fork or not fork_helps():
        return ForkedCall(function, None, None)
    output = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: it never returns from here
        code = 1
        try:
            if yielding:
                os.nice(YIELDING_NICENESS)
            value = function()
            with open(output.fileno(), "wb", closefd=False) as sent:
                pickle.dump(value, sent, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)  # no exit handlers, no flushing of this process's buffers a second time
    return ForkedCall(function, pid, output)
