"""``tprimat run --k8s``: one run as a Kubernetes JobSet, applied, followed and collected.

As with ``--slurm``, the submitting machine decides only the run directory,
the resources and the rendezvous port; each pod runs the image's
``tprimat run`` with the options given (``tprimat.running.k8s``).  As with
``--slurm``, ``--report-to`` exports the result here, once it is collected.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tprimat.cli.slurm_run import IMAGE_PROGRAM, gpu_vendor_for, node_run_arguments, scheduled_run, show_collected
from tprimat.running.prepare import RunRequest

if TYPE_CHECKING:
    from tprimat.export.deliver import Destination


def submit_and_follow_k8s(
    ctx: click.Context,
    request: RunRequest,
    *,
    strict: bool,
    nodes: int,
    gpus_per_node: int | None,
    image: str | None,
    gpu_vendor: str | None,
    namespace: str | None,
    volume_claim: str | None,
    secret: str | None,
    dry_run: bool,
    reporting: Sequence[Destination] = (),
) -> None:
    """Apply the JobSet, follow it to its end, print node 0's result and export it to ``reporting``'s trackers."""
    from tprimat.cli.output import registry_from
    from tprimat.running import k8s, runner
    from tprimat.running.slurm import tprimat_node_command

    if not image:
        raise k8s.K8sError("--k8s runs the image's tprimat on every node: give the image with --container-image")
    config, run_id, run_dir = scheduled_run(request, dry_run=dry_run)
    if not dry_run and shutil.which("kubectl") is None:
        raise k8s.K8sError(
            "kubectl not found on PATH: install it and point it at the cluster (--dry-run prints the manifest)"
        )
    port = request.master_port or config.launch.master_port
    options = k8s.K8sOptions(
        run_id=run_id,
        image=image,
        gpu_vendor=gpu_vendor_for(registry_from(ctx), request.backend, gpu_vendor),
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        namespace=namespace,
        volume_claim=volume_claim,
        secret=secret,
    )
    command = tprimat_node_command(node_run_arguments(request, run_id=run_id, strict=strict), program=IMAGE_PROGRAM)
    config_file = Path(request.config_file).absolute() if request.config_file else None
    documents = k8s.render_manifests(
        command, options=options, run_dir=run_dir, master_port=port, config_file=config_file
    )
    if dry_run:
        click.echo(f"# Kubernetes JobSet for run {run_id} (nothing applied): {run_dir / k8s.MANIFEST_FILE}")
        click.echo(k8s.dump_manifests(documents), nl=False)
        return
    run_dir.mkdir(parents=True)
    k8s.apply(documents, run_dir=run_dir, namespace=namespace)
    name = options.name
    click.echo(f"applied JobSet {name}; run directory {run_dir}")
    click.echo(f"each pod runs: {shlex.join(command)}")
    try:
        ended = k8s.follow(
            name, run_dir=run_dir, namespace=namespace, on_state=lambda state: click.echo(f"JobSet {name}: {state}")
        )
    except KeyboardInterrupt:
        k8s.delete(name, namespace)
        click.echo(f"JobSet {name} deleted (kubectl delete jobset); what it wrote stays on its volume")
        ctx.exit(1)
    result_path = run_dir / runner.RESULT_NAME
    collected = ended.result_path is not None and result_path.exists()
    show_collected(
        ctx,
        result_path if collected else None,
        ended=f"JobSet {name} ended {ended.state}",
        logs=ended.logs,
        ok=ended.ok,
        reporting=reporting,
        missing="without a result in node 0's log",
    )
