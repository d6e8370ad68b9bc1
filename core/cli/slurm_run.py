"""``tprimat run --slurm``: submit one run as a SLURM job, follow it, collect its result.

The submitting machine (often a login node without GPUs) decides only what
the job needs: the run directory, the resources and the rendezvous port.
Everything else (the backend, the platform, the effective config, the launch
plan) is decided on the allocated nodes by the same ``tprimat run`` that a
user would start there, so a login node's missing GPU never shapes the run.
With ``--container-image`` that ``tprimat run`` is the image's, started in the
image on each node (``tprimat.running.container``).  ``--report-to`` exports
the result here, once the job has ended and its result is read back: the nodes
never export (they may not reach the tracker, and several nodes would export
one run several times).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tprimat.cli.export import report_result
from tprimat.running.prepare import RunRequest

if TYPE_CHECKING:
    from tprimat.contract.registry import Registry
    from tprimat.export.deliver import Destination
    from tprimat.settings.config import BenchmarkConfig

#: What a node runs in an image: the ``tprimat`` the image installs (docker/*.Dockerfile).
IMAGE_PROGRAM = "tprimat"


def node_run_arguments(request: RunRequest, *, run_id: str, strict: bool) -> list[str]:
    """The ``tprimat run`` arguments every node of the job gets: every option the user gave.

    Paths are absolute (nodes may start elsewhere); the nodes decide everything else.
    """
    args: list[str] = []
    if request.backend:
        args += ["--backend", request.backend]
    if request.model:
        args += ["--model", request.model]
    if request.config_file:
        args += ["--config", str(Path(request.config_file).absolute())]
    for override in request.overrides:
        args += ["--set", override]
    if request.iterations is not None:
        args += ["--iterations", str(request.iterations)]
    if request.nproc_per_node is not None:
        args += ["--nproc-per-node", str(request.nproc_per_node)]
    if request.profile:
        args.append("--profile")
    if request.system_profiler:
        args += ["--system-profiler", request.system_profiler]
    if request.memory_snapshot:
        args.append("--memory-snapshot")
    if strict:
        args.append("--strict")
    for name, value in sorted(request.options.items()):
        args += ["--" + name.replace("_", "-"), str(value)]
    for key, value in request.tags.items():
        args += ["--tag", f"{key}={value}"]
    args += ["--output", str(Path(request.output).absolute()), "--run-id", run_id, "--slurm-node"]
    return args


def gpu_vendor_for(registry: Registry, backend: str | None, given: str | None) -> str:
    """The GPUs a container gets: ``--gpu-vendor``, else the platform of the chosen backend."""
    from tprimat.errors import TprimatError

    if given:
        return given
    entry = registry.backends().get(backend) if backend else None
    if entry is not None and entry.spec.platform in ("amd", "nvidia"):
        return entry.spec.platform
    raise TprimatError(
        f"the backend {backend or '(chosen on the nodes)'} runs on either vendor's GPUs: "
        "say which the container gets with --gpu-vendor amd|nvidia|none"
    )


def node_mounts(request: RunRequest, dataset: str, extra: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Same-path mounts for the output, the working directory, the config, the data and the checkouts."""
    from tprimat.running import container

    paths: list[str | Path] = [Path(request.output).absolute(), Path.cwd()]
    if request.config_file:
        paths.append(Path(request.config_file).absolute().parent)
    if dataset != "mock":
        paths.append(Path(dataset).absolute())
    paths += [value for value in request.options.values() if isinstance(value, str) and value.startswith("/")]
    return container.same_path_mounts(paths, [container.parse_mount(m) for m in extra])


def scheduled_run(request: RunRequest, *, dry_run: bool) -> tuple[BenchmarkConfig, str, Path]:
    """The config as given (checked before anything is submitted), the run id and the run directory.

    Only the model (for the run's name) and the rendezvous port are taken from the config: the
    nodes decide the final config (a login node without GPUs must not shape it).  A run
    directory that exists already is refused unless nothing is submitted.
    """
    from tprimat.running.prepare import RunError, new_run_id
    from tprimat.settings.config import load_config

    config = load_config(request.config_file, [*request.overrides, *request.flag_overrides()])
    output = Path(request.output)
    run_id = request.run_id or new_run_id(request.backend or "default", config.benchmark.model, output)
    run_dir = (output / run_id).absolute()
    if not dry_run and run_dir.exists():
        raise RunError(f"run directory {run_dir} already exists; choose another --run-id")
    return config, run_id, run_dir


