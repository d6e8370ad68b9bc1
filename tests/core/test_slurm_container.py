"""SLURM jobs whose nodes run in a container image: the scripts, and real podman jobs (marker ``slurm``).

The real jobs run an image imported into podman from a small root file system
(bash and its libraries from this machine, and a ``tprimat`` stand-in that
reports what it sees), so no registry is needed.  CI installs podman
(``.ci/run``); without it the real jobs are skipped here and fail under CI.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tprimat.running import container as containers
from tprimat.running.slurm import SlurmOptions, follow_job, render_sbatch, submit_run, tprimat_node_command

IMAGE = "localhost/tprimat-test-node:1"

#: The image's ``tprimat``: bash builtins only, it reports where it runs and what it was given.
STANDIN = r"""#!/bin/bash
echo "image marker: $(< /etc/tprimat-test-image)"
echo "argv: $*"
echo "env: NODE_RANK=${NODE_RANK} IMAGE=${TPRIMAT_CONTAINER_IMAGE} DIGEST=${TPRIMAT_CONTAINER_DIGEST}"
echo "pwd: ${PWD}"
for arg in "$@"; do
    if [ -f "$arg" ]; then echo "file ${arg}: $(< "$arg")"; fi
done
echo "written in the container" > "${PWD}/from-container.txt"
if [ -n "${STANDIN_SLEEP:-}" ]; then read -r -t "${STANDIN_SLEEP}" <> <(:) || true; fi
"""


def _libraries(*programs: str) -> set[str]:
    """The shared libraries the programs load (ldd), by the names the loader looks for."""
    found: set[str] = set()
    for start in range(0, len(programs), 100):
        out = subprocess.run(["ldd", *programs[start : start + 100]], capture_output=True, text=True).stdout
        found.update(word for line in out.splitlines() for word in line.split()[1:] if word.startswith("/"))
        found.update(line.split()[0] for line in out.splitlines() if line.strip().startswith("/lib") and "(0x" in line)
    return found


def _rootfs_tar(path: Path, *, files: dict[str, str], links: dict[str, str], texts: dict[str, tuple[str, int]]) -> Path:
    """A root file system as a tar podman can import: files copied from here (name: source), links, texts."""
    with tarfile.open(path, "w") as tar:
        for folder in ("tmp", "proc", "sys", "dev", "root"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        for name, source in sorted(files.items()):
            tar.add(os.path.realpath(source), arcname=name.lstrip("/"))
        for name, target in links.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name, (text, mode) in texts.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            data = text.encode()
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


def _bash() -> str:
    bash = shutil.which("bash")
    assert bash is not None
    return bash


def _import(tar: Path, image: str, *changes: str):
    """``podman import`` the tar as ``image``; skip (fail under CI) where podman cannot run it."""
    if shutil.which("podman") is None:
        if os.environ.get("CI"):
            pytest.fail("podman is missing: .ci/run installs it before the slurm tests")
        pytest.skip("podman is not installed (apt-get install --no-install-recommends podman runc)")
    flags = [word for change in changes for word in ("--change", change)]
    subprocess.run(["podman", "import", "--quiet", *flags, str(tar), image], capture_output=True, text=True, check=True)
    tried = subprocess.run(["podman", "run", "--rm", image, "/bin/bash", "-c", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        message = f"podman cannot start a container here: {tried.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def podman_image(tmp_path_factory):
    """The stand-in image in podman's store (imported once, removed after the module)."""
    bash = _bash()
    tar = _rootfs_tar(
        tmp_path_factory.mktemp("image") / "root.tar",
        files={"/bin/bash": bash, **{lib: lib for lib in _libraries(bash)}},
        links={},
        texts={
            "/usr/local/bin/tprimat": (STANDIN, 0o755),
            "/etc/tprimat-test-image": ("tprimat test image\n", 0o644),
        },
    )
    _import(tar, IMAGE)
    yield IMAGE
    subprocess.run(["podman", "rmi", "--force", IMAGE], capture_output=True, check=False)


PYTHON_IMAGE = "localhost/tprimat-test-python:1"


def _python_mounts() -> list[str]:
    """What the Python image mounts from here: this environment, the interpreter's standard library, tprimat."""
    import sysconfig

    import tprimat

    checkout = Path(tprimat.__file__).resolve().parents[1]
    return sorted({sys.prefix, sysconfig.get_paths()["stdlib"], str(checkout)})


