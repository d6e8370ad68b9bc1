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

#: Small enough to train in a moment on CPU; monitoring off (nothing to sample here).
SHORT = (
    "--set",
    "training.seq_length=64",
    "--set",
    "training.global_batch_size=2",
    "--set",
    "training.micro_batch_size=1",
    "--set",
    "monitor.enabled=false",
)

#: Six iterations: 1-2 warm-up, 2-4 profiled (wait 1, warm-up 1, active 2), 5-6 measured.
PROFILED = (
    "--iterations",
    "6",
    "--set",
    "profile.wait=1",
    "--set",
    "profile.warmup=1",
    "--set",
    "profile.active=2",
    "--set",
    'parallel.strategy="ddp"',
    *SHORT,
)


@attrs.frozen
class ProfiledRuns:
    """Two profiled torch runs of one workload: one process, and two processes profiled on both ranks."""

    runs: Path  # holds exactly the two run directories
    one: Path  # `tprimat run --profile --nproc-per-node 1`
    one_output: str  # what `tprimat run` printed for ``one``
    two: Path  # `tprimat profile --nproc-per-node 2` with profile.ranks = [0, 1]
    two_output: str  # what `tprimat profile` printed for ``two``


@pytest.fixture(scope="session")
def profiled_torch_cpu_runs(tmp_path_factory: pytest.TempPathFactory) -> ProfiledRuns:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    runs = tmp_path_factory.mktemp("profiled-torch") / "runs"
    one = CliRunner().invoke(
        cli,
        [
            "run",
            "--backend",
            "torch",
            "--profile",
            "--nproc-per-node",
            "1",
            "--output",
            str(runs),
            "--run-id",
            "p1",
            "--model",
            "llama3.1-tiny",
            *PROFILED,
        ],
        catch_exceptions=False,
    )
    assert one.exit_code == 0, one.output
    two = CliRunner().invoke(
        cli,
        [
            "profile",
            "--backend",
            "torch",
            "--nproc-per-node",
            "2",
            "--output",
            str(runs),
            "--run-id",
            "p2",
            "--model",
            "llama3.1-tiny",
            "--set",
            "profile.ranks=[0, 1]",
            *PROFILED,
        ],
        catch_exceptions=False,
    )
    assert two.exit_code == 0, two.output
    return ProfiledRuns(runs=runs, one=runs / "p1", one_output=one.output, two=runs / "p2", two_output=two.output)
