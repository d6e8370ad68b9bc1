"""What a job leaves outside its process group is found by its environment marker and killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchPlan
from tprimat.running.orphans import kill_marked, marked_processes
from tprimat.running.supervise import RUNNER_PID_ENV, ProcessExecution

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_marked_processes_are_found_and_killed(tmp_path):
    marked = subprocess.Popen(SLEEPER, env=dict(os.environ, TPRIMAT_TEST_ORPHAN="a"), start_new_session=True)
    other = subprocess.Popen(SLEEPER, env=dict(os.environ, TPRIMAT_TEST_ORPHAN="b"))
    try:
        deadline = time.monotonic() + 5
        while marked.pid not in marked_processes("TPRIMAT_TEST_ORPHAN", "a") and time.monotonic() < deadline:
            time.sleep(0.05)  # the environment is readable once the exec is done
        assert marked_processes("TPRIMAT_TEST_ORPHAN", "a") == [marked.pid]
        assert kill_marked("TPRIMAT_TEST_ORPHAN", "a") == [marked.pid]
        marked.wait(timeout=5)
        assert other.poll() is None  # another value is left alone
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


def test_a_worker_in_its_own_session_does_not_outlive_the_job(tmp_path):
    # A launcher that starts a worker in a session of its own (as torchrun does) and exits
    # without waiting for it: killing the launcher's group cannot reach the worker.
    launcher = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid, flush=True)"
    )
    execution = ProcessExecution(
        LaunchPlan(argv=(sys.executable, "-c", launcher)), tmp_path / "launcher.log", grace_s=1
    )
    execution.start()
    lines = list(execution.lines())
    worker = int(lines[0])
    environ = Path(f"/proc/{worker}/environ").read_bytes().split(b"\0")
    assert f"{RUNNER_PID_ENV}={os.getpid()}".encode() in environ
    assert execution.wait() == 0
    assert _gone(worker), "the worker outlived the job"


def test_a_suite_kills_what_an_earlier_attempt_left_running(tmp_path):
    """A suite killed mid-run leaves its lock behind and a worker running: the next suite
    command takes the lock over and stops that worker before the run starts again."""
    from tprimat.suite.campaign import SUITE_TOKEN_ENV, expand, init_suite_dir, run_suite

    suite_file = tmp_path / "suite.toml"
    suite_file.write_text('[suite]\nname = "o"\nbackends = ["toy"]\nmodels = ["llama3.1-tiny"]\n')
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    # A suite command holding the lock, whose run left a worker that asked for no death signal.
    killed_suite = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            "from pathlib import Path\n"
            "from tprimat.suite.lock import acquire\n"
            f"lock = acquire(Path({str(directory)!r}))\n"
            "env = dict(os.environ, " + SUITE_TOKEN_ENV + "=lock.holder.token)\n"
            f"worker = subprocess.Popen({SLEEPER!r}, env=env, start_new_session=True)\n"
            "print(worker.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    leftover = int(killed_suite.stdout.readline())
    killed_suite.kill()
    killed_suite.wait()
    assert _alive(leftover)
    try:
        seen_alive = []
        run_suite(spec, directory, launcher=lambda argv: seen_alive.append(_alive(leftover)) or 1)
        assert seen_alive == [False] * len(expand(spec))  # stopped before the run started
    finally:
        if _alive(leftover):
            os.kill(leftover, 9)
