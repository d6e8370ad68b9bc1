"""Files handed out to worker processes: the same results, in order, as a loop in this process."""

from __future__ import annotations

import os
import threading

import pytest

from tprimat.errors import TprimatError
from tprimat.workers import default_workers, map_files


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
