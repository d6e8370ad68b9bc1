"""``tprimat suite run --slurm``: every run of a suite as a real SLURM job (marker ``slurm``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tprimat.result.schema import load_result

SUITE = """
[suite]
name = "slurm-demo"
backends = ["torch"]
models = ["llama3.1-tiny"]
precisions = ["fp32"]
repeats = 2
iterations = 3
set = ["training.seq_length=32", "training.global_batch_size=2", "training.micro_batch_size=1",
       "launch.nproc_per_node=1", "benchmark.warmup_iterations=1", "monitor.enabled=false"]
"""


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.torch
def test_a_suite_runs_its_runs_as_slurm_jobs_and_resumes_with_nothing_to_do(slurm_cluster, tmp_path):
    pytest.importorskip("torch")
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(SUITE)
    directory = tmp_path / "suite"
    cli = [sys.executable, "-m", "tprimat.cli"]
    done = subprocess.run(
        [
            *cli,
            "suite",
            "run",
            str(suite_file),
            "--output",
            str(directory),
            "--slurm",
            "--nodes",
            "1",
            "--time",
            "00:05:00",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = subprocess.run(
        [*cli, "suite", "status", str(directory), "--json"], capture_output=True, text=True, check=True
    )
    runs = json.loads(status.stdout)["runs"]
    assert [r["status"] for r in runs] == ["completed", "completed"]
    for row in runs:
        run_dir = directory / "runs" / row["id"]
        assert (run_dir / "slurm_job.sbatch").is_file()  # it really went through sbatch
        result = load_result(run_dir / "result.json")
        assert result.run.status == "completed" and len(result.iterations) == 3
    again = subprocess.run(
        [*cli, "suite", "resume", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0 and "suite: starting" not in again.stderr
