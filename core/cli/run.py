"""``tprimat run``: train, measure and write ``runs/<run-id>/result.json``.

The options of the core are declared here; each installed backend adds its
own (``BackendSpec.options``, e.g. ``--megatron-path``), so ``tprimat run
--help`` lists exactly what the installed backends accept and ``--slurm``
forwards every one of them to the nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click

from tprimat.cli.export import report_destinations, report_result, report_to_option
from tprimat.cli.options import config_options
from tprimat.cli.output import make_console, registry_from
from tprimat.cli.tags import tag_option

if TYPE_CHECKING:
    from tprimat.contract.registry import Registry
    from tprimat.export.deliver import Destination
    from tprimat.running.prepare import PreparedRun, RunRequest


def backend_option_params(ctx: click.Context) -> list[click.Option]:
    """One click option per launch option the installed backends declare (merged by name)."""
    registry = registry_from(ctx)
    by_name: dict[str, tuple[Any, list[str]]] = {}
    for name, entry in registry.backends().items():
        for option in entry.spec.options:
            by_name.setdefault(option.name, (option, []))[1].append(name)
    params = []
    for option, backends in by_name.values():
        kind: Any = {"path": click.Path(file_okay=False, exists=True), "int": int}.get(option.kind, str)
        default = f"; default ${option.env}" if option.env else ""
        params.append(
            click.Option([option.flag, option.name], type=kind, help=f"{option.help} ({', '.join(backends)}{default}).")
        )
    return params


class RunCommand(click.Command):
    """A command whose options include those the installed backends declare."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        core = {p.name for p in params}
        extra = [p for p in backend_option_params(ctx) if p.name not in core]
        return params[:-1] + extra + params[-1:]  # --help stays last


