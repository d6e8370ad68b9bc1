"""Run a benchmark as a SLURM batch job: write the sbatch script, submit, follow, collect.

The job runs one task per node (``srun --ntasks-per-node=1``); each task runs
the node command (normally ``tprimat run … --node-rank <its rank>``, which
starts torchrun or the framework's own launcher for that node) with the
rendezvous derived from the allocation:

* ``MASTER_ADDR``: the first host of ``$SLURM_JOB_NODELIST``;
* ``NODE_RANK``: ``$SLURM_NODEID`` of the task;
* ``NNODES``: ``$SLURM_JOB_NUM_NODES``; ``MASTER_PORT`` as configured.

Node-command words may hold ``{node_rank}``, ``{nnodes}``, ``{master_addr}``
and ``{master_port}``; they are filled in on each node.  Primus's documented
multi-node path (one ``primus-cli direct`` per node under ``srun``, reading
``NNODES/NODE_RANK/MASTER_ADDR/MASTER_PORT``) is exactly this shape, so the
``amd_primus`` backend runs through the same script.

Secrets are never written into the scripts: ``sbatch`` exports the submitting
environment (``--export=ALL``), so ``HF_TOKEN`` reaches the job from the
environment it was submitted from.

With a :class:`~tprimat.running.container.ContainerSpec` the node script runs
inside an image: through pyxis (``srun --container-image=…``), through a
runtime started on each node (``slurm_container.sh``), or, with runtime
``auto``, pyxis where ``srun --help`` lists ``--container-image`` and the
first runtime found on the node elsewhere.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.running import container as containers
from tprimat.secrets import is_secret_name

SBATCH_FILE = "slurm_job.sbatch"
NODE_FILE = "slurm_node.sh"
PLACEHOLDERS = {
    "node_rank": "NODE_RANK",
    "nnodes": "NNODES",
    "master_addr": "MASTER_ADDR",
    "master_port": "MASTER_PORT",
}
#: SLURM job states after which a job will not run again.
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)


class SlurmError(TprimatError):
    """sbatch missing, a rejected submission, or a job that cannot be followed."""


@attrs.frozen(kw_only=True)
class SlurmOptions:
    """What ``tprimat run --slurm`` asks of the scheduler."""

    nodes: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    gpus_per_node: int | None = None
    partition: str | None = None
    time: str | None = None  # SLURM time format, e.g. "00:30:00"
    account: str | None = None
    job_name: str = "tprimat"
    cpus_per_task: int | None = None
    extra: tuple[str, ...] = ()  # further #SBATCH options, verbatim (e.g. "--exclusive")


@attrs.frozen(kw_only=True)
class SlurmSubmission:
    """A written (and, unless a dry run, submitted) job."""

    job_id: str | None
    sbatch_path: Path
    node_path: Path
    script: str
    node_script: str
    container_path: Path | None = None
    container_script: str | None = None


@attrs.frozen(kw_only=True)
class SlurmJobResult:
    job_id: str
    state: str
    exit_code: int | None
    logs: tuple[Path, ...]

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0


def _word(word: str) -> str:
    """One shell word: placeholders become node-time variables, the rest is quoted."""
    if not re.search(r"\{(" + "|".join(PLACEHOLDERS) + r")\}", word):
        return shlex.quote(word)
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    for key, var in PLACEHOLDERS.items():
        escaped = escaped.replace("{" + key + "}", "${" + var + "}")
    return f'"{escaped}"'


def render_node_script(node_command: Sequence[str], *, cwd: Path | None = None) -> str:
    """The per-node script: its rank from SLURM, then the node command."""
    if not node_command:
        raise SlurmError("the node command is empty")
    lines = [
        "#!/bin/bash",
        "# One SLURM task per node: this node's rank comes from the allocation.",
        "set -euo pipefail",
        'export NODE_RANK="${SLURM_NODEID}"',
    ]
    if cwd is not None:
        lines.append(f"cd {shlex.quote(str(cwd))}")
    lines.append("exec " + " ".join(_word(w) for w in node_command))
    return "\n".join(lines) + "\n"


def render_sbatch(
    *,
    run_dir: Path,
    options: SlurmOptions,
    master_port: int,
    env: dict[str, str] | None = None,
    container: containers.ContainerSpec | None = None,
) -> str:
    """The batch script: resources, rendezvous from the allocation, one srun task per node.

    With ``container`` each task runs the node script inside the image (module docstring).
    """
    run_dir = Path(run_dir)
    directives = [
        f"--job-name={options.job_name}",
        f"--nodes={options.nodes}",
        "--ntasks-per-node=1",
        f"--output={run_dir}/slurm-%j.out",
        "--export=ALL",
    ]
    if options.gpus_per_node:
        directives.append(f"--gpus-per-node={options.gpus_per_node}")
    if options.cpus_per_task:
        directives.append(f"--cpus-per-task={options.cpus_per_task}")
    if options.partition:
        directives.append(f"--partition={options.partition}")
    if options.time:
        directives.append(f"--time={options.time}")
    if options.account:
        directives.append(f"--account={options.account}")
    directives += list(options.extra)
    lines = (
        ["#!/bin/bash"]
        + [f"#SBATCH {d}" for d in directives]
        + [
            "set -euo pipefail",
            "# Rendezvous derived from the allocation: the first node hosts the master.",
            'MASTER_ADDR="$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)"',
            "export MASTER_ADDR",
            f"export MASTER_PORT={int(master_port)}",
            'export NNODES="${SLURM_JOB_NUM_NODES}"',
        ]
    )
    for key, value in sorted((env or {}).items()):
        if is_secret_name(key):
            raise SlurmError(f"{key} looks like a secret: pass it through the environment, not the job script")
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append('echo "tprimat: job ${SLURM_JOB_ID} on ${SLURM_JOB_NODELIST}," "master ${MASTER_ADDR}:${MASTER_PORT}"')
    return "\n".join(lines + _step_lines(run_dir, container)) + "\n"


def _step_lines(run_dir: Path, container: containers.ContainerSpec | None) -> list[str]:
    """The job step: the node script on the host, in pyxis's container, or under a per-node runtime."""
    srun = f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 --output={shlex.quote(str(run_dir))}/slurm-%j-node%n.log"
    node = f"bash {shlex.quote(str(run_dir / NODE_FILE))}"
    if container is None:
        return [f"{srun} {node}"]
    pyxis = [
        'echo "tprimat: pyxis runs each node in the image"',
        *containers.digest_lines(container, "pyxis"),
        f"{srun} {shlex.join(containers.pyxis_srun_options(container))} {node}",
    ]
    per_node = [f"{srun} bash {shlex.quote(str(run_dir / containers.CONTAINER_FILE))}"]
    if container.runtime == "pyxis":
        return pyxis
    if container.runtime != "auto":
        return per_node
    return [
        "# pyxis where srun has it, else a container runtime on each node (slurm_container.sh).",
        # grep reads all of the help (no -q): srun killed by SIGPIPE would fail the test under pipefail.
        "if srun --help 2>&1 | grep -- --container-image >/dev/null; then",
        *("    " + line for line in pyxis),
        "else",
        *("    " + line for line in per_node),
        "fi",
    ]