def _under(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


@pytest.fixture(scope="module")
def python_image(tmp_path_factory):
    """An image with bash, this machine's Python interpreter and the system libraries it and the
    installed packages load, and a ``tprimat`` that runs ``python -m tprimat.cli``; the Python
    environment itself (packages, standard library, tprimat's source) is mounted into it."""
    mounts = _python_mounts()
    links: dict[str, str] = {}
    program = sys.executable
    while os.path.islink(program):  # the venv's python -> ... -> the interpreter's binary
        target = os.readlink(program)
        if not _under(program, mounts):
            links[program] = target
        program = os.path.normpath(os.path.join(os.path.dirname(program), target))
    binaries = [program, *(str(p) for m in mounts for p in Path(m).rglob("*.so*") if p.is_file())]
    files = {lib: lib for lib in _libraries(*binaries) if not _under(lib, mounts)}
    files["/bin/bash"] = _bash()
    files.update({lib: lib for lib in _libraries(_bash())})
    if not _under(program, mounts):
        files[program] = program
    tar = _rootfs_tar(
        tmp_path_factory.mktemp("python-image") / "root.tar",
        files=files,
        links=links,
        texts={"/usr/local/bin/tprimat": (f'#!/bin/bash\nexec {sys.executable} -m tprimat.cli "$@"\n', 0o755)},
    )
    _import(tar, PYTHON_IMAGE)
    yield PYTHON_IMAGE, mounts
    subprocess.run(["podman", "rmi", "--force", PYTHON_IMAGE], capture_output=True, check=False)


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.torch
def test_a_tprimat_run_in_a_podman_container_on_slurm_comes_back_completed(
    slurm_cluster, python_image, tmp_path, monkeypatch
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from click.testing import CliRunner

    from tests.cli.test_run_slurm import TINY
    from tprimat.cli import cli
    from tprimat.result.schema import load_result

    image, mounts = python_image
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        cli,
        ["run", "--slurm", "--container-image", image, "--container-runtime", "podman", "--gpu-vendor", "none"]
        + [f"--container-mount={m}" for m in mounts]
        + ["--time", "00:05:00", "--run-id", "job", *TINY],
        catch_exceptions=False,
    )
    run_dir = tmp_path / "runs" / "job"
    assert out.exit_code == 0, (out.output, [p.read_text() for p in run_dir.glob("slurm-*")])
    assert "COMPLETED (exit code 0)" in out.output
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and result.config.world_size == 2
    assert [r.iteration for r in result.iterations] == [1, 2, 3, 4]
    digest = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{index .RepoDigests 0}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert result.software.container_image == image
    assert result.software.container_digest == digest.partition("@")[2]
    assert (run_dir / "slurm_container.sh").is_file()


def _spec(tmp_path: Path, runtime: str) -> containers.ContainerSpec:
    return containers.ContainerSpec(
        image=IMAGE,
        runtime=runtime,
        gpu_vendor="none",
        mounts=containers.same_path_mounts([tmp_path]),
        workdir=str(tmp_path / "work"),
        env_names=containers.passed_env_names({}),
    )


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["podman", "auto"])
def test_each_node_runs_in_the_image_with_rendezvous_mounts_and_image_identity(
    slurm_cluster, podman_image, tmp_path, runtime
):
    (tmp_path / "work").mkdir()
    data = tmp_path / "data" / "bench.toml"
    data.parent.mkdir()
    data.write_text("[training]\nseq_length = 32")
    run_dir = tmp_path / "runs" / "r1"
    submission = submit_run(
        node_command=tprimat_node_command(["--config", str(data), "--output", str(run_dir.parent)]),
        run_dir=run_dir,
        options=SlurmOptions(nodes=1, job_name="tprimat-container-test"),
        master_port=29621,
        cwd=tmp_path / "work",
        container=_spec(tmp_path, runtime),
    )
    result = follow_job(submission.job_id, run_dir=run_dir, poll_s=0.3, timeout_s=120)
    text = "".join(p.read_text() for p in result.logs)
    assert result.ok, text
    digest = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{index .RepoDigests 0}}", IMAGE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert digest.partition("@")[2].startswith("sha256:")
    assert "image marker: tprimat test image" in text  # the command ran in the image, not on the host
    assert f"env: NODE_RANK=0 IMAGE={IMAGE} DIGEST={digest.partition('@')[2]}" in text
    assert f"argv: run --config {data} --output {run_dir.parent} --nnodes 1 --node-rank 0 --master-addr " in text
    assert "--master-port 29621" in text
    assert f"file {data}: [training]\nseq_length = 32" in text  # the mounted data is readable
    assert f"pwd: {tmp_path / 'work'}" in text
    assert (tmp_path / "work" / "from-container.txt").read_text() == "written in the container\n"
    if runtime == "auto":  # this SLURM has no pyxis: the node's first runtime is used
        assert "container runtime podman" in text


