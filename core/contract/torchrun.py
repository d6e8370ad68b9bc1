"""The ``torchrun`` prefix every multi-process backend shares.

One node's rendezvous comes from the config's ``[launch]`` section (which the
``--nnodes/--node-rank/--master-addr/--master-port`` options override) and the
node's own rank; under SLURM the same values are derived from the job.
"""

from __future__ import annotations

from tprimat.settings.config import BenchmarkConfig


def torchrun_argv(config: BenchmarkConfig, *, node_rank: int = 0, program: str = "torchrun") -> list[str]:
    """``torchrun --nnodes N --node-rank R --master-addr A --master-port P --nproc-per-node G``."""
    launch = config.launch
    if not 0 <= node_rank < launch.nnodes:
        from tprimat.errors import TprimatError

        raise TprimatError(f"node rank {node_rank} is outside 0..{launch.nnodes - 1} (launch.nnodes)")
    return [
        program,
        "--nnodes",
        str(launch.nnodes),
        "--node-rank",
        str(node_rank),
        "--master-addr",
        launch.master_addr,
        "--master-port",
        str(launch.master_port),
        "--nproc-per-node",
        str(launch.nproc_per_node),
    ]
