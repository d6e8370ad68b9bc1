"""Text made by a forked child: read back whole, never forked beside threads, never left running."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tprimat.result.childtext import TextInChild


def _pieces():
    return [f"piece {i} \u00e9\n" * 1000 for i in range(300)]  # some 4 MB, not all ASCII


def test_the_child_s_text_is_read_back_whole():
    if threading.active_count() > 1:
        pytest.skip("another thread runs in this test process: no child is forked")
    child = TextInChild.start(_pieces)
    assert child is not None
    try:
        assert "".join(child.pieces()) == "".join(_pieces())
    finally:
        child.close()


def test_no_child_is_forked_beside_another_thread():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert TextInChild.start(lambda: ["text"]) is None
    finally:
        stop.set()
        thread.join()


def test_an_unused_child_is_ended_and_reaped(monkeypatch):
    if threading.active_count() > 1:
        pytest.skip("another thread runs in this test process: no child is forked")
    child = TextInChild.start(lambda: [str(time.sleep(60))])
    assert child is not None
    pid = child._pid
    statuses = []
    real_waitpid = os.waitpid

    def recording_waitpid(waited, options):
        found = real_waitpid(waited, options)
        statuses.append(found)
        return found

    monkeypatch.setattr(os, "waitpid", recording_waitpid)
    child.close()
    # Ended by close (killed), not waited for until its work was done.
    assert [(p, os.waitstatus_to_exitcode(status)) for p, status in statuses] == [(pid, -signal.SIGKILL)]
    with pytest.raises(ChildProcessError):  # reaped: no longer this process's child
        os.waitpid(pid, os.WNOHANG)