@pytest.mark.slurm
@pytest.mark.slow
def test_cancelling_the_job_stops_the_container(slurm_cluster, podman_image, tmp_path):
    from tprimat.running.slurm import job_state

    (tmp_path / "work").mkdir()
    run_dir = tmp_path / "runs" / "r2"
    os.environ["STANDIN_SLEEP"] = "600"  # sbatch exports the submitting environment
    try:
        spec = containers.ContainerSpec(
            image=IMAGE,
            runtime="podman",
            gpu_vendor="none",
            mounts=containers.same_path_mounts([tmp_path]),
            workdir=str(tmp_path / "work"),
            env_names=(*containers.passed_env_names({}), "STANDIN_SLEEP"),
        )
        submission = submit_run(
            node_command=["tprimat", "run"],
            run_dir=run_dir,
            options=SlurmOptions(nodes=1),
            cwd=tmp_path / "work",
            container=spec,
        )
    finally:
        del os.environ["STANDIN_SLEEP"]
    name = f"tprimat-{submission.job_id}-0"
    deadline = time.monotonic() + 60

    def running() -> bool:
        names = subprocess.run(["podman", "ps", "--format", "{{.Names}}"], capture_output=True, text=True).stdout
        return name in names.split()

    while not running():
        assert time.monotonic() < deadline, "the container never started"
        time.sleep(0.3)
    subprocess.run(["scancel", submission.job_id], check=True)
    while running():
        assert time.monotonic() < deadline, "the container outlived the cancelled job"
        time.sleep(0.3)
    while job_state(submission.job_id)[0] != "CANCELLED":
        assert time.monotonic() < deadline, job_state(submission.job_id)
        time.sleep(0.3)


def test_the_sbatch_script_runs_pyxis_where_srun_has_it_and_the_node_runtime_elsewhere(tmp_path):
    spec = containers.ContainerSpec(
        image="nvcr.io/nvidia/nemo:25.09",
        gpu_vendor="nvidia",
        mounts=containers.same_path_mounts([tmp_path / "runs", tmp_path / "runs" / "r", "/data"]),
        workdir=str(tmp_path),
    )
    script = render_sbatch(run_dir=tmp_path / "runs" / "r", options=SlurmOptions(), master_port=1, container=spec)
    # Run the script's step selection with stand-ins for srun: one with pyxis's help text, one without.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "scontrol": "echo node1",
        # a help text longer than a pipe holds, as srun's is: the test must read all of it
        "srun": 'if [ "$1" = --help ]; then echo "$SRUN_HELP"; seq 1 20000; '
        'else printf "%s\\n" "$@" > "$STEP_ARGV"; fi',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    job = tmp_path / "job.sh"
    job.write_text(script)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_ID": "7",
    }
    argv = {}
    for case, help_text in {
        "pyxis": "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
        "plain": "  -N, --nodes=N",
    }.items():
        out = tmp_path / f"{case}.argv"
        subprocess.run(["bash", str(job)], env={**env, "SRUN_HELP": help_text, "STEP_ARGV": str(out)}, check=True)
        argv[case] = out.read_text().splitlines()
    runs = tmp_path / "runs"
    assert argv["pyxis"] == [
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        f"--output={runs}/r/slurm-%j-node%n.log",
        "--container-image=nvcr.io#nvidia/nemo:25.09",
        f"--container-mounts=/data:/data,{runs}:{runs}",
        f"--container-workdir={tmp_path}",
        "bash",
        f"{runs}/r/slurm_node.sh",
    ]
    assert argv["plain"][-2:] == ["bash", f"{runs}/r/slurm_container.sh"]


