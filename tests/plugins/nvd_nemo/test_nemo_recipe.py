"""The generated NeMo run script, checked on the real NeMo library (recipe dry run on CPU).

These tests need ``nemo-toolkit[llm]`` (CI installs it in its own stage).  They
are skipped only on a developer machine without NeMo; under CI a missing NeMo
is a failure, never a silent skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchContext
from tprimat.hardware.platform import PlatformInfo
from tprimat.plugins.nvd_nemo.launcher import SCRIPT, SETTINGS, plan
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

pytestmark = pytest.mark.nemo

HAVE_NEMO = importlib.util.find_spec("nemo") is not None and importlib.util.find_spec("nemo_run") is not None
H100 = PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", source="test")


@pytest.fixture(autouse=True)
def _need_nemo():
    if not HAVE_NEMO:
        if os.environ.get("CI"):
            pytest.fail("NeMo (nemo-toolkit[llm], nemo-run) is not installed in this CI stage")
        pytest.skip("NeMo not installed (CI runs these in its NeMo stage)")


def dry_run(tmp_path: Path, overrides: list[str]) -> dict:
    config = load_config(None, overrides)
    model = get_model(config.benchmark.model)
    run_dir = tmp_path / "run"
    context = LaunchContext(run_id="nemo-test", run_dir=run_dir, config=config, model=model, platform=H100)
    launch_plan = plan(context)
    run_dir.mkdir(parents=True)
    for name, text in launch_plan.files.items():
        (run_dir / name).write_text(text)
    script_index = launch_plan.argv.index(str(run_dir / SCRIPT))
    args = [sys.executable, *launch_plan.argv[script_index:], "--dry-run"]
    assert args[2:4] == ["--settings", str(run_dir / SETTINGS)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["llama3.1-8b", "qwen2.5-7b"])
def test_recipe_builds_and_every_default_field_lands(tmp_path, name):
    resolved = dry_run(tmp_path, [f'benchmark.model="{name}"'])
    model, spec = resolved["model"], get_model(name)
    assert resolved["model_class"] == ("Llama31Config8B" if name.startswith("llama") else "Qwen25Config7B")
    assert model["num_layers"] == spec.num_layers and model["hidden_size"] == spec.hidden_size
    assert model["ffn_hidden_size"] == spec.ffn_hidden_size
    assert model["num_attention_heads"] == spec.num_attention_heads
    assert model["num_query_groups"] == spec.num_query_groups
    assert model["kv_channels"] == spec.kv_channels
    assert model["rotary_base"] == spec.rope_theta
    assert model["layernorm_epsilon"] == spec.rms_norm_eps
    assert model["add_qkv_bias"] is spec.qkv_bias
    assert model["share_embeddings_and_output_weights"] is False
    assert model["vocab_size"] == spec.padded_vocab_size(1)
    assert model["seq_length"] == 8192
    assert model["attention_backend"] == load_config(None, []).kernels.attention_backend
    if spec.rope_scaling:
        assert model["scale_factor"] == 8.0 and model["old_context_len"] == 8192
    data = resolved["data"]
    assert data["class"] == "MockDataModule" and data["tokenizer"] == "NullTokenizer"
    assert data["tokenizer_vocab_size"] == spec.vocab_size  # the real vocabulary: real FLOPs
    batch = (data["seq_length"], data["micro_batch_size"], data["global_batch_size"])
    assert batch == (8192, 1, 128)
    trainer = resolved["trainer"]
    assert trainer["max_steps"] == 50 and trainer["log_every_n_steps"] == 1
    assert trainer["limit_val_batches"] == 0 and trainer["enable_checkpointing"] is False
    assert (trainer["num_nodes"], trainer["devices"]) == (1, 8)
    assert resolved["log"]["ckpt"] is None and resolved["resume"] is None
    opt = resolved["optimizer"]
    assert (opt["lr"], opt["min_lr"], opt["weight_decay"]) == (3e-4, 3e-5, 0.1)
    assert (opt["adam_beta1"], opt["adam_beta2"], opt["adam_eps"]) == (0.9, 0.95, 1e-8)
    assert opt["clip_grad"] == 1.0 and opt["use_distributed_optimizer"] is True
    sched = resolved["lr_scheduler"]
    assert sched["class"] == "CosineAnnealingScheduler"
    assert (sched["warmup_steps"], sched["max_steps"], sched["min_lr"]) == (2, 50, 3e-5)
    assert resolved["precision"]["precision"] == "bf16-mixed"
    assert resolved["ddp"]["overlap_grad_reduce"] is True
    assert resolved["ddp"]["overlap_param_gather"] is True


def test_non_default_fields_land(tmp_path):
    resolved = dry_run(
        tmp_path,
        [
            'benchmark.model="llama3.1-8b"',
            'precision.dtype="fp8"',
            "parallel.tensor=2",
            "parallel.sequence_parallel=true",
            "parallel.pipeline=2",
            'training.recompute="full"',
            'training.lr_decay_style="linear"',
            "training.lr_decay_iterations=30",  # another length is refused: NeMo replaces it at set-up
            "training.micro_batch_size=2",
            "training.seq_length=4096",
            "benchmark.iterations=30",
            "kernels.fused_rope=false",
            'kernels.attention_backend="fused"',
            "parallel.overlap_grad_reduce=false",
        ],
    )
    strategy = resolved["strategy"]
    layout = (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "sequence_parallel",
    )
    assert {k: strategy[k] for k in layout} == {
        "tensor_model_parallel_size": 2,
        "pipeline_model_parallel_size": 2,
        "context_parallel_size": 1,
        "sequence_parallel": True,
    }
    assert strategy["pipeline_dtype"] == "torch.bfloat16"
    precision = resolved["precision"]
    assert precision["fp8"] == "hybrid" and precision["fp8_recipe"] == "delayed"
    assert precision["fp8_amax_history_len"] == 1024
    model = resolved["model"]
    assert (model["recompute_granularity"], model["recompute_method"], model["recompute_num_layers"]) == (
        "full",
        "uniform",
        1,
    )
    assert model["apply_rope_fusion"] is False and model["attention_backend"] == "fused"
    assert model["seq_length"] == 4096
    assert model["vocab_size"] == 128256  # 128256 is a multiple of 128 × 2
    assert resolved["lr_scheduler"]["class"] == "WarmupAnnealingScheduler"
    assert resolved["lr_scheduler"]["max_steps"] == 30
    assert resolved["data"]["micro_batch_size"] == 2
    assert resolved["trainer"]["max_steps"] == 30
    assert resolved["ddp"]["overlap_grad_reduce"] is False


def test_prepared_dataset_reaches_the_pretraining_data_module(tmp_path):
    """A real Megatron .bin/.idx (written by megatron-core) and a real local HF tokenizer."""
    import numpy as np
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tprimat.contract.plans import PreparedDataset
    from tprimat.plugins.nvd_nemo.data import data_arguments

    prefix = tmp_path / "tiny_text_document"
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.int32)
    for start in range(16):
        builder.add_document(torch.arange(start, start + 40, dtype=torch.int32) % 5, [40])
    builder.finalize(f"{prefix}.idx")
    vocab = {"[UNK]": 0, "a": 1, "b": 2, "c": 3, "<eos>": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<eos>").save_pretrained(
        tmp_path / "tokenizer"
    )

    config = load_config(None, ['benchmark.model="llama3.1-8b"'])
    dataset = PreparedDataset(
        path_prefix=prefix,
        tokenizer=str(tmp_path / "tokenizer"),
        fingerprint="sha256:test",
        documents=16,
        tokens=640,
        vocab_size=5,
    )
    run_dir = tmp_path / "run"
    context = LaunchContext(
        run_id="nemo-data",
        run_dir=run_dir,
        config=config,
        model=get_model("llama3.1-8b"),
        platform=H100,
        data=data_arguments(dataset, config),
    )
    launch_plan = plan(context)
    run_dir.mkdir()
    for name, text in launch_plan.files.items():
        (run_dir / name).write_text(text)
    done = subprocess.run(
        [sys.executable, str(run_dir / SCRIPT), "--settings", str(run_dir / SETTINGS), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = json.loads(done.stdout)
    data = resolved["data"]
    assert data["class"] == "PreTrainingDataModule"
    assert data["paths"] == [str(prefix)] and data["split"] == "100,0,0"
    assert data["tokenizer"] == "AutoTokenizer" and data["tokenizer_vocab_size"] == 5
    assert resolved["model"]["vocab_size"] == 128256  # the model's embedding, not the tokenizer's


def test_profiler_callback_lands_in_the_recipe(tmp_path):
    """With profiling on, NeMo's PytorchProfilerCallback is on the trainer with the plan's window."""
    from tprimat.plugins.nvd_nemo.profiling import profile_plan

    config = load_config(None, ['benchmark.model="llama3.1-8b"', "profile.enabled=true", "benchmark.iterations=20"])
    run_dir = tmp_path / "run"
    context = LaunchContext(
        run_id="nemo-prof", run_dir=run_dir, config=config, model=get_model("llama3.1-8b"), platform=H100
    )
    profile = profile_plan(context)
    launch_plan = plan(
        LaunchContext(
            run_id="nemo-prof",
            run_dir=run_dir,
            config=config,
            model=get_model("llama3.1-8b"),
            platform=H100,
            profile=profile,
        )
    )
    run_dir.mkdir()
    for name, text in launch_plan.files.items():
        (run_dir / name).write_text(text)
    done = subprocess.run(
        [sys.executable, str(run_dir / SCRIPT), "--settings", str(run_dir / SETTINGS), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=run_dir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    callbacks = [c for c in json.loads(done.stdout)["callbacks"] if c["class"] == "PytorchProfilerCallback"]
    assert callbacks == [
        {
            "class": "PytorchProfilerCallback",
            "start_step": 2,
            "end_step": 5,
            "warmup_steps": 1,
            "active_steps": 2,
            "trace_dir": str(run_dir / "torch_profile"),
        }
    ]
    assert (run_dir / "torch_profile").is_dir()


def test_nsys_callback_lands_in_the_recipe(tmp_path):
    """Under Nsight Systems without the torch profiler: NeMo's NsysCallback over the same window."""
    from tprimat.plugins.nvd_nemo.profiling import nsys_plan

    config = load_config(None, ['benchmark.model="llama3.1-8b"', "benchmark.iterations=20"])
    run_dir = tmp_path / "run"
    context = LaunchContext(
        run_id="nemo-nsys",
        run_dir=run_dir,
        config=config,
        model=get_model("llama3.1-8b"),
        platform=H100,
        system_profiler="nsys",
    )
    launch_plan = plan(
        LaunchContext(
            run_id="nemo-nsys",
            run_dir=run_dir,
            config=config,
            model=get_model("llama3.1-8b"),
            platform=H100,
            system_profiler="nsys",
            profile=nsys_plan(context),
        )
    )
    run_dir.mkdir()
    for name, text in launch_plan.files.items():
        (run_dir / name).write_text(text)
    done = subprocess.run(
        [sys.executable, str(run_dir / SCRIPT), "--settings", str(run_dir / SETTINGS), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=run_dir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    callbacks = [c for c in json.loads(done.stdout)["callbacks"] if c["class"] == "NsysCallback"]
    assert callbacks == [{"class": "NsysCallback", "start_step": 2, "end_step": 5, "ranks": [0], "gen_shape": False}]
