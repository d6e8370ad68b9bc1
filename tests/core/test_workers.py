"""Files handed out to worker processes, and calls made in a forked child: the same results as
calls made in this process."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tprimat import workers
from tprimat.errors import TprimatError
from tprimat.workers import YIELDING_NICENESS, default_workers, fork_call, map_files


def _pid_and_square(n: int) -> tuple[int, int]:
    return os.getpid(), n * n


def _fails_on_three(n: int) -> int:
    if n == 3:
        raise TprimatError(f"item {n} is unreadable")
    return n


def test_every_cpu_by_default():
    assert default_workers() == len(os.sched_getaffinity(0))


def test_results_keep_the_order_of_the_items_and_come_from_other_processes():
    found = map_files(_pid_and_square, list(range(12)), workers=2)
    assert [square for _, square in found] == [n * n for n in range(12)]
    assert os.getpid() not in {pid for pid, _ in found}
    assert threading.active_count() == 1  # the pool's threads ended before it returned


@pytest.mark.parametrize("workers, items", [(1, [1, 2, 3]), (4, [5])])
def test_one_worker_or_one_item_runs_here(workers, items):
    found = map_files(_pid_and_square, items, workers=workers)
    assert found == [(os.getpid(), n * n) for n in items]


def test_a_process_with_other_threads_runs_here():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        found = map_files(_pid_and_square, [1, 2], workers=2)
    finally:
        stop.set()
        other.join()
    assert found == [(os.getpid(), 1), (os.getpid(), 4)]


def test_an_error_in_a_worker_is_raised_here():
    with pytest.raises(TprimatError, match="item 3 is unreadable"):
        map_files(_fails_on_three, [1, 2, 3, 4], workers=2)
    assert threading.active_count() == 1


def _pid() -> int:
    return os.getpid()


@pytest.fixture
def two_cpus(monkeypatch):
    """A child is forked only where this process may run on two CPUs: say it may."""
    monkeypatch.setattr(workers, "default_workers", lambda: 2)


def test_a_forked_call_gives_the_child_s_value(two_cpus):
    with fork_call(_pid) as call:
        assert call.result() not in (os.getpid(), None)


def test_a_call_not_forked_is_made_here():
    with fork_call(_pid, fork=False) as call:
        assert call.result() == os.getpid()


def test_a_child_that_fails_leaves_the_call_to_be_made_here(two_cpus):
    parent = os.getpid()
    calls = []

    def fails_in_the_child() -> int:
        calls.append(os.getpid())  # seen here only for the call made here
        if os.getpid() != parent:
            raise TprimatError("the child cannot")
        return 7

    with fork_call(fails_in_the_child) as call:
        assert call.result() == 7
    assert calls == [parent]


def test_an_error_of_the_call_is_raised_here():
    with pytest.raises(TprimatError, match="item 3 is unreadable"):
        with fork_call(lambda: _fails_on_three(3)) as call:
            call.result()


def test_leaving_before_the_value_ends_the_child(tmp_path, two_cpus):
    started = tmp_path / "started"

    def waits() -> None:
        started.write_text("yes")
        time.sleep(600)

    with fork_call(waits) as call:
        pid = call._pid
        while not started.exists():
            time.sleep(0.01)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # ended and reaped


def test_a_process_on_one_cpu_makes_the_call_here(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    with fork_call(_pid) as call:
        assert call.result() == os.getpid()


def test_a_yielding_child_runs_at_a_lower_priority(two_cpus):
    here = os.nice(0)
    with fork_call(lambda: os.nice(0), yielding=True) as call:
        assert call.result() == min(here + YIELDING_NICENESS, 19)
    with fork_call(lambda: os.nice(0)) as call:
        assert call.result() == here
    assert os.nice(0) == here  # this process's own is left alone
