"""The SLURM job scripts, state parsing, and a real job on a local SLURM (marker ``slurm``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tprimat.running.slurm import (
    SlurmError,
    SlurmOptions,
    follow_job,
    parse_sacct,
    parse_scontrol_job,
    render_node_script,
    render_sbatch,
    submit_run,
    tprimat_node_command,
)


def test_sbatch_script_has_resources_rendezvous_and_one_task_per_node(tmp_path):
    options = SlurmOptions(
        nodes=4, gpus_per_node=8, partition="mi300x", time="01:00:00", account="perf", extra=("--exclusive",)
    )
    script = render_sbatch(run_dir=tmp_path, options=options, master_port=29611, env={"HSA_NO_SCRATCH_RECLAIM": "1"})
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in (
        "--nodes=4",
        "--ntasks-per-node=1",
        "--gpus-per-node=8",
        "--partition=mi300x",
        "--time=01:00:00",
        "--account=perf",
        "--exclusive",
        f"--output={tmp_path}/slurm-%j.out",
        "--export=ALL",
    ):
        assert f"#SBATCH {directive}" in lines
    assert 'MASTER_ADDR="$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)"' in lines
    assert "export MASTER_PORT=29611" in lines
    assert 'export NNODES="${SLURM_JOB_NUM_NODES}"' in lines
    assert "export HSA_NO_SCRATCH_RECLAIM=1" in lines
    assert lines[-1].startswith("srun --ntasks-per-node=1 --kill-on-bad-exit=1 ")
    assert lines[-1].endswith(f"bash {tmp_path}/slurm_node.sh")
    # directives must come before the first command, or sbatch ignores them
    first_command = next(i for i, line in enumerate(lines[1:], 1) if not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first_command:])


def test_secrets_are_never_written_into_the_job(tmp_path):
    with pytest.raises(SlurmError, match="HF_TOKEN looks like a secret"):
        render_sbatch(run_dir=tmp_path, options=SlurmOptions(), master_port=1, env={"HF_TOKEN": "hf_abc"})


def test_node_script_fills_the_rendezvous_on_each_node(tmp_path):
    command = tprimat_node_command(["--backend", "torch", "--config", "my run.toml"])
    script = render_node_script(command, cwd=tmp_path)
    assert 'export NODE_RANK="${SLURM_NODEID}"' in script
    assert (
        "exec tprimat run --backend torch --config 'my run.toml' --nnodes \"${NNODES}\" "
        '--node-rank "${NODE_RANK}" --master-addr "${MASTER_ADDR}" '
        '--master-port "${MASTER_PORT}"'
    ) in script


def test_node_script_runs_in_bash_with_the_values_substituted(tmp_path):
    script = tmp_path / "node.sh"
    script.write_text(
        render_node_script(
            [
                sys.executable,
                "-c",
                "import sys; print(sys.argv[1:])",
                "rank={node_rank}",
                "{master_addr}:{master_port}",
                "$HOME `x`",
            ]
        )
    )
    env = {**os.environ, "SLURM_NODEID": "2", "MASTER_ADDR": "n1", "MASTER_PORT": "7"}
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "['rank=2', 'n1:7', '$HOME `x`']"


def test_dry_run_writes_scripts_and_submits_nothing(tmp_path):
    submission = submit_run(
        node_command=["true"], run_dir=tmp_path / "run", options=SlurmOptions(nodes=2), dry_run=True
    )
    assert submission.job_id is None
    assert submission.sbatch_path.read_text() == submission.script
    assert "#SBATCH --nodes=2" in submission.script
    assert submission.node_path.read_text().endswith("exec true\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("JobId=12 JobName=x JobState=COMPLETED Reason=None ExitCode=0:0", ("COMPLETED", 0)),
        ("JobId=12 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0", ("FAILED", 3)),
        ("JobId=12 JobState=CANCELLED ExitCode=0:15", ("CANCELLED", 143)),
        ("slurm_load_jobs error: Invalid job id specified", (None, None)),
    ],
)
def test_scontrol_parsing(text, expected):
    assert parse_scontrol_job(text) == expected


def test_sacct_parsing():
    assert parse_sacct("COMPLETED|0:0\n") == ("COMPLETED", 0)
    assert parse_sacct("CANCELLED by 0|0:9\n") == ("CANCELLED", 137)
    assert parse_sacct("") == (None, None)


@pytest.mark.slurm
@pytest.mark.slow
def test_a_real_two_task_job_round_trips(slurm_cluster, tmp_path):
    run_dir = tmp_path / "run"
    code = (
        "import os, sys; print('node', sys.argv[1], 'of', sys.argv[2], 'master', sys.argv[3],"
        " 'task', os.environ['SLURM_PROCID'])"
    )
    submission = submit_run(
        node_command=[sys.executable, "-c", code, "{node_rank}", "{nnodes}", "{master_addr}"],
        run_dir=run_dir,
        options=SlurmOptions(nodes=1, job_name="tprimat-test"),
        master_port=29555,
    )
    assert submission.job_id
    states: list[str] = []
    result = follow_job(submission.job_id, run_dir=run_dir, poll_s=0.3, timeout_s=120, on_state=states.append)
    assert result.ok, (result, [p.read_text() for p in result.logs])
    texts = "".join(p.read_text() for p in result.logs)
    assert "node 0 of 1 master" in texts and "task 0" in texts
    assert states[-1] == "COMPLETED"

    # The same machinery with two tasks on the one node (a second srun step).
    two = run_dir / "two.sbatch"
    two.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=2\n"
        f"#SBATCH --output={run_dir}/two-%j.out\n"
        "srun bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS'\n"
    )
    job = subprocess.run(["sbatch", "--parsable", str(two)], capture_output=True, text=True, check=True).stdout.strip()
    follow_job(job, run_dir=run_dir, poll_s=0.3, timeout_s=60)
    out = (run_dir / f"two-{job}.out").read_text()
    assert "task 0 of 2" in out and "task 1 of 2" in out


@pytest.mark.slurm
@pytest.mark.slow
def test_a_failing_job_reports_its_exit_code(slurm_cluster, tmp_path):
    submission = submit_run(node_command=["bash", "-c", "exit 3"], run_dir=tmp_path, options=SlurmOptions())
    result = follow_job(submission.job_id, run_dir=tmp_path, poll_s=0.3, timeout_s=60)
    assert result.state == "FAILED" and result.exit_code == 3 and not result.ok


def test_every_run_option_reaches_the_node_command(tmp_path):
    from tprimat.cli.slurm_run import node_run_arguments
    from tprimat.running.prepare import RunRequest

    request = RunRequest(
        backend="amd_megatron",
        config_file="bench.toml",
        overrides=("training.seq_length=4096",),
        iterations=20,
        nproc_per_node=8,
        profile=True,
        system_profiler="rocprofv3",
        memory_snapshot=True,
        options={"megatron_path": "/opt/megatron-lm", "megatron_version": "0.15"},
        output=tmp_path,
    )
    args = node_run_arguments(request, run_id="r1", strict=True)
    assert args == [
        "--backend",
        "amd_megatron",
        "--config",
        str(Path("bench.toml").absolute()),
        "--set",
        "training.seq_length=4096",
        "--iterations",
        "20",
        "--nproc-per-node",
        "8",
        "--profile",
        "--system-profiler",
        "rocprofv3",
        "--memory-snapshot",
        "--strict",
        "--megatron-path",
        "/opt/megatron-lm",
        "--megatron-version",
        "0.15",
        "--output",
        str(tmp_path),
        "--run-id",
        "r1",
        "--slurm-node",
    ]
    command = tprimat_node_command(args)
    assert command[:2] == ["tprimat", "run"] and command[-8:] == [
        "--nnodes",
        "{nnodes}",
        "--node-rank",
        "{node_rank}",
        "--master-addr",
        "{master_addr}",
        "--master-port",
        "{master_port}",
    ]


def test_a_dry_run_submission_writes_both_scripts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    submission = submit_run(
        node_command=tprimat_node_command(["--backend", "nvd_nemo", "--config", "b.toml"]),
        run_dir=tmp_path / "run",
        options=SlurmOptions(nodes=2, gpus_per_node=8),
        master_port=29612,
        cwd=tmp_path,
        dry_run=True,
    )
    assert submission.job_id is None
    assert "#SBATCH --nodes=2" in submission.script
    assert "#SBATCH --gpus-per-node=8" in submission.script
    assert "export MASTER_PORT=29612" in submission.script
    last = submission.node_script.splitlines()[-1]
    assert last.startswith("exec tprimat run --backend nvd_nemo --config b.toml --nnodes")
    assert f"cd {tmp_path}" in submission.node_script


@pytest.mark.slurm
@pytest.mark.slow
def test_one_node_command_runs_with_the_allocation_rendezvous(slurm_cluster, tmp_path, monkeypatch):
    # A stand-in for the tprimat executable that reports the arguments it was given.
    program = tmp_path / "tprimat-standin"
    program.write_text('#!/bin/bash\necho "argv: $*"\necho "NODE_RANK=$NODE_RANK"\n')
    program.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    submission = submit_run(
        node_command=tprimat_node_command(["--backend", "torch", "--config", "tiny.toml"], program=str(program)),
        run_dir=tmp_path / "run",
        options=SlurmOptions(nodes=1),
        master_port=29613,
        cwd=tmp_path,
    )
    result = follow_job(submission.job_id, run_dir=tmp_path / "run", poll_s=0.3, timeout_s=60)
    assert result.ok, result
    text = "".join(p.read_text() for p in result.logs)
    host = (
        subprocess.run(
            ["scontrol", "show", "hostnames", "localhost"], capture_output=True, text=True, check=False
        ).stdout.strip()
        or "localhost"
    )
    assert (
        f"argv: run --backend torch --config tiny.toml --nnodes 1 --node-rank 0 "
        f"--master-addr {host} --master-port 29613"
    ) in text
    assert "NODE_RANK=0" in text


def test_a_container_submission_writes_the_per_node_runtime_script(tmp_path):
    from tprimat.running.container import ContainerSpec

    spec = ContainerSpec(image="rocm/primus:v26.5", runtime="apptainer", gpu_vendor="amd", workdir=str(tmp_path))
    submission = submit_run(
        node_command=["tprimat", "run"], run_dir=tmp_path / "run", options=SlurmOptions(), container=spec, dry_run=True
    )
    assert submission.container_path == tmp_path / "run" / "slurm_container.sh"
    assert submission.container_path.read_text() == submission.container_script
    assert submission.script.splitlines()[-1].endswith(f"bash {tmp_path}/run/slurm_container.sh")
    run_line = submission.container_script.splitlines()[-1]
    assert run_line == (
        f"exec apptainer exec --rocm --pwd {tmp_path} docker://rocm/primus:v26.5 bash {tmp_path}/run/slurm_node.sh"
    )
    pyxis = submit_run(
        node_command=["tprimat", "run"],
        run_dir=tmp_path / "pyxis",
        options=SlurmOptions(),
        container=ContainerSpec(image="rocm/primus:v26.5", runtime="pyxis", gpu_vendor="amd"),
        dry_run=True,
    )
    assert pyxis.container_path is None and not (tmp_path / "pyxis" / "slurm_container.sh").exists()
    assert "--container-image=rocm/primus:v26.5 bash " in pyxis.script
