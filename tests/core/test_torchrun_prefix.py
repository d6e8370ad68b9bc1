"""The shared torchrun prefix starts the right number of ranks with the config's rendezvous."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tprimat.contract.torchrun import torchrun_argv
from tprimat.errors import TprimatError
from tprimat.settings.config import load_config


def test_prefix_from_the_config_and_node_rank():
    config = load_config(
        None, ["launch.nnodes=2", "launch.nproc_per_node=4", 'launch.master_addr="10.0.0.1"', "launch.master_port=1234"]
    )
    assert torchrun_argv(config, node_rank=1) == [
        "torchrun",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--master-addr",
        "10.0.0.1",
        "--master-port",
        "1234",
        "--nproc-per-node",
        "4",
    ]
    with pytest.raises(TprimatError, match="node rank 2 is outside 0..1"):
        torchrun_argv(config, node_rank=2)


@pytest.mark.torch
@pytest.mark.slow
def test_torchrun_starts_each_rank_with_its_environment(tmp_path):
    torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(torchrun):
        pytest.skip("torchrun not installed (the ml extra)")
    config = load_config(None, ["launch.nproc_per_node=2", "launch.master_port=29631", "training.global_batch_size=2"])
    probe = tmp_path / "probe.py"
    # Each rank writes its own file: ranks share one stdout pipe, and their writes may interleave.
    probe.write_text(
        "import os, pathlib, sys\n"
        "pathlib.Path(sys.argv[1], 'rank' + os.environ['RANK']).write_text("
        "' '.join(['rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'],"
        " 'master', os.environ['MASTER_ADDR'], os.environ['MASTER_PORT']]))\n"
    )
    argv = [*torchrun_argv(config, program=torchrun), str(probe), str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(path.read_text() for path in tmp_path.glob("rank*"))
    assert lines == ["rank 0 of 2 master 127.0.0.1 29631", "rank 1 of 2 master 127.0.0.1 29631"]