def tprimat_node_command(run_args: Sequence[str], *, program: str = "tprimat") -> list[str]:
    """``tprimat run <run_args>`` with the rendezvous options filled in on each node."""
    return [
        program,
        "run",
        *run_args,
        "--nnodes",
        "{nnodes}",
        "--node-rank",
        "{node_rank}",
        "--master-addr",
        "{master_addr}",
        "--master-port",
        "{master_port}",
    ]


def _require(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise SlurmError(f"{program} not found on PATH: run on a SLURM login node (or start one)")
    return found


def submit_run(
    *,
    node_command: Sequence[str],
    run_dir: str | Path,
    options: SlurmOptions,
    master_port: int = 29500,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    container: containers.ContainerSpec | None = None,
    dry_run: bool = False,
) -> SlurmSubmission:
    """Write the job scripts into ``run_dir`` and submit them with ``sbatch`` (unless a dry run)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    node_script = render_node_script(node_command, cwd=cwd)
    script = render_sbatch(run_dir=run_dir, options=options, master_port=master_port, env=env, container=container)
    node_path, sbatch_path = run_dir / NODE_FILE, run_dir / SBATCH_FILE
    container_path = container_script = None
    if container is not None and container.runtime != "pyxis":
        container_path = run_dir / containers.CONTAINER_FILE
        container_script = containers.render_container_script(container, ["bash", str(node_path)])
        atomic_write_text(container_path, container_script)
    atomic_write_text(node_path, node_script)
    atomic_write_text(sbatch_path, script)
    written = SlurmSubmission(
        job_id=None,
        sbatch_path=sbatch_path,
        node_path=node_path,
        script=script,
        node_script=node_script,
        container_path=container_path,
        container_script=container_script,
    )
    if dry_run:
        return written
    done = subprocess.run(
        [_require("sbatch"), "--parsable", str(sbatch_path)],
        capture_output=True,
        text=True,
        cwd=run_dir,
        check=False,
    )
    if done.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {done.stderr.strip() or done.stdout.strip()}")
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmError(f"sbatch returned no job id: {done.stdout.strip()!r}")
    return attrs.evolve(written, job_id=job_id)


def parse_scontrol_job(text: str) -> tuple[str | None, int | None]:
    """``JobState`` and the exit status from ``scontrol show job -o`` output."""
    state = re.search(r"\bJobState=(\S+)", text)
    code = re.search(r"\bExitCode=(\d+):(\d+)", text)
    exit_code = None
    if code:
        status, signal = int(code.group(1)), int(code.group(2))
        exit_code = status if signal == 0 else 128 + signal
    return (state.group(1) if state else None), exit_code


def parse_sacct(text: str) -> tuple[str | None, int | None]:
    """The job line (first) of ``sacct -n -P -o State,ExitCode``."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            state = parts[0].split()[0]
            status, _, signal = parts[1].partition(":")
            code = int(status) if status.isdigit() else None
            if code is not None and signal.isdigit() and int(signal):
                code = 128 + int(signal)
            return state, code
    return None, None


def job_state(job_id: str) -> tuple[str | None, int | None]:
    """The job's state now: ``squeue`` while queued/running, then ``scontrol``, then ``sacct``."""
    queued = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False)
    if queued.returncode == 0 and queued.stdout.strip():
        return queued.stdout.strip().splitlines()[0], None
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=False)
    if shown.returncode == 0:
        state, code = parse_scontrol_job(shown.stdout)
        if state:
            return state, code
    if shutil.which("sacct"):
        acct = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-o", "State,ExitCode", "-j", job_id],
            capture_output=True,
            text=True,
            check=False,
        )
        if acct.returncode == 0:
            return parse_sacct(acct.stdout)
    return None, None


