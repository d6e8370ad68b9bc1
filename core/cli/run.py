"""``tprimat run``: train, measure and write ``runs/<run-id>/result.json``."""

from __future__ import annotations

from pathlib import Path

import click

from tprimat.cli.output import registry_from


@click.command()
@click.option("--backend", help="Backend to run (default: the platform's, else torch).")
@click.option("--model", help="Registered model (see `tprimat models`); default from the config.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True),
              help="A benchmark config file layered over the defaults.")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override one value (repeatable), e.g. --set training.seq_length=4096.")
@click.option("--iterations", type=click.IntRange(min=1), help="Training iterations to run.")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=Path("runs"),
              show_default=True, help="Directory that holds the run directories.")
@click.option("--run-id", help="Name of the run directory (default: time-backend-model).")
@click.option("--nproc-per-node", type=click.IntRange(min=1), help="Processes (GPUs) per node.")
@click.option("--nnodes", type=click.IntRange(min=1), help="Number of nodes.")
@click.option("--node-rank", type=click.IntRange(min=0), default=0, show_default=True,
              help="This node's rank (multi-node: run once per node).")
@click.option("--master-addr", help="Rendezvous address (node rank 0's host).")
@click.option("--master-port", type=click.IntRange(1, 65535), help="Rendezvous port.")
@click.option("--profile", is_flag=True, help="Collect torch.profiler traces (profile.* settings).")
@click.option("--system-profiler", type=click.Choice(["nsys", "rocprofv3"]),
              help="Run every training worker under Nsight Systems or rocprofv3 "
                   "(reports in the run's sysprof/).")
@click.option("--dry-run", is_flag=True,
              help="Print the exact command, environment, files and config; run nothing.")
@click.option("--megatron-path", type=click.Path(file_okay=False, exists=True),
              help="Megatron-LM checkout (amd_megatron, nvd_megatron; default $MEGATRON_PATH).")
@click.option("--primus-path", type=click.Path(file_okay=False, exists=True),
              help="Primus checkout (amd_primus; default $PRIMUS_PATH).")
@click.option("--slurm", is_flag=True,
              help="Submit the run as a SLURM batch job (one task per node), follow it, "
                   "collect its logs and result.")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True,
              help="--slurm: nodes to allocate.")
@click.option("--gpus-per-node", type=click.IntRange(min=1),
              help="--slurm: GPUs to allocate per node (also the processes per node).")
@click.option("--partition", help="--slurm: partition.")
@click.option("--time", "time_limit", metavar="TIME", help="--slurm: time limit, e.g. 01:00:00.")
@click.option("--account", help="--slurm: account to charge.")
@click.option("--slurm-node", is_flag=True, hidden=True,
              help="Internal: this is one node's run inside a submitted SLURM job.")
@click.option("--strict", is_flag=True,
              help="Refuse to start (exit code 2) if the pre-flight checks (`tprimat doctor`) "
                   "find anything.")
@click.pass_context
def run(ctx: click.Context, backend, model, config_file, overrides, iterations, output, run_id,
        nproc_per_node, nnodes, node_rank, master_addr, master_port, profile, dry_run,
        megatron_path, primus_path, slurm, nodes, gpus_per_node, partition, time_limit, account,
        slurm_node, strict, system_profiler=None) -> None:
    """Train a model for N iterations, measure every one, write a result.

    With no options on a machine without a GPU this trains a tiny model on
    the torch backend in well under a minute.
    """
    from tprimat import runner

    options = {}
    if megatron_path:
        options["megatron_path"] = str(Path(megatron_path).absolute())
    if primus_path:
        options["primus_path"] = str(Path(primus_path).absolute())
    from tprimat.errors import TprimatError

    if slurm and (nnodes is not None or node_rank != 0 or master_addr is not None):
        raise TprimatError("--slurm takes the nodes, node ranks and master address from the "
                           "allocation: use --nodes instead of --nnodes/--node-rank/--master-addr")
    submit_only = {"--nodes": nodes != 1, "--gpus-per-node": gpus_per_node is not None,
                   "--partition": partition is not None, "--time": time_limit is not None,
                   "--account": account is not None}
    if not slurm and any(submit_only.values()):
        given = ", ".join(name for name, used in submit_only.items() if used)
        raise TprimatError(f"{given}: only with --slurm (without it, use --nproc-per-node and "
                           "--nnodes/--node-rank/--master-addr on each node)")
    if slurm:
        from tprimat.cli.slurm_run import submit_and_follow

        submit_and_follow(
            ctx, backend=backend, model=model, config_file=config_file, overrides=overrides,
            iterations=iterations, output=output, run_id=run_id, profile=profile,
            options=options, nodes=nodes, gpus_per_node=gpus_per_node,
            nproc_per_node=nproc_per_node, partition=partition, time_limit=time_limit, account=account,
            master_port=master_port, dry_run=dry_run,
        )
        return
    request = runner.RunRequest(
        backend=backend, model=model, config_file=config_file, overrides=tuple(overrides),
        iterations=iterations, output=output, run_id=run_id, nproc_per_node=nproc_per_node,
        nnodes=nnodes, node_rank=node_rank, master_addr=master_addr, master_port=master_port,
        profile=profile, options=options, in_slurm_job=slurm_node,
        system_profiler=system_profiler,
    )
    registry = registry_from(ctx)
    prepared = runner.prepare(request, registry)
    ctx.meta["tprimat.prepared_run"] = prepared  # read by `tprimat profile`
    if dry_run:
        click.echo(runner.describe_plan(prepared), nl=False)
        return
    findings = preflight(prepared, strict=strict)
    from tprimat.live import LiveView

    outcome = runner.run(prepared, registry, view=LiveView(), manifest_extra={"doctor": findings})
    ctx.meta["tprimat.run_outcome"] = outcome
    if outcome.result is not None and outcome.result.run.status != "completed":
        ctx.exit(1)


def preflight(prepared, *, strict: bool) -> list[dict[str, str]]:
    """The `tprimat doctor` checks before a run: warnings on stderr, or a refusal with --strict.

    Returns the findings as recorded in the run manifest (``extra["doctor"]``).
    """
    from tprimat.doctor import findings_to_dicts, run_checks, tokenizer_needed
    from tprimat.errors import TprimatError
    from tprimat.memory.preflight import memory_findings

    findings = run_checks(output_dir=prepared.run_dir.parent,
                          tokenizer=tokenizer_needed(prepared.config))
    findings += memory_findings(prepared)
    for finding in findings:
        click.echo(f"doctor: {finding.message} — {finding.fix}", err=True)
    if strict and findings:
        raise TprimatError(f"refusing to start: the pre-flight checks found {len(findings)} "
                           "problem(s) (--strict); see `tprimat doctor`")
    return findings_to_dicts(findings)
