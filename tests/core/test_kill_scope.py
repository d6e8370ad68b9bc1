"""Killing what a job left behind reaches that job's processes and never another command's.

A job's leftovers (workers in sessions of their own) are found by a marker made
for that job alone; a suite's by a marker made for that suite command alone.
Two jobs of one runner, or two suite commands on the same run directory, never
share one, so neither can kill the other's training.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchPlan
from tprimat.running.supervise import ProcessExecution

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]

#: A launcher that starts a worker in a session of its own (as torchrun does), prints its pid,
#: then stays (argv[1] == "stay") or exits at once.
LAUNCHER = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True,\n"
    "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(p.pid, flush=True)\n"
    "if sys.argv[1] == 'stay':\n"
    "    time.sleep(60)\n"
)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def kill(*pids: int) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, 9)


def first_line(execution: ProcessExecution) -> str:
    return next(iter(execution.lines()))


def test_the_end_of_one_job_does_not_kill_another_jobs_processes(tmp_path):
    running = ProcessExecution(LaunchPlan(argv=(sys.executable, "-c", LAUNCHER, "stay")), tmp_path / "a.log")
    running.start()
    worker_running = int(first_line(running))
    ending = ProcessExecution(LaunchPlan(argv=(sys.executable, "-c", LAUNCHER, "exit")), tmp_path / "b.log")
    ending.start()
    worker_ending = int(first_line(ending))
    try:
        ending.drain()
        assert ending.wait() == 0
        assert gone(worker_ending), "the job's own leftover outlived it"
        # The other job, started by the same runner process, is untouched: its launcher and its worker.
        assert running.proc.poll() is None and alive(worker_running)
    finally:
        running.signal_group(9)
        running.drain()
        running.wait()
        kill(worker_running, worker_ending)
    assert gone(worker_running)


def test_a_suite_never_kills_the_processes_of_another_command_on_the_same_run(tmp_path, monkeypatch):
    import tprimat.suite.campaign as campaign

    suite_file = tmp_path / "suite.toml"
    suite_file.write_text('[suite]\nname = "o"\nbackends = ["toy"]\nmodels = ["llama3.1-tiny"]\n')
    directory = tmp_path / "out"
    spec = campaign.init_suite_dir(suite_file, directory)
    (run,) = campaign.expand(spec)
    run_dir = (directory / "runs" / run.id).absolute()
    # Another command's training of the same run (an earlier version marked processes by run directory).
    other = subprocess.Popen(
        SLEEPER,
        env=dict(os.environ, TPRIMAT_SUITE_RUN=str(run_dir), TPRIMAT_SUITE_TOKEN="suite-another-command"),
        start_new_session=True,
    )
    own: list[int] = []

    def launch(argv, env=None):  # this suite's run: leaves a worker behind in its own session
        worker = subprocess.Popen(SLEEPER, env=dict(os.environ, **(env or {})), start_new_session=True)
        own.append(worker.pid)
        time.sleep(0.3)  # its environment is readable once the exec is done
        return 1

    monkeypatch.setattr(campaign, "_launch_child", launch)
    try:
        campaign.run_suite(spec, directory)
        assert len(own) == 1 and gone(own[0]), "the suite's own leftover outlived its run"
        assert other.poll() is None and alive(other.pid), "the suite killed another command's process"
    finally:
        other.kill()
        other.wait()
        kill(*own)