def follow_job(
    job_id: str,
    *,
    run_dir: str | Path,
    poll_s: float = 2.0,
    timeout_s: float = 0,
    on_state: Callable[[str], None] | None = None,
) -> SlurmJobResult:
    """Wait for the job to end (``timeout_s`` > 0: cancel it after that long), then collect logs."""
    _require("squeue")
    started = time.monotonic()
    last = None
    while True:
        state, code = job_state(job_id)
        if state != last and state is not None and on_state is not None:
            on_state(state)
        last = state or last
        if state in FINAL_STATES:
            break
        if state is None and last is None and time.monotonic() - started > 60:
            raise SlurmError(f"job {job_id} is unknown to squeue, scontrol and sacct")
        if timeout_s and time.monotonic() - started > timeout_s:
            subprocess.run(["scancel", job_id], check=False)
            state, code = "TIMEOUT", None
            break
        time.sleep(poll_s)
    return SlurmJobResult(job_id=job_id, state=state or "UNKNOWN", exit_code=code, logs=collect_logs(job_id, run_dir))


def collect_logs(job_id: str, run_dir: str | Path) -> tuple[Path, ...]:
    """The job's batch log and per-node logs in the run directory."""
    run_dir = Path(run_dir)
    return tuple(sorted(run_dir.glob(f"slurm-{job_id}.out"))) + tuple(sorted(run_dir.glob(f"slurm-{job_id}-node*.log")))
