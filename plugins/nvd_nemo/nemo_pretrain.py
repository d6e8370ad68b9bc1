"""Pretrain one model with a NeMo 2 recipe, every setting taken from a tprimat settings file.

tprimat copies this script into the run directory next to ``nemo_settings.json``
and starts it with torchrun (one process per GPU).  It builds NeMo's own
pretraining recipe for the model (``llm.llama31_8b`` / ``llm.qwen25_7b``),
applies every benchmark-config field to it and runs it in-process.

``--dry-run`` builds the recipe and prints the resolved settings as JSON,
without starting training: that is how the mapping is checked on a machine
without GPUs.  The script depends on NeMo only (not on tprimat).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

RECIPES = {"llama31_8b": "llama31_8b", "qwen25_7b": "qwen25_7b"}


def load_settings(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def scheduler(run, s: dict):
    from nemo.lightning.pytorch.optim import (
        CosineAnnealingScheduler,
        WarmupAnnealingScheduler,
        WarmupHoldPolicyScheduler,
    )

    o = s["optimizer"]
    style = o["decay_style"]
    if style == "cosine":
        return run.Config(
            CosineAnnealingScheduler,
            max_steps=o["decay_steps"],
            warmup_steps=o["warmup_steps"],
            constant_steps=0,
            min_lr=o["min_lr"],
        )
    if style == "linear":
        return run.Config(
            WarmupAnnealingScheduler, max_steps=o["decay_steps"], warmup_steps=o["warmup_steps"], min_lr=o["min_lr"]
        )
    if style == "constant":
        return run.Config(
            WarmupHoldPolicyScheduler,
            max_steps=s["max_steps"],
            warmup_steps=o["warmup_steps"],
            hold_steps=s["max_steps"],
            min_lr=o["min_lr"],
        )
    raise SystemExit(f"unsupported lr decay style {style!r}")


def precision_plugin(s: dict):
    from nemo.collections.llm.recipes.precision.mixed_precision import (
        bf16_mixed,
        bf16_with_fp8_mixed,
    )

    if s["precision"] == "bf16":
        return bf16_mixed()
    if s["precision"] == "fp8":
        plugin = bf16_with_fp8_mixed()
        plugin.fp8 = s["fp8_format"]
        plugin.fp8_recipe = "delayed"
        plugin.fp8_amax_history_len = 1024
        plugin.fp8_amax_compute_algo = "max"
        return plugin
    return None  # fp32: no mixed-precision plugin


def build_recipe(s: dict):
    """NeMo's recipe for the model with every setting from ``s`` applied."""
    import nemo_run as run
    from nemo.collections import llm
    from nemo.collections.common.tokenizers.null_tokenizer import NullTokenizer
    from nemo.collections.llm.gpt.data.mock import MockDataModule
    from nemo.collections.llm.gpt.data.pre_training import PreTrainingDataModule
    from nemo.lightning import NeMoLogger

    module = getattr(llm, RECIPES[s["recipe"]])
    recipe = module.pretrain_recipe(
        name=s["name"],
        dir=s["dir"],
        num_nodes=s["num_nodes"],
        num_gpus_per_node=s["num_gpus_per_node"],
    )

    # Architecture, pinned from the model registry (the recipe's values must agree).
    model = recipe.model.config
    for key, value in s["architecture"].items():
        setattr(model, key, value)
    model.seq_length = s["seq_length"]
    model.init_method_std = s["init_method_std"]
    model.vocab_size = s["padded_vocab_size"]  # used as given: no further padding
    k = s["kernels"]
    from megatron.core.transformer.enums import AttnBackend

    model.attention_backend = AttnBackend[k["attention_backend"]]
    model.apply_rope_fusion = k["fused_rope"]
    model.bias_activation_fusion = k["fused_swiglu"]
    model.cross_entropy_loss_fusion = k["fused_cross_entropy"]
    r = s["recompute"]
    model.recompute_granularity = r["granularity"]
    model.recompute_method = r["method"]
    model.recompute_num_layers = r["num_layers"]

    # Parallelism and data-parallel communication.
    p = s["parallel"]
    strategy = recipe.trainer.strategy
    strategy.tensor_model_parallel_size = p["tensor"]
    strategy.pipeline_model_parallel_size = p["pipeline"]
    strategy.context_parallel_size = p["context"]
    strategy.sequence_parallel = p["sequence_parallel"]
    if p["pipeline"] > 1:
        import torch

        strategy.pipeline_dtype = torch.bfloat16 if s["precision"] != "fp32" else torch.float32
    if isinstance(strategy.ddp, str):
        # Some recipes (Qwen 2.5) leave NeMo's default DDP; give them the explicit
        # config the Llama 3.1 recipe uses, so both models reduce gradients alike.
        from megatron.core.distributed import DistributedDataParallelConfig

        strategy.ddp = run.Config(
            DistributedDataParallelConfig,
            check_for_nan_in_grad=True,
            grad_reduce_in_fp32=True,
            average_in_collective=True,
        )
    strategy.ddp.overlap_grad_reduce = p["overlap_grad_reduce"]
    strategy.ddp.overlap_param_gather = p["overlap_param_gather"]
    strategy.ddp.use_distributed_optimizer = p["distributed_optimizer"]
    strategy.ckpt_async_save = False

    # Schedule: fixed steps, every step logged, no checkpoints; validation only in convergence runs.
    trainer = recipe.trainer
    trainer.max_steps = s["max_steps"]
    trainer.log_every_n_steps = 1
    trainer.val_check_interval = s["max_steps"] + 1
    trainer.limit_val_batches = 0
    trainer.limit_test_batches = 0
    trainer.num_sanity_val_steps = 0
    validation = s.get("validation")
    if validation:  # convergence runs: validate every N steps on a fixed number of batches
        trainer.val_check_interval = validation["check_interval_steps"]
        trainer.limit_val_batches = validation["batches"]
    trainer.enable_checkpointing = False
    trainer.plugins = precision_plugin(s)
    recipe.log = run.Config(NeMoLogger, name=s["name"], log_dir=s["dir"], ckpt=None, tensorboard=None, wandb=None)
    recipe.resume = None

    # Optimizer and learning-rate schedule.
    o = s["optimizer"]
    opt = recipe.optim.config
    opt.optimizer = "adam"
    opt.lr = o["lr"]
    opt.min_lr = o["min_lr"]
    opt.weight_decay = o["weight_decay"]
    opt.adam_beta1 = o["adam_beta1"]
    opt.adam_beta2 = o["adam_beta2"]
    opt.adam_eps = o["adam_eps"]
    opt.clip_grad = o["clip_grad"]
    opt.use_distributed_optimizer = p["distributed_optimizer"]
    opt.bf16 = s["precision"] != "fp32"
    recipe.optim.lr_scheduler = scheduler(run, s)

    # Data: synthetic tokens from a tokenizer of the model's real vocabulary, or a
    # prepared Megatron dataset with the tokenizer it was made with.
    batch = dict(
        seq_length=s["seq_length"], micro_batch_size=s["micro_batch_size"], global_batch_size=s["global_batch_size"]
    )
    data = s.get("data")
    if data is None:
        # NeMo's NullTokenizer reports vocab_size + 1 (an EOD token).
        tokenizer = run.Config(NullTokenizer, vocab_size=s["vocab_size"] - 1)
        recipe.data = run.Config(MockDataModule, tokenizer=tokenizer, **batch)
    else:
        from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer

        recipe.data = run.Config(
            PreTrainingDataModule,
            paths=data["paths"],
            split=data["split"],
            seed=s["seed"],
            tokenizer=run.Config(AutoTokenizer, pretrained_model_name=data["tokenizer"]),
            **batch,
        )
    add_callbacks(run, recipe, (s.get("profile") or {}).get("callbacks", []))
    return recipe


