"""System-profiler commands: every torchrun worker runs under nsys/rocprofv3, never the launcher."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchPlan
from tprimat.errors import TprimatError
from tprimat.running.sysprof import (
    SystemProfiler,
    apply_system_profiler,
    wrap_torchrun,
)

OUT = Path("/runs/r1/sysprof")
TORCHRUN = [
    "torchrun",
    "--nproc-per-node",
    "8",
    "--nnodes=1",
    "--master-port",
    "29500",
    "/opt/Megatron-LM/pretrain_gpt.py",
    "--tensor-model-parallel-size",
    "1",
    "--profile",
]


def test_nsys_with_capture_range_wraps_each_worker():
    profiler = SystemProfiler(tool="nsys", output_dir=OUT, capture_range=True)
    plan = LaunchPlan(argv=tuple(TORCHRUN), env={"A": "1"}, description="megatron")
    wrapped = apply_system_profiler(plan, profiler, python="/usr/bin/python3")
    assert list(wrapped.argv) == [
        "torchrun",
        "--nproc-per-node",
        "8",
        "--nnodes=1",
        "--master-port",
        "29500",
        "--no-python",
        "nsys",
        "profile",
        "--trace=cuda,nvtx,osrt,cublas,cudnn",
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        "--output=/runs/r1/sysprof/nsys_rank%q{RANK}",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "/usr/bin/python3",
        "-u",
        "/opt/Megatron-LM/pretrain_gpt.py",
        "--tensor-model-parallel-size",
        "1",
        "--profile",
    ]
    assert wrapped.env == {"A": "1"} and "nsys" in wrapped.description
    assert shlex.join(wrapped.argv).startswith("torchrun --nproc-per-node 8 --nnodes=1")


def test_rocprofv3_wraps_a_module_launch_through_env_and_python_m():
    argv = [
        "env",
        "HIP_VISIBLE_DEVICES=0,1",
        "python3",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "primus.train",
        "--config",
        "exp.yaml",
    ]
    wrapped = wrap_torchrun(argv, ["rocprofv3", "--kernel-trace", "--"])
    assert wrapped == [
        "env",
        "HIP_VISIBLE_DEVICES=0,1",
        "python3",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--no-python",
        "rocprofv3",
        "--kernel-trace",
        "--",
        "python3",
        "-u",
        "-m",
        "primus.train",
        "--config",
        "exp.yaml",
    ]


def test_rocprofv3_prefix_names_output_by_rank():
    profiler = SystemProfiler(tool="rocprofv3", output_dir=OUT)
    wrapped = apply_system_profiler(LaunchPlan(argv=tuple(TORCHRUN)), profiler, python="python")
    text = shlex.join(wrapped.argv)
    assert "--no-python rocprofv3 --kernel-trace --memory-copy-trace --hip-runtime-trace" in text
    assert "-d /runs/r1/sysprof -o 'rocprof_rank%env{RANK}%' -- python -u /opt/Megatron-LM/pretrain_gpt.py" in text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["bash", "run_pretrain.sh"], "does not run torchrun"),
        (["torchrun", "--nproc-per-node", "8"], "no training script"),
        (["torchrun", "--no-python", "x"], "already uses torchrun --no-python"),
        (["torchrun", "--nnodes"], "has no value"),
    ],
)
def test_unwrappable_commands_are_refused(argv, message):
    with pytest.raises(TprimatError, match=message):
        wrap_torchrun(argv, ["nsys", "profile"])


def test_profiler_validation():
    with pytest.raises(TprimatError, match="unknown system profiler"):
        SystemProfiler(tool="perf", output_dir=OUT)
    with pytest.raises(TprimatError, match="Nsight Systems option"):
        SystemProfiler(tool="rocprofv3", output_dir=OUT, capture_range=True)
