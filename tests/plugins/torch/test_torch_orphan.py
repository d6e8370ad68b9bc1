"""A worker started after its launcher was killed exits instead of training on as an orphan."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tprimat.plugins.torch.train import _runner_is_ancestor

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

PROGRAM = "from tprimat.plugins.torch.train import _die_with_parent; _die_with_parent(); print('alive', flush=True)"


def test_ancestry_is_read_from_proc():
    assert _runner_is_ancestor(os.getppid())
    assert _runner_is_ancestor(os.getpid()) is False  # itself is not an ancestor


def _worker(env: dict[str, str]) -> subprocess.CompletedProcess:
    # sys.executable -c runs a grandchild under a shell-free intermediate python, as torchrun does.
    middle = f"import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {PROGRAM!r}]).returncode)"
    return subprocess.run([sys.executable, "-c", middle], env=env, capture_output=True, text=True, timeout=60)


def test_a_worker_still_under_its_runner_trains():
    env = dict(os.environ, TPRIMAT_RUNNER_PID=str(os.getpid()))
    done = _worker(env)
    assert done.returncode == 0 and done.stdout == "alive\n", done.stderr


def test_a_worker_no_longer_under_its_runner_exits_at_once():
    # What an orphan sees: the runner it was started for is not among its ancestors.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        env = dict(os.environ, TPRIMAT_RUNNER_PID=str(other.pid))
        done = _worker(env)
    finally:
        other.kill()
        other.wait()
    assert done.returncode == 137 and done.stdout == ""


def test_without_a_runner_nothing_is_checked():
    env = {k: v for k, v in os.environ.items() if k != "TPRIMAT_RUNNER_PID"}
    assert _worker(env).stdout == "alive\n"
