"""Convergence settings reach the NeMo settings file: validation cadence, batches and a held-out split."""

from __future__ import annotations

from pathlib import Path

from tprimat.contract.plans import LaunchContext
from tprimat.hardware.platform import PlatformInfo
from tprimat.plugins.megatron_core.data import megatron_split
from tprimat.plugins.nvd_nemo.launcher import settings
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model


def context(*overrides: str) -> LaunchContext:
    config = load_config(overrides=["training.global_batch_size=32", *overrides])
    return LaunchContext(
        run_id="r",
        run_dir=Path("/tmp/r"),
        config=config,
        model=get_model("llama3.1-8b"),
        platform=PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8),
    )


def test_convergence_adds_validation_settings():
    ctx = context(
        "convergence.enabled=true",
        "convergence.eval_interval_samples=12288",
        "convergence.eval_sequences=1024",
        "convergence.validation_fraction=0.01",
    )
    values = settings(ctx, ctx.config)
    assert values["validation"] == {"check_interval_steps": 384, "batches": 32}
    assert megatron_split(ctx.config) == "0.99,0.01,0"


def test_throughput_runs_have_no_validation():
    ctx = context()
    assert "validation" not in settings(ctx, ctx.config) and megatron_split(ctx.config) is None


def test_megatron_family_holds_out_the_same_fraction():
    from tprimat.contract.plans import PreparedDataset
    from tprimat.plugins.megatron.data import data_settings

    dataset = PreparedDataset(
        path_prefix=Path("/data/c4/text_document"),
        tokenizer="/data/tok",
        vocab_size=128256,
        fingerprint="sha256:0",
        documents=10,
        tokens=100,
    )
    on = context("convergence.enabled=true", "convergence.validation_fraction=0.02").config
    assert data_settings(dataset, on)["split"] == "0.98,0.02,0"
    assert data_settings(dataset, context().config)["split"] == "100,0,0"