def submit_and_follow(
    ctx: click.Context,
    request: RunRequest,
    *,
    strict: bool,
    nodes: int,
    gpus_per_node: int | None,
    partition: str | None,
    time_limit: str | None,
    account: str | None,
    dry_run: bool,
    image: str | None = None,
    runtime: str = "auto",
    mounts: tuple[str, ...] = (),
    gpu_vendor: str | None = None,
    reporting: Sequence[Destination] = (),
) -> None:
    """Submit the job, follow it to its end, print its result and export it to ``reporting``'s trackers."""
    from tprimat.running import slurm

    config, run_id, run_dir = scheduled_run(request, dry_run=dry_run)
    if not dry_run and shutil.which("sbatch") is None:
        raise slurm.SlurmError(
            "sbatch not found on PATH: run --slurm on a SLURM login node (--dry-run prints the job script anywhere)"
        )
    port = request.master_port or config.launch.master_port
    args = node_run_arguments(request, run_id=run_id, strict=strict)
    spec = None
    if image:
        from tprimat.cli.output import registry_from
        from tprimat.running import container

        spec = container.ContainerSpec(
            image=image,
            runtime=runtime,
            gpu_vendor=gpu_vendor_for(registry_from(ctx), request.backend, gpu_vendor),
            mounts=node_mounts(request, config.data.dataset, mounts),
            workdir=str(Path.cwd()),
            env_names=container.passed_env_names(),
        )
        command = slurm.tprimat_node_command(args, program=IMAGE_PROGRAM)
    else:
        # The job runs this very installation: the interpreter that submitted it.
        command = [sys.executable, "-m", *slurm.tprimat_node_command(args, program="tprimat.cli")]
    job_options = slurm.SlurmOptions(
        nodes=nodes, gpus_per_node=gpus_per_node, partition=partition, time=time_limit, account=account
    )
    if dry_run:
        _print_job_files(run_id, run_dir, job_options, port, spec, command)
        return
    submission = slurm.submit_run(
        node_command=command, run_dir=run_dir, options=job_options, master_port=port, cwd=Path.cwd(), container=spec
    )
    job_id = submission.job_id
    assert job_id is not None
    click.echo(f"submitted SLURM job {job_id}; run directory {run_dir}")
    click.echo(f"each node runs: {shlex.join(command)}")
    _follow_and_report(ctx, job_id, run_dir, reporting)


def _print_job_files(
    run_id: str,
    run_dir: Path,
    job_options: Any,
    port: int,
    spec: Any,
    command: Sequence[str],
) -> None:
    """What ``--dry-run`` prints: the batch script, the node script and the container script it would write."""
    from tprimat.running import slurm

    click.echo(f"# SLURM job for run {run_id} (nothing submitted)")
    click.echo(f"# --- {run_dir / slurm.SBATCH_FILE}")
    click.echo(slurm.render_sbatch(run_dir=run_dir, options=job_options, master_port=port, container=spec), nl=False)
    click.echo(f"# --- {run_dir / slurm.NODE_FILE}")
    click.echo(slurm.render_node_script(list(command), cwd=Path.cwd()), nl=False)
    if spec is not None and spec.runtime != "pyxis":
        from tprimat.running import container

        click.echo(f"# --- {run_dir / container.CONTAINER_FILE}")
        click.echo(container.render_container_script(spec, ["bash", str(run_dir / slurm.NODE_FILE)]), nl=False)


def _follow_and_report(ctx: click.Context, job_id: str, run_dir: Path, reporting: Sequence[Destination]) -> None:
    """Follow the job to its end (Ctrl-C cancels it), print its result and export it; exit 1 unless it completed."""
    from tprimat.running import runner, slurm

    try:
        ended = slurm.follow_job(job_id, run_dir=run_dir, on_state=lambda state: click.echo(f"job {job_id}: {state}"))
    except KeyboardInterrupt:
        import subprocess

        subprocess.run(["scancel", job_id], check=False)
        click.echo(f"job {job_id} cancelled (scancel); its partial result stays in {run_dir}")
        ctx.exit(1)
    result_path = run_dir / runner.RESULT_NAME
    show_collected(
        ctx,
        result_path if result_path.exists() else None,
        ended=f"job {job_id} ended {ended.state} (exit code {ended.exit_code})",
        logs=ended.logs,
        ok=ended.ok,
        reporting=reporting,
    )


def show_collected(
    ctx: click.Context,
    result_path: Path | None,
    *,
    ended: str,
    logs: Sequence[object],
    ok: bool,
    reporting: Sequence[Destination],
    missing: str = "without a result",
) -> None:
    """The end of a run followed on a scheduler (SLURM, Kubernetes): its logs, its result's summary,
    the export to ``reporting``'s trackers; exit code 1 unless the job succeeded and the run completed."""
    from tprimat.cli.output import make_console
    from tprimat.result.schema import load_result
    from tprimat.running.live import summary_table

    for log in logs:
        click.echo(f"log: {log}")
    if result_path is None:
        click.echo(f"{ended} {missing}")
        ctx.exit(1)
        return
    result = load_result(result_path)
    make_console().print(summary_table(result))
    click.echo(f"{ended}; result: {result_path}")
    report_result(result_path, list(reporting))
    if result.run.status != "completed" or not ok:
        ctx.exit(1)
