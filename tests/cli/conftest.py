"""Fixtures shared by the command tests: real torch CPU runs, made once per session.

A torch run on CPU costs a process tree that imports torch and transformers (seconds on
two cores), so runs that several tests read are made here once; the tests only read them.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from tprimat.cli import cli

#: One workload, small enough to train in a moment on CPU: six iterations, 1-2 warm-up,
#: 2-4 profiled (wait 1, warm-up 1, active 2), 5-6 measured; monitoring off (nothing to sample).
WORKLOAD = ("training.seq_length=64", "training.global_batch_size=2", "training.micro_batch_size=1",
            "monitor.enabled=false", "profile.wait=1", "profile.warmup=1", "profile.active=2",
            'parallel.strategy="ddp"')  # fmt: skip


@attrs.frozen
class ProfiledRuns:
    """Two profiled torch runs of one workload: one process, and two processes profiled on both ranks."""

    runs: Path  # holds exactly the two run directories
    one: Path  # `tprimat run --profile --nproc-per-node 1`
    one_output: str  # what `tprimat run` printed for ``one``
    two: Path  # `tprimat profile --nproc-per-node 2` with profile.ranks = [0, 1]
    two_output: str  # what `tprimat profile` printed for ``two``


def _invoke(command: str, nproc: int, runs: Path, run_id: str, *settings: str) -> str:
    args = [command, "--backend", "torch", "--model", "llama3.1-tiny", "--nproc-per-node", str(nproc),
            "--iterations", "6", "--output", str(runs), "--run-id", run_id]  # fmt: skip
    if command == "run":
        args.append("--profile")
    for setting in (*WORKLOAD, *settings):
        args += ["--set", setting]
    done = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


@pytest.fixture(scope="session")
def profiled_torch_cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> ProfiledRuns:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    runs = tmp_path_factory.mktemp("profiled-torch") / "runs"
    one_output = _invoke("run", 1, runs, "p1")
    two_output = _invoke("profile", 2, runs, "p2", "profile.ranks=[0, 1]")
    return ProfiledRuns(runs=runs, one=runs / "p1", one_output=one_output, two=runs / "p2", two_output=two_output)