def test_the_runtime_command_lines_per_vendor(tmp_path):
    mounts = (("/scratch/runs", "/scratch/runs"), ("/datasets", "/data"))
    command = ["bash", "/scratch/runs/r/slurm_node.sh"]

    def argv(runtime: str, vendor: str, image: str = "rocm/primus:v26.5") -> list[str]:
        spec = containers.ContainerSpec(
            image=image, runtime=runtime, gpu_vendor=vendor, mounts=mounts, workdir="/scratch", env_names=("HF_TOKEN",)
        )
        return containers.runtime_argv(spec, runtime, command)

    assert argv("docker", "amd") == [
        *"docker run --rm --network host --ipc host".split(),
        *"--device /dev/kfd --device /dev/dri --group-add video --group-add render".split(),
        *"--cap-add SYS_PTRACE --security-opt seccomp=unconfined".split(),
        *"--ulimit memlock=-1 --ulimit stack=67108864 --shm-size 64g".split(),
        *"-e HF_TOKEN -v /scratch/runs:/scratch/runs -v /datasets:/data -w /scratch rocm/primus:v26.5".split(),
        *command,
    ]
    nvidia = argv("podman", "nvidia", "nvcr.io/nvidia/nemo:25.09")
    assert nvidia[:9] == "podman run --rm --network host --ipc host --device nvidia.com/gpu=all".split()
    assert "--shm-size" not in nvidia  # podman refuses a /dev/shm size in the host's IPC namespace
    assert argv("docker", "nvidia")[7:9] == ["--gpus", "all"]
    assert argv("apptainer", "amd") == [
        *"apptainer exec --rocm --bind /scratch/runs:/scratch/runs,/datasets:/data --pwd /scratch".split(),
        "docker://rocm/primus:v26.5",
        *command,
    ]
    assert argv("singularity", "nvidia", "/images/nemo.sif")[:3] == ["singularity", "exec", "--nv"]
    assert argv("singularity", "nvidia", "/images/nemo.sif")[-3] == "/images/nemo.sif"
    cpu = argv("podman", "none")
    assert not {"--device", "--gpus", "--ulimit", "--rocm"} & set(cpu)


def test_references_are_translated_for_each_runtime():
    assert containers.enroot_uri("nvcr.io/nvidia/nemo:25.09") == "nvcr.io#nvidia/nemo:25.09"
    assert containers.enroot_uri("localhost:5000/x/y:1") == "localhost:5000#x/y:1"
    assert containers.enroot_uri("rocm/primus:v26.5") == "rocm/primus:v26.5"  # Docker Hub
    assert containers.enroot_uri("/images/nemo.sqsh") == "/images/nemo.sqsh"
    assert containers.apptainer_uri("rocm/primus:v26.5") == "docker://rocm/primus:v26.5"
    assert containers.apptainer_uri("oras://ghcr.io/x/y:1") == "oras://ghcr.io/x/y:1"
    pinned = "rocm/primus@sha256:" + "ab" * 32
    assert containers.pinned_digest(pinned) == "sha256:" + "ab" * 32
    assert containers.pinned_digest("rocm/primus:v26.5") is None


def test_a_local_image_file_is_identified_by_its_sha256(tmp_path):
    image = tmp_path / "nemo.sqsh"
    image.write_bytes(b"squashfs image bytes")
    spec = containers.ContainerSpec(image=str(image), runtime="pyxis", gpu_vendor="nvidia")
    script = "\n".join(containers.digest_lines(spec, "pyxis")) + '\necho "$TPRIMAT_CONTAINER_DIGEST"\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "sha256:" + hashlib.sha256(b"squashfs image bytes").hexdigest()


def test_mounts_and_passed_names():
    assert containers.same_path_mounts(["/a/b", "/a", "/c/"], [("/d", "/e")]) == (
        ("/a", "/a"),
        ("/c", "/c"),
        ("/d", "/e"),
    )
    assert containers.parse_mount("/data:/mnt/data") == ("/data", "/mnt/data")
    assert containers.parse_mount("/data") == ("/data", "/data")
    with pytest.raises(containers.ContainerError, match="DST an absolute path"):
        containers.parse_mount("/data:relative")
    names = containers.passed_env_names({"HF_TOKEN": "secret", "NCCL_IB_HCA": "mlx5", "HOME": "/root"})
    assert "HF_TOKEN" in names and "NCCL_IB_HCA" in names and "HOME" not in names
    assert names[: len(containers.PASSED_NAMES)] == containers.PASSED_NAMES