def backend_options(registry: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The backend launch options the user gave, paths made absolute."""
    kinds = {o.name: o.kind for e in registry.backends().values() for o in e.spec.options}
    options = {}
    for name, value in given.items():
        if name in kinds and value is not None:
            options[name] = str(Path(value).absolute()) if kinds[name] == "path" else value
    return options


@click.command(cls=RunCommand)
@click.option("--backend", help="Backend to run (default: the platform's, see `tprimat backends`).")
@click.option("--model", help="Registered model (see `tprimat models`); default from the config.")
@config_options()
@click.option("--iterations", type=click.IntRange(min=1), help="Training iterations to run.")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Directory that holds the run directories.",
)
@click.option("--run-id", help="Name of the run directory (default: time-backend-model).")
@click.option("--nproc-per-node", type=click.IntRange(min=1), help="Processes (GPUs) per node.")
@click.option("--nnodes", type=click.IntRange(min=1), help="Number of nodes.")
@click.option(
    "--node-rank",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="This node's rank (multi-node: run once per node).",
)
@click.option("--master-addr", help="Rendezvous address (node rank 0's host).")
@click.option("--master-port", type=click.IntRange(1, 65535), help="Rendezvous port.")
@click.option("--profile", is_flag=True, help="Collect torch.profiler traces (profile.* settings).")
@click.option(
    "--system-profiler",
    type=click.Choice(["nsys", "rocprofv3"]),
    help="Run every training worker under Nsight Systems or rocprofv3 (reports in the run's sysprof/).",
)
@click.option(
    "--memory-snapshot",
    is_flag=True,
    help="Have the framework record its allocator history and write snapshots into the run's memory/ "
    "(`tprimat memory summarize`).",
)
@click.option("--dry-run", is_flag=True, help="Print the exact command, environment, files and config; run nothing.")
@click.option(
    "--device",
    metavar="NAME",
    help="--dry-run: plan for this device (e.g. MI300X, H100) instead of this machine's; "
    "needed for a tuned plan of another platform.",
)
@click.option(
    "--slurm",
    is_flag=True,
    help="Submit the run as a SLURM batch job (one task per node), follow it, collect its logs and result.",
)
@click.option(
    "--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="--slurm/--k8s: nodes to allocate."
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    help="--slurm/--k8s: GPUs to allocate per node (also the processes per node).",
)
@click.option("--partition", help="--slurm: partition.")
@click.option("--time", "time_limit", metavar="TIME", help="--slurm: time limit, e.g. 01:00:00.")
@click.option("--account", help="--slurm: account to charge.")
@click.option(
    "--container-image",
    metavar="IMAGE",
    help="--slurm: run each node in this image (its own tprimat); --k8s: the pods' image.",
)
@click.option(
    "--container-runtime",
    type=click.Choice(["auto", "pyxis", "apptainer", "singularity", "podman", "docker"]),
    default="auto",
    show_default=True,
    help="--slurm --container-image: pyxis (srun --container-image), or a runtime started on each node; "
    "auto: pyxis where srun has it, else the first of apptainer, singularity, podman, docker on the node.",
)
@click.option(
    "--container-mount",
    "container_mounts",
    multiple=True,
    metavar="SRC[:DST]",
    help="--slurm --container-image: a further mount (repeatable); the output, working directory, config, "
    "data and framework checkouts are mounted at their own paths already.",
)
@click.option(
    "--gpu-vendor",
    type=click.Choice(["amd", "nvidia", "none"]),
    help="--container-image/--k8s: whose GPUs the container gets (default: the backend's platform).",
)
@click.option(
    "--k8s",
    is_flag=True,
    help="Run on Kubernetes as a JobSet (one pod per node, --container-image), follow it, collect node 0's result.",
)
@click.option("--namespace", help="--k8s: namespace (default: kubectl's).")
@click.option(
    "--k8s-volume",
    metavar="CLAIM",
    help="--k8s: PersistentVolumeClaim that holds the run directories (mounted at --output); default: each pod's own.",
)
@click.option("--k8s-secret", metavar="NAME", help="--k8s: Secret whose keys the pods get as variables (HF_TOKEN).")
@click.option(
    "--slurm-node",
    is_flag=True,
    hidden=True,
    help="Internal: this is one node's run inside a submitted SLURM or Kubernetes job.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse to start (exit code 2) if the pre-flight checks (`tprimat doctor`) find a problem "
    "(a memory estimate within the estimator's error is a note, not a problem).",
)
@report_to_option
@tag_option
@click.pass_context
def run(
    ctx: click.Context,
    backend: str | None,
    model: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    iterations: int | None,
    output: Path,
    run_id: str | None,
    nproc_per_node: int | None,
    nnodes: int | None,
    node_rank: int,
    master_addr: str | None,
    master_port: int | None,
    profile: bool,
    memory_snapshot: bool,
    dry_run: bool,
    device: str | None,
    slurm_node: bool,
    strict: bool,
    system_profiler: str | None = None,
    report_to: tuple[str, ...] = (),
    tags: dict[str, str] | None = None,
    **given: Any,
) -> None:
    """Train a model for N iterations, measure every one, write a result.

    With no options on a machine without a GPU this trains a tiny model on
    the torch backend in well under a minute.
    """
    from tprimat.running import prepare

    registry = registry_from(ctx)
    scheduling = Scheduling.take_from(given)  # what is left in `given` are the backends' options
    options = backend_options(registry, given)
    check_launch_options(
        scheduling,
        dry_run=dry_run,
        device=device,
        node_options=nnodes is not None or node_rank != 0 or master_addr is not None,
    )
    request = prepare.RunRequest(
        backend=backend,
        model=model,
        config_file=config_file,
        overrides=tuple(overrides),
        iterations=iterations,
        output=output,
        run_id=run_id,
        nproc_per_node=nproc_per_node or (scheduling.gpus_per_node if scheduling.scheduled else None),
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        profile=profile,
        options=options,
        in_slurm_job=slurm_node,
        system_profiler=system_profiler,
        memory_snapshot=memory_snapshot,
        device=device,
        tags=tags or {},
    )
    reporting = report_destinations(ctx, report_to) if not dry_run else []
    if scheduling.scheduled:
        submit_scheduled(ctx, request, scheduling, strict=strict, dry_run=dry_run, reporting=reporting)
    else:
        run_here(ctx, registry, request, strict=strict, dry_run=dry_run, reporting=reporting)


@attrs.frozen(kw_only=True)
class Scheduling:
    """The options of a run submitted to a scheduler (``--slurm``, ``--k8s``), as given."""

    slurm: bool = False
    k8s: bool = False
    nodes: int = 1
    gpus_per_node: int | None = None
    partition: str | None = None
    time_limit: str | None = None
    account: str | None = None
    container_image: str | None = None
    container_runtime: str = "auto"
    container_mounts: tuple[str, ...] = ()
    gpu_vendor: str | None = None
    namespace: str | None = None
    k8s_volume: str | None = None
    k8s_secret: str | None = None

    @classmethod
    def take_from(cls, given: dict[str, Any]) -> Scheduling:
        """The scheduling options removed from ``given`` (a command's keyword arguments)."""
        names = [field.name for field in attrs.fields(cls)]
        values = {name: given.pop(name) for name in names if name in given}
        values["container_mounts"] = tuple(values.get("container_mounts", ()))
        return cls(**values)

    @property
    def scheduled(self) -> bool:
        return self.slurm or self.k8s


def check_launch_options(scheduling: Scheduling, *, dry_run: bool, device: str | None, node_options: bool) -> None:
    """Refuse options that do not go together (one line, exit code 2) before anything is planned.

    ``node_options``: whether --nnodes, --node-rank or --master-addr was given (a scheduler
    takes those from its allocation).
    """
    from tprimat.errors import TprimatError

    s = scheduling
    if device and not dry_run:
        raise TprimatError(
            "--device plans for another device: use it with --dry-run (a real run measures the device it runs on)"
        )
    if s.slurm and s.k8s:
        raise TprimatError("--slurm or --k8s: one scheduler per run")
    if s.scheduled and node_options:
        raise TprimatError(
            f"{'--slurm' if s.slurm else '--k8s'} takes the nodes, node ranks and master address from the "
            "allocation: use --nodes instead of --nnodes/--node-rank/--master-addr"
        )
    submit_only = {
        "--nodes": s.nodes != 1,
        "--gpus-per-node": s.gpus_per_node is not None,
        "--partition": s.partition is not None,
        "--time": s.time_limit is not None,
        "--account": s.account is not None,
    }
    if not s.scheduled and any(submit_only.values()):
        given = ", ".join(name for name, used in submit_only.items() if used)
        raise TprimatError(
            f"{given}: only with --slurm (without it, use --nproc-per-node and "
            "--nnodes/--node-rank/--master-addr on each node)"
        )
    check_scheduler_options(
        slurm=s.slurm,
        k8s=s.k8s,
        used={
            "--partition": s.partition is not None,
            "--time": s.time_limit is not None,
            "--account": s.account is not None,
            "--container-image": s.container_image is not None,
            "--container-runtime": s.container_runtime != "auto",
            "--container-mount": bool(s.container_mounts),
            "--gpu-vendor": s.gpu_vendor is not None,
            "--namespace": s.namespace is not None,
            "--k8s-volume": s.k8s_volume is not None,
            "--k8s-secret": s.k8s_secret is not None,
        },
    )


def submit_scheduled(
    ctx: click.Context,
    request: RunRequest,
    scheduling: Scheduling,
    *,
    strict: bool,
    dry_run: bool,
    reporting: list[Destination],
) -> None:
    """Submit the run to Kubernetes or SLURM and follow it to its end (``--dry-run``: print the job)."""
    s = scheduling
    if s.k8s:
        from tprimat.cli.k8s_run import submit_and_follow_k8s

        submit_and_follow_k8s(
            ctx,
            request,
            strict=strict,
            nodes=s.nodes,
            gpus_per_node=s.gpus_per_node,
            image=s.container_image,
            gpu_vendor=s.gpu_vendor,
            namespace=s.namespace,
            volume_claim=s.k8s_volume,
            secret=s.k8s_secret,
            dry_run=dry_run,
            reporting=reporting,
        )
        return
    from tprimat.cli.slurm_run import submit_and_follow

    submit_and_follow(
        ctx,
        request,
        strict=strict,
        nodes=s.nodes,
        gpus_per_node=s.gpus_per_node,
        partition=s.partition,
        time_limit=s.time_limit,
        account=s.account,
        dry_run=dry_run,
        image=s.container_image,
        runtime=s.container_runtime,
        mounts=s.container_mounts,
        gpu_vendor=s.gpu_vendor,
        reporting=reporting,
    )


def run_here(
    ctx: click.Context,
    registry: Registry,
    request: RunRequest,
    *,
    strict: bool,
    dry_run: bool,
    reporting: list[Destination],
) -> None:
    """Plan the run on this machine and train it (``--dry-run``: print the plan); exit code 1 unless it completed.

    The plan and the outcome are left in ``ctx.meta`` for `tprimat profile`.
    """
    from tprimat.running import dryrun, prepare, runner

    prepared = prepare.prepare(request, registry)
    ctx.meta["tprimat.prepared_run"] = prepared  # read by `tprimat profile`
    if dry_run:
        click.echo(dryrun.describe_plan(prepared), nl=False)
        return
    findings = preflight(prepared, strict=strict)
    from tprimat.running.live import LiveView

    outcome = runner.run(prepared, registry, view=LiveView(make_console()), manifest_extra={"doctor": findings})
    ctx.meta["tprimat.run_outcome"] = outcome
    report_result(outcome.result_path, reporting)
    if outcome.result is not None and outcome.result.run.status != "completed":
        ctx.exit(1)


def check_scheduler_options(*, slurm: bool, k8s: bool, used: dict[str, bool]) -> None:
    """Refuse the options of a scheduler that is not used (one line, exit code 2)."""
    from tprimat.errors import TprimatError

    only = {
        "--slurm": ("--partition", "--time", "--account", "--container-runtime", "--container-mount"),
        "--k8s": ("--namespace", "--k8s-volume", "--k8s-secret"),
        "--slurm or --k8s": ("--container-image", "--gpu-vendor"),
    }
    allowed = {"--slurm": slurm, "--k8s": k8s, "--slurm or --k8s": slurm or k8s}
    for needs, names in only.items():
        given = [name for name in names if used[name]]
        if given and not allowed[needs]:
            raise TprimatError(f"{', '.join(given)}: only with {needs}")


def preflight(prepared: PreparedRun, *, strict: bool) -> list[dict[str, str]]:
    """The `tprimat doctor` checks before a run: warnings on stderr, or a refusal with --strict.

    Returns the findings as recorded in the run manifest (``extra["doctor"]``).
    """
    from tprimat.errors import TprimatError
    from tprimat.running.doctor import findings_to_dicts, run_checks, tokenizer_needed
    from tprimat.running.memory_check import memory_findings

    findings = run_checks(output_dir=prepared.run_dir.parent, tokenizer=tokenizer_needed(prepared.config))
    findings += memory_findings(prepared)
    for finding in findings:
        click.echo(f"doctor: {finding.message} — {finding.fix}", err=True)
    problems = [f for f in findings if f.severity == "warning"]  # notes are printed and recorded, never refused
    if strict and problems:
        raise TprimatError(
            f"refusing to start: the pre-flight checks found {len(problems)} "
            "problem(s) (--strict); see `tprimat doctor`"
        )
    return findings_to_dicts(findings)
