"""The torch backend's launch plan: the exact torchrun command (no torch needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tprimat.contract.plans import DataArguments, LaunchContext, PreparedDataset
from tprimat.hardware.platform import PlatformInfo
from tprimat.plugins.torch.launcher import (
    UnsupportedSetting,
    data_arguments,
    plan,
    profile_plan,
)
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

RUN = Path("/runs/r1")


def context(*overrides: str, **kw) -> LaunchContext:
    config = load_config(None, ["launch.nproc_per_node=2", "training.global_batch_size=8", *overrides])
    return LaunchContext(
        run_id="r1",
        run_dir=RUN,
        config=config,
        model=get_model(config.benchmark.model),
        platform=PlatformInfo(platform="cpu"),
        **kw,
    )


def test_single_node_uses_a_standalone_rendezvous():
    argv = plan(context()).argv
    assert argv == (
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        "--log-dir",
        "/runs/r1/logs/ranks",
        "--tee",
        "3",
        "-m",
        "tprimat.plugins.torch.train",
        "--config",
        "/runs/r1/config.toml",
    )


def test_multi_node_passes_rendezvous_through():
    argv = plan(
        context("launch.nnodes=2", 'launch.master_addr="10.0.0.1"', "launch.master_port=29400", node_rank=1)
    ).argv
    joined = " ".join(argv)
    assert "--standalone" not in argv
    assert ("--nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 29400 --nproc-per-node 2") in joined


def test_profile_and_data_arguments_reach_the_trainer():
    ctx = context("profile.enabled=true")
    profile = profile_plan(ctx)
    assert profile.profiled_iterations == (3, 4, 5)
    assert profile.trace_globs[0] == "torch_profile/*.pt.trace.json"
    dataset = PreparedDataset(
        path_prefix=Path("/data/web/text_document"),
        tokenizer="t",
        fingerprint="sha256:x",
        documents=1,
        tokens=10,
        vocab_size=100,
    )
    data = data_arguments(dataset, ctx.config)
    assert data == DataArguments(args=("--data-prefix", "/data/web/text_document"))
    argv = plan(context(profile=profile, data=data)).argv
    assert argv[-4:] == ("--data-prefix", "/data/web/text_document", "--profile-dir", "/runs/r1/torch_profile")


@pytest.mark.parametrize(
    "override, words",
    [
        ("parallel.tensor=2", "data-parallel only"),
        ('precision.dtype="fp8"', "bf16 or fp32"),
        ('training.recompute="selective"', "whole decoder layers"),
    ],
)
def test_settings_the_backend_cannot_honour_are_refused(override, words):
    extra = ["launch.nproc_per_node=4"] if "tensor" in override else []
    with pytest.raises(UnsupportedSetting, match=words):
        plan(context(override, *extra))


def test_mlperf_log_argument_follows_the_setting(monkeypatch):
    from tprimat.mlperf import writer

    monkeypatch.setattr(writer, "available", lambda: True)
    assert "--mlperf-log" not in plan(context()).argv  # throughput run, default "convergence"
    always = plan(context('convergence.mlperf_log="always"')).argv
    assert always[always.index("--mlperf-log") + 1].endswith("mlperf.log")
    monkeypatch.setattr(writer, "available", lambda: False)
    missing = plan(context('convergence.mlperf_log="always"'))
    assert "--mlperf-log" not in missing.argv
    assert any("pip install 'tprimat[mlperf]'" in note for note in missing.notes)