def add_callbacks(run, recipe, callbacks: list) -> None:
    """Append the settings' callbacks (``{"target": "module.Class", "kwargs": {...}}``) to the trainer.

    NeMo's profiler callback refuses a trace directory that does not exist yet,
    so it is created here.
    """
    import importlib

    for callback in callbacks:
        module, _, name = callback["target"].rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        kwargs = dict(callback["kwargs"])
        if kwargs.get("trace_dir"):
            Path(kwargs["trace_dir"]).mkdir(parents=True, exist_ok=True)
        if recipe.trainer.callbacks is None:
            recipe.trainer.callbacks = []
        recipe.trainer.callbacks.append(run.Config(cls, **kwargs))


def _jsonable(value):
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def config_values(cfg) -> dict:
    """Every field of a dataclass config: the value set on it, else the class default.

    Read without constructing the dataclass, whose checks need GPU libraries
    (Transformer Engine) that a CPU machine lacks.
    """
    cls = cfg.__fn_or_cls__
    given = cfg.__arguments__
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in given:
            values[field.name] = given[field.name]
        elif field.default is not dataclasses.MISSING:
            values[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            values[field.name] = field.default_factory()
    return values


def resolve(recipe) -> dict:
    """The recipe as it will run: dataclass configs field by field, the data module built."""
    import fiddle as fdl

    model = config_values(recipe.model.config)
    optimizer = config_values(recipe.optim.config)
    data = fdl.build(recipe.data)
    trainer = recipe.trainer
    strategy = trainer.strategy
    plugin = trainer.plugins
    sched = recipe.optim.lr_scheduler
    tokenizer = getattr(data, "tokenizer", None)
    return {
        "model_class": recipe.model.config.__fn_or_cls__.__name__,
        "model": {k: _jsonable(v) for k, v in model.items()},
        "optimizer": {k: _jsonable(v) for k, v in optimizer.items()},
        "lr_scheduler": {
            "class": sched.__fn_or_cls__.__name__,
            **{k: _jsonable(v) for k, v in sched.__arguments__.items()},
        },
        "strategy": {
            k: _jsonable(getattr(strategy, k))
            for k in (
                "tensor_model_parallel_size",
                "pipeline_model_parallel_size",
                "context_parallel_size",
                "sequence_parallel",
            )
        },
        "ddp": {k: _jsonable(v) for k, v in strategy.ddp.__arguments__.items()},
        "trainer": {
            k: _jsonable(getattr(trainer, k))
            for k in (
                "num_nodes",
                "devices",
                "max_steps",
                "log_every_n_steps",
                "val_check_interval",
                "limit_val_batches",
                "num_sanity_val_steps",
                "enable_checkpointing",
            )
        },
        "precision": None
        if plugin is None
        else {"class": plugin.__fn_or_cls__.__name__, **{k: _jsonable(v) for k, v in plugin.__arguments__.items()}},
        "data": {
            "class": type(data).__name__,
            "seq_length": data.seq_length,
            "micro_batch_size": data.micro_batch_size,
            "global_batch_size": data.global_batch_size,
            "tokenizer": type(data.tokenizer).__name__ if hasattr(data, "tokenizer") else None,
            "tokenizer_vocab_size": getattr(tokenizer, "vocab_size", None),
            "paths": _jsonable(recipe.data.__arguments__.get("paths")),
            "split": _jsonable(recipe.data.__arguments__.get("split")),
        },
        "log": {k: _jsonable(v) for k, v in recipe.log.__arguments__.items()},
        "resume": _jsonable(recipe.resume),
        "callbacks": [
            {
                "class": getattr(c, "__fn_or_cls__", type(c)).__name__,
                **{k: _jsonable(v) for k, v in getattr(c, "__arguments__", {}).items()},
            }
            for c in (trainer.callbacks or [])
        ],
    }


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=str(Path(__file__).with_name("nemo_settings.json")))
    parser.add_argument("--dry-run", action="store_true", help="build the recipe and print it as JSON; do not train")
    args = parser.parse_args(argv)
    lacking = [m for m in ("nemo", "nemo_run", "megatron.core") if not _has_module(m)]
    if lacking:
        print(
            f"nemo_pretrain.py: {', '.join(lacking)} not importable in {sys.executable}; "
            "run inside the NeMo image (docker/nvd.Dockerfile)",
            file=sys.stderr,
        )
        return 2
    settings = load_settings(args.settings)
    recipe = build_recipe(settings)
    if args.dry_run:
        json.dump(resolve(recipe), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    import lightning.pytorch as pl
    import nemo_run as run

    pl.seed_everything(settings["seed"], workers=True)
    run.run(recipe, direct=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
