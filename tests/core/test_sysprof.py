"""System-profiler commands: every torchrun worker runs under nsys/rocprofv3, never the launcher."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tprimat.errors import TprimatError
from tprimat.contract.plans import LaunchPlan
from tprimat.running.sysprof import (
    SystemProfiler,
    apply_system_profiler,
    attach_command,
    attach_environment,
    describe,
    worker_pids,
    wrap_torchrun,
)

OUT = Path("/runs/r1/sysprof")
TORCHRUN = ["torchrun", "--nproc-per-node", "8", "--nnodes=1", "--master-port", "29500",
            "/opt/Megatron-LM/pretrain_gpt.py", "--tensor-model-parallel-size", "1", "--profile"]


def test_nsys_with_capture_range_wraps_each_worker():
    profiler = SystemProfiler(tool="nsys", output_dir=OUT, capture_range=True)
    plan = LaunchPlan(argv=tuple(TORCHRUN), env={"A": "1"}, description="megatron")
    wrapped = apply_system_profiler(plan, profiler, python="/usr/bin/python3")
    assert list(wrapped.argv) == [
        "torchrun", "--nproc-per-node", "8", "--nnodes=1", "--master-port", "29500", "--no-python",
        "nsys", "profile", "--trace=cuda,nvtx,osrt,cublas,cudnn", "--sample=none", "--cpuctxsw=none",
        "--force-overwrite=true", "--output=/runs/r1/sysprof/nsys_rank%q{RANK}",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
        "/usr/bin/python3", "-u", "/opt/Megatron-LM/pretrain_gpt.py", "--tensor-model-parallel-size", "1",
        "--profile",
    ]
    assert wrapped.env == {"A": "1"} and "nsys" in wrapped.description
    assert describe(wrapped.argv).startswith("torchrun --nproc-per-node 8 --nnodes=1")


def test_rocprofv3_wraps_a_module_launch_through_env_and_python_m():
    argv = ["env", "HIP_VISIBLE_DEVICES=0,1", "python3", "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=2", "-m", "primus.train", "--config", "exp.yaml"]
    wrapped = wrap_torchrun(argv, ["rocprofv3", "--kernel-trace", "--"])
    assert wrapped == ["env", "HIP_VISIBLE_DEVICES=0,1", "python3", "-m", "torch.distributed.run",
                       "--standalone", "--nproc_per_node=2", "--no-python", "rocprofv3", "--kernel-trace",
                       "--", "python3", "-u", "-m", "primus.train", "--config", "exp.yaml"]


def test_rocprofv3_prefix_names_output_by_rank():
    profiler = SystemProfiler(tool="rocprofv3", output_dir=OUT)
    wrapped = apply_system_profiler(LaunchPlan(argv=tuple(TORCHRUN)), profiler, python="python")
    text = describe(wrapped.argv)
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


def test_attach_command_is_bounded_and_needs_the_attach_environment():
    profiler = SystemProfiler(tool="rocprofv3", output_dir=OUT)
    assert attach_command(4242, profiler, 30, rank=3) == [
        "timeout", "--signal=INT", "30", "rocprofv3", "--attach", "4242", "--kernel-trace",
        "--memory-copy-trace", "--hip-runtime-trace", "--attach-sync-output", "--output-format", "rocpd",
        "-d", "/runs/r1/sysprof", "-o", "rocprof_rank3"]
    assert attach_environment() == {"ROCP_TOOL_ATTACH": "1"}
    with pytest.raises(TprimatError, match="rocprofv3 only"):
        attach_command(1, SystemProfiler(tool="nsys", output_dir=OUT), 5, 0)
    with pytest.raises(TprimatError, match="positive"):
        attach_command(1, profiler, 0, 0)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_worker_pids_finds_the_python_leaves_below_a_shell_launcher(tmp_path):
    # a shell launcher -> a python "agent" -> two python "workers" with RANK set: like torchrun
    worker = "import time; time.sleep(30)"
    agent = (
        "import os, subprocess, sys, time\n"
        f"ps = [subprocess.Popen([sys.executable, '-c', {worker!r}], env={{**os.environ, 'RANK': str(r)}})"
        " for r in (1, 0)]\n"
        "[p.wait() for p in ps]\n"
    )
    script = tmp_path / "launch.sh"
    script.write_text(f"#!/bin/sh\n{sys.executable} -c \"$AGENT\"\n")
    script.chmod(0o755)
    proc = subprocess.Popen([str(script)], env={"AGENT": agent, "PATH": "/usr/bin:/bin"})
    try:
        found: list = []
        for _ in range(100):
            found = worker_pids(proc.pid)
            if len(found) == 2:
                break
            time.sleep(0.05)
        assert [rank for _, rank in found] == ["0", "1"]
        assert proc.pid not in [pid for pid, _ in found]
    finally:
        import os
        import signal

        for pid, _ in worker_pids(proc.pid):
            os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=10)
