"""``tprimat run --slurm``: the job script, and a real job on a local SLURM (marker ``slurm``).

The real job trains the tiny Llama on the torch backend with two processes on CPU
under a single-node SLURM (``.ci/slurm-up.sh`` starts one), and the result must come
back complete and valid to the submitting command.  What the submitting command does
with a collected result (``--report-to``) is tested with submit and follow standing in
for the cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.core.export.trackers import SUITE, require
from tprimat.cli import cli
from tprimat.result.metrics import describe
from tprimat.result.schema import load_result
from tprimat.running.slurm import SlurmJobResult, SlurmSubmission

TINY = [
    "--backend",
    "torch",
    "--model",
    "llama3.1-tiny",
    "--nproc-per-node",
    "2",
    "--iterations",
    "4",
    "--set",
    "training.seq_length=32",
    "--set",
    "training.global_batch_size=4",
    "--set",
    "training.micro_batch_size=1",
    "--set",
    "benchmark.warmup_iterations=1",
    "--set",
    "monitor.enabled=false",
]


def test_dry_run_prints_the_job_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        cli,
        [
            "run",
            "--slurm",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--partition",
            "mi300x",
            "--time",
            "00:20:00",
            "--account",
            "perf",
            "--master-port",
            "29611",
            "--run-id",
            "j",
            *TINY,
            "--dry-run",
        ],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    text = out.output
    for directive in (
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gpus-per-node=8",
        "--partition=mi300x",
        "--time=00:20:00",
        "--account=perf",
    ):
        assert f"#SBATCH {directive}\n" in text
    assert "export MASTER_PORT=29611\n" in text
    node = [line for line in text.splitlines() if line.startswith("exec ")]
    assert len(node) == 1
    assert node[0].startswith(f"exec {sys.executable} -m tprimat.cli run --backend torch ")
    assert f"--output {tmp_path / 'runs'} --run-id j --slurm-node" in node[0]
    assert node[0].endswith(
        '--nnodes "${NNODES}" --node-rank "${NODE_RANK}" --master-addr "${MASTER_ADDR}" --master-port "${MASTER_PORT}"'
    )
    for option in ("--slurm ", "--partition", "--account", "--time", "--dry-run"):
        assert option not in node[0]
    assert "--nproc-per-node 2" in node[0]  # the processes per node follow the request
    assert not (tmp_path / "runs").exists()


def test_no_sbatch_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    out = CliRunner().invoke(cli, ["run", "--slurm", *TINY])
    assert out.exit_code == 2
    assert out.output.strip().splitlines() == [
        "Error: sbatch not found on PATH: run --slurm on a SLURM login node (--dry-run prints the job script anywhere)"
    ]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.torch
def test_a_real_slurm_job_trains_and_its_result_comes_back(slurm_cluster, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        cli, ["run", "--slurm", "--nodes", "1", "--time", "00:05:00", "--run-id", "job", *TINY], catch_exceptions=False
    )
    run_dir = tmp_path / "runs" / "job"
    assert out.exit_code == 0, (out.output, [p.read_text() for p in run_dir.glob("slurm-*")])
    assert "COMPLETED (exit code 0)" in out.output
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and result.run.backend == "torch"
    assert result.config.world_size == 2
    assert [r.iteration for r in result.iterations] == [1, 2, 3, 4]
    measured = result.iterations[1:]
    assert result.summary.tokens_per_s_per_gpu == describe(4 * 32 / r.step_time_s / 2 for r in measured)
    # The job's files: the scripts, SLURM's logs, the node's run files, every rank's output.
    job_logs = sorted(p.name for p in run_dir.glob("slurm-*"))
    assert len(job_logs) == 2 and any(name.endswith("-node0.log") for name in job_logs)
    for name in ("slurm_job.sbatch", "slurm_node.sh", "config.toml", "manifest.json", "logs/launcher.log"):
        assert (run_dir / name).is_file(), name
    ranks = {p.parent.name for p in (run_dir / "logs" / "ranks").rglob("stdout.log")}
    assert ranks == {"0", "1"}  # torchrun's per-rank output, two processes


def test_rendezvous_options_conflict_with_slurm_and_resources_need_it():
    out = CliRunner().invoke(cli, ["run", "--slurm", "--nnodes", "2", "--dry-run"])
    assert out.exit_code == 2 and "use --nodes instead of --nnodes" in out.output
    out = CliRunner().invoke(cli, ["run", "--partition", "p", "--time", "1:00", "--dry-run"])
    assert out.exit_code == 2
    assert out.output.strip() == (
        "Error: --partition, --time: only with --slurm (without it, "
        "use --nproc-per-node and --nnodes/--node-rank/--master-addr "
        "on each node)"
    )


def test_a_bad_config_is_refused_before_anything_is_submitted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        cli,
        [
            "run",
            "--slurm",
            "--gpus-per-node",
            "8",
            "--set",
            "training.global_batch_size=12",
            "--set",
            "training.micro_batch_size=1",
        ],
    )
    assert out.exit_code == 2
    assert "not divisible by micro_batch_size × data-parallel size = 8" in out.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.torch
def test_ctrl_c_while_following_cancels_the_job(slurm_cluster, tmp_path):
    pytest.importorskip("torch")
    from tprimat.running.slurm import job_state

    args = [a if a != "4" else "100000" for a in TINY]  # far more iterations than the test waits
    proc = subprocess.Popen(
        [sys.executable, "-m", "tprimat.cli", "run", "--slurm", "--run-id", "job", *args],
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.rstrip().endswith(": RUNNING"):
            break
    job_id = next(line.split()[3].rstrip(";") for line in lines if line.startswith("submitted SLURM job"))
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, "".join(lines) + rest
    assert f"job {job_id} cancelled (scancel)" in rest
    deadline = time.monotonic() + 30
    while job_state(job_id)[0] != "CANCELLED":  # the cluster keeps ended jobs (MinJobAge)
        assert time.monotonic() < deadline, job_state(job_id)
        time.sleep(0.3)


def test_dry_run_with_an_image_runs_the_images_tprimat_with_everything_mounted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "configs" / "bench.toml"
    config.parent.mkdir()
    config.write_text("[training]\nseq_length = 32\n")
    base = ["run", "--slurm", "--run-id", "j", "--backend", "nvd_nemo", "--config", str(config), "--dry-run"]
    out = CliRunner().invoke(
        cli,
        [*base, "--container-image", "nvcr.io/nvidia/nemo:25.09", "--container-mount", "/lustre/hf:/root/.cache/hf"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    text = out.output
    node = [line for line in text.splitlines() if line.startswith("exec ")]
    assert node == [line for line in node if line.startswith("exec tprimat run --backend nvd_nemo --config ")]
    assert f"--container-mounts={tmp_path}:{tmp_path},/lustre/hf:/root/.cache/hf" in text  # cwd holds the rest
    assert f"--container-workdir={tmp_path}" in text
    assert f"# --- {tmp_path / 'runs' / 'j' / 'slurm_container.sh'}" in text  # auto: the fallback is written too
    assert "--gpus all" in text and "--nv " in text  # the backend's platform: NVIDIA
    pyxis = CliRunner().invoke(cli, [*base, "--container-image", "/images/nemo.sqsh", "--container-runtime", "pyxis"])
    assert pyxis.exit_code == 0, pyxis.output
    assert "slurm_container.sh" not in pyxis.output and "--container-image=/images/nemo.sqsh" in pyxis.output
    assert "sha256sum /images/nemo.sqsh" in pyxis.output
    assert not (tmp_path / "runs").exists()


def test_container_options_need_a_scheduler_and_a_vendor():
    out = CliRunner().invoke(cli, ["run", "--container-image", "x", "--dry-run"])
    assert (out.exit_code, out.output.strip()) == (2, "Error: --container-image: only with --slurm or --k8s")
    out = CliRunner().invoke(cli, ["run", "--container-runtime", "podman", "--dry-run"])
    assert (out.exit_code, out.output.strip()) == (2, "Error: --container-runtime: only with --slurm")
    out = CliRunner().invoke(cli, ["run", "--slurm", "--container-image", "x", "--backend", "torch", "--dry-run"])
    assert out.exit_code == 2
    assert out.output.strip() == (
        "Error: the backend torch runs on either vendor's GPUs: say which the container gets with "
        "--gpu-vendor amd|nvidia|none"
    )
    out = CliRunner().invoke(cli, ["run", "--slurm", "--k8s", "--dry-run"])
    assert (out.exit_code, out.output.strip()) == (2, "Error: --slurm or --k8s: one scheduler per run")


class _CollectedJob:
    """``tprimat.running.slurm``'s submit and follow, standing in for a cluster: the job "ends" COMPLETED
    with a real result in its run directory (a torch run tprimat wrote, tests/fixtures/compare/)."""

    def __init__(self, result: Path) -> None:
        self.result = result
        self.submitted: list[Path] = []
        self.node_commands: list[list[str]] = []

    def submit_run(self, *, node_command, run_dir, **_):
        Path(run_dir).mkdir(parents=True)
        self.submitted.append(Path(run_dir))
        self.node_commands.append(list(node_command))
        scripts = {"sbatch_path": Path(run_dir) / "slurm_job.sbatch", "node_path": Path(run_dir) / "slurm_node.sh"}
        return SlurmSubmission(job_id="4242", script="", node_script="", **scripts)

    def follow_job(self, job_id, *, run_dir, on_state=None, **_):
        shutil.copyfile(self.result, Path(run_dir) / "result.json")  # what node 0 wrote on the shared file system
        if on_state:
            on_state("COMPLETED")
        return SlurmJobResult(job_id=job_id, state="COMPLETED", exit_code=0, logs=())


@pytest.fixture
def collected_job(tmp_path, monkeypatch):
    """A submitted job whose result comes back: ``sbatch`` on PATH, submit and follow replaced."""
    from tprimat.running import slurm

    require("tensorboard")  # the tracker every test here exports to
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")  # found on PATH, never called
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    monkeypatch.chdir(tmp_path)
    job = _CollectedJob(SUITE / "torch-cpu-llama3.1-tiny-ddp-2proc-r1" / "result.json")
    monkeypatch.setattr(slurm, "submit_run", job.submit_run)
    monkeypatch.setattr(slurm, "follow_job", job.follow_job)
    return job


def test_report_to_exports_the_collected_result_on_the_submitting_machine(collected_job, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    out = CliRunner().invoke(
        cli,
        ["run", "--slurm", "--run-id", "job", *TINY, "--report-to", f"tensorboard={logdir}"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    result_path = tmp_path / "runs" / "job" / "result.json"
    result = load_result(result_path)
    assert f"exported to tensorboard: tensorboard events in {logdir}/tprimat/{result.run.id}" in out.output
    assert out.output.index("job 4242 ended COMPLETED") < out.output.index("exported to tensorboard")
    accumulator = EventAccumulator(str(logdir / "tprimat" / result.run.id), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert [e.step for e in accumulator.Scalars("step_time_s")] == [r.iteration for r in result.iterations]
    (node_command,) = collected_job.node_commands
    assert "--report-to" not in node_command  # the nodes never export


def test_a_failing_export_after_a_slurm_job_keeps_its_result_and_exit_code(collected_job, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = CliRunner().invoke(cli, ["run", "--slurm", "--run-id", "job", *TINY, "--report-to", f"tensorboard={blocker}"])
    result_path = tmp_path / "runs" / "job" / "result.json"
    assert out.exit_code == 0, out.output
    assert f"tprimat: warning: --report-to tensorboard: exporting {result_path} to tensorboard failed" in out.output
    assert f"export it later with: tprimat export {result_path} --to tensorboard" in out.output
    assert result_path.read_bytes() == collected_job.result.read_bytes()
    assert blocker.read_text() == "not a directory"


def test_an_unknown_tracker_is_refused_before_the_job_is_submitted(collected_job, tmp_path):
    out = CliRunner().invoke(cli, ["run", "--slurm", "--run-id", "job", *TINY, "--report-to", "neptune"])
    assert out.exit_code == 2 and "unknown tracker 'neptune'" in out.output
    assert collected_job.submitted == [] and not (tmp_path / "runs").exists()
