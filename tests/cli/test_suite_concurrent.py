"""Two ``tprimat suite resume`` of one suite at once: the second never touches the first's work.

Real processes through the real CLI.  The first resume's training is frozen
(SIGSTOP) as soon as it is seen, so the second resume meets it mid-training
whatever the speed of the machine: it must be refused (exit code 2, naming the
holder), kill nothing and charge no attempt; a third, with ``--wait``, starts
once the first is done and finds nothing left to do.  The toy backend is the
fast case; the torch backend shows it with a real training process tree.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.cli.test_suite_kill_resume import MARK, _torch_ready, _toy_available, marked_processes
from tprimat.result.schema import load_result
from tprimat.suite.campaign import expand, init_suite_dir

pytestmark = pytest.mark.slow

TOY = """
[suite]
name = "toy-concurrent"
backends = ["toy"]
models = ["llama3.1-tiny"]
iterations = 20
"""

TORCH = """
[suite]
name = "torch-concurrent"
backends = ["torch"]
models = ["llama3.1-tiny"]
precisions = ["fp32"]
iterations = 3
set = ["training.seq_length=32", "training.global_batch_size=2", "training.micro_batch_size=1",
       "benchmark.warmup_iterations=1", "launch.nproc_per_node=1", "monitor.enabled=false"]
"""

#: How each backend's training process shows in its command line.
TRAINER = {"toy": "toy_train.py", "torch": "tprimat.plugins.torch.train"}


def resume(directory: Path, mark: str, log: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, **{MARK: mark}, PYTHONUNBUFFERED="1", TOY_STEP_MS="20")
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tprimat.cli", "suite", "resume", str(directory), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("toy", marks=pytest.mark.skipif(not _toy_available(), reason="the example plugin is needed")),
        pytest.param(
            "torch",
            marks=[pytest.mark.torch, pytest.mark.skipif(not _torch_ready(), reason="torch and transformers needed")],
        ),
    ],
)
def test_a_second_resume_is_refused_and_the_first_finishes_untouched(tmp_path, backend):
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(TOY if backend == "toy" else TORCH)
    directory = tmp_path / "campaign"
    spec = init_suite_dir(suite_file, directory)
    (run,) = expand(spec)
    mark = uuid.uuid4().hex

    first = resume(directory, mark, tmp_path / "first.log")
    trainer = None
    try:
        trainer = wait_for(
            lambda: next((pid for pid, cmd in marked_processes(mark).items() if TRAINER[backend] in cmd), None),
            "the first resume's training process",
        )
        os.kill(trainer, signal.SIGSTOP)  # mid-training, for as long as the test needs

        second = resume(directory, mark, tmp_path / "second.log")
        assert second.wait(timeout=120) == 2
        refused = (tmp_path / "second.log").read_text()
        assert "Traceback" not in refused
        assert f"is in use by another tprimat command (pid {first.pid} on {socket.gethostname()}, started " in refused
        assert f"suite resume {directory}" in refused  # the holder's command
        assert trainer in marked_processes(mark), "the refused resume killed the first one's training"

        third = resume(directory, mark, tmp_path / "third.log", "--wait")
        wait_for(lambda: "waiting for it to end" in (tmp_path / "third.log").read_text(), "the --wait message")
    finally:
        if trainer is not None:
            os.kill(trainer, signal.SIGCONT)
    assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()
    result_path = directory / "runs" / run.id / "result.json"
    identity = (result_path.stat().st_ino, result_path.stat().st_mtime_ns)
    assert third.wait(timeout=120) == 0, (tmp_path / "third.log").read_text()
    assert "suite: starting" not in (tmp_path / "third.log").read_text()  # nothing left to run

    assert load_result(result_path).run.status == "completed"
    assert (result_path.stat().st_ino, result_path.stat().st_mtime_ns) == identity
    assert json.loads((directory / "state.json").read_text())["attempts"] == {run.id: 1}
    assert not (directory / "runs" / ".attempts").exists()
