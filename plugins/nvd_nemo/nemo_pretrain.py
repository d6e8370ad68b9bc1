"""Pretrain one model with a NeMo 2 recipe, every setting taken from a tprimat settings file.

tprimat copies this script into the run directory next to ``nemo_settings.json``
and starts it with torchrun (one process per GPU).  It builds NeMo's own
pretraining recipe for the model (``llm.llama31_8b`` / ``llm.qwen25_7b``),
applies every benchmark-config field to it and runs it in-process.

Before training starts, rank 0 writes the resolved recipe (:func:`resolve`:
every field of every configuration object, what NeMo's start-up changes, and
the verdict of NeMo's and megatron-core's own checks) to ``nemo_resolved.json``
beside the settings (``--resolved-out`` to choose), so the result records the
values NeMo ran with, including those its recipe keeps.

``--dry-run`` builds the recipe and prints the resolved recipe as JSON, without
starting training: that is how the mapping is checked on a machine without
GPUs.  ``--check`` does the same, also builds the Trainer, and exits 1 when a
check rejects the settings.  The script depends on NeMo only (not on tprimat).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

RECIPES = {"llama31_8b": "llama31_8b", "qwen25_7b": "qwen25_7b"}
#: The resolved recipe, written by rank 0 beside the settings before training starts.
RESOLVED = "nemo_resolved.json"
#: Environment variables that choose kernels or communication: Transformer Engine, NCCL, CUDA's queues.
FRAMEWORK_ENV = (
    "NVTE_",
    "NCCL_",
    "TORCH_NCCL_",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "PYTORCH_CUDA_ALLOC_CONF",
    "NVIDIA_TF32_OVERRIDE",
)
#: Installed distributions whose versions decide NeMo's defaults and code paths.
DISTRIBUTIONS = (
    "nemo_toolkit",
    "nemo_run",
    "megatron_core",
    "torch",
    "lightning",
    "fiddle",
    "transformer_engine",
    "apex",
)
#: Model-config switches megatron-core accepts only where Transformer Engine imports, and why.
NEEDS_TE = {"apply_rope_fusion": "megatron-core's fused RoPE kernel comes from Transformer Engine"}


def load_settings(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def scheduler(run: Any, s: dict[str, Any]) -> Any:
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


def precision_plugin(s: dict[str, Any]) -> Any:
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


def _apply_model(recipe: Any, s: dict[str, Any]) -> None:
    """Architecture pinned from the model registry (the recipe's values must agree), kernels, recompute."""
    from megatron.core.transformer.enums import AttnBackend

    model = recipe.model.config
    for key, value in s["architecture"].items():
        setattr(model, key, value)
    model.seq_length = s["seq_length"]
    model.init_method_std = s["init_method_std"]
    model.vocab_size = s["padded_vocab_size"]  # used as given: no further padding
    k = s["kernels"]
    model.attention_backend = AttnBackend[k["attention_backend"]]
    model.apply_rope_fusion = k["fused_rope"]
    model.bias_activation_fusion = k["fused_swiglu"]
    model.cross_entropy_loss_fusion = k["fused_cross_entropy"]
    r = s["recompute"]
    model.recompute_granularity = r["granularity"]
    model.recompute_method = r["method"]
    model.recompute_num_layers = r["num_layers"]


def _apply_parallel(run: Any, recipe: Any, s: dict[str, Any]) -> None:
    """Parallelism and data-parallel communication."""
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


def _apply_schedule(run: Any, recipe: Any, s: dict[str, Any]) -> None:
    """Fixed steps, every step logged, no checkpoints; validation only in convergence runs."""
    from nemo.lightning import NeMoLogger

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


def _apply_optimizer(run: Any, recipe: Any, s: dict[str, Any]) -> None:
    """Adam with the settings' values, and the learning-rate schedule."""
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
    opt.use_distributed_optimizer = s["parallel"]["distributed_optimizer"]
    opt.bf16 = s["precision"] != "fp32"
    recipe.optim.lr_scheduler = scheduler(run, s)


def _apply_data(run: Any, recipe: Any, s: dict[str, Any]) -> None:
    """Synthetic tokens from a tokenizer of the model's real vocabulary, or a prepared
    Megatron dataset with the tokenizer it was made with."""
    from nemo.collections.common.tokenizers.null_tokenizer import NullTokenizer
    from nemo.collections.llm.gpt.data.mock import MockDataModule
    from nemo.collections.llm.gpt.data.pre_training import PreTrainingDataModule

    batch = dict(
        seq_length=s["seq_length"], micro_batch_size=s["micro_batch_size"], global_batch_size=s["global_batch_size"]
    )
    data = s.get("data")
    if data is None:
        # NeMo's NullTokenizer reports vocab_size + 1 (an EOD token).
        tokenizer = run.Config(NullTokenizer, vocab_size=s["vocab_size"] - 1)
        recipe.data = run.Config(MockDataModule, tokenizer=tokenizer, **batch)
        return
    from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer

    recipe.data = run.Config(
        PreTrainingDataModule,
        paths=data["paths"],
        split=data["split"],
        seed=s["seed"],
        tokenizer=run.Config(AutoTokenizer, pretrained_model_name=data["tokenizer"]),
        **batch,
    )


def build_recipe(s: dict[str, Any]) -> Any:
    """NeMo's recipe for the model with every setting from ``s`` applied."""
    import nemo_run as run
    from nemo.collections import llm

    module = getattr(llm, RECIPES[s["recipe"]])
    recipe = module.pretrain_recipe(
        name=s["name"],
        dir=s["dir"],
        num_nodes=s["num_nodes"],
        num_gpus_per_node=s["num_gpus_per_node"],
    )
    _apply_model(recipe, s)
    _apply_parallel(run, recipe, s)
    _apply_schedule(run, recipe, s)
    _apply_optimizer(run, recipe, s)
    _apply_data(run, recipe, s)
    add_callbacks(run, recipe, (s.get("profile") or {}).get("callbacks", []))
    return recipe


def add_callbacks(run: Any, recipe: Any, callbacks: list[dict[str, Any]]) -> None:
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


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _jsonable(value: Any) -> Any:
    """A JSON value that reads the same on every machine: enums by name, functions and classes by path."""
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__fn_or_cls__"):  # a fiddle / NeMo-Run configuration, not yet built
        return {"class": value.__fn_or_cls__.__name__, **{k: _jsonable(v) for k, v in value.__arguments__.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in field_values(value).items()}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    return _ADDRESS.sub("", repr(value))


def config_values(cfg: Any) -> dict[str, Any]:
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


def call_values(cfg: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every named parameter of a configured call (a class or a function): the value given, else its default."""
    import inspect

    if dataclasses.is_dataclass(cfg.__fn_or_cls__):
        return {k: v for k, v in config_values(cfg).items() if k not in skip}
    given = dict(cfg.__arguments__)
    values = {}
    for name, param in inspect.signature(cfg.__fn_or_cls__).parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in given:
            values[name] = given.pop(name)
        elif param.default is not param.empty:
            values[name] = param.default
    values.update((k, v) for k, v in given.items() if k not in skip)  # passed through **kwargs
    return values


def field_values(obj: Any) -> dict[str, Any]:
    """Every field of a built dataclass, as it is now."""
    return {field.name: getattr(obj, field.name) for field in dataclasses.fields(obj)}


def _error(exc: BaseException) -> str:
    """The exception as one readable line: its type and message, without fiddle's build context."""
    message = str(exc).split("\n\nFiddle context:")[0].strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Setup:
    """NeMo's configuration objects for a recipe, set up as NeMo's trainer does, and the verdict of their checks."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.problems: list[str] = []
        self.not_checked: list[str] = []
        self.model = None  # the model's TransformerConfig, after NeMo's start-up changes
        self.optimizer = None  # megatron-core OptimizerConfig, after the precision plugin's changes
        self.ddp = None  # megatron-core DistributedDataParallelConfig, likewise
        self.lr_max_steps: int | None = None  # what NeMo gives the learning-rate schedule

    def attempt(self, what: str, build: Any) -> Any:
        """``build()``, recorded as checked, or as a problem with the error it raised."""
        try:
            result = build()
        except Exception as exc:  # a check of NeMo's or megatron-core's rejected the settings
            self.problems.append(f"{what}: {_error(exc)}")
            return None
        self.checked.append(what)
        return result

    def verdict(self) -> dict:
        return {
            "accepted": not self.problems,
            "problems": list(self.problems),
            "checked": list(self.checked),
            "not_checked": list(self.not_checked),
        }


def _attention_rule(model_config: Any, environ: Mapping[str, str] | None) -> None:
    """megatron-core's own rule for the attention backend and the NVTE_* variables, under ``environ``.

    ``LanguageModule._set_attention_backend`` asserts that the variables agree
    with the backend and then sets them; the process environment is restored
    afterwards.
    """
    from megatron.core.models.common.language_module.language_module import LanguageModule

    saved = dict(os.environ)
    wanted = saved if environ is None else dict(environ)  # a copy first: environ may be os.environ itself
    try:
        os.environ.clear()
        os.environ.update(wanted)
        LanguageModule._set_attention_backend(SimpleNamespace(config=model_config))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def configure(recipe: Any, environ: Mapping[str, str] | None = None, *, build_trainer: bool = False) -> Setup:
    """Build NeMo's and megatron-core's configuration objects for ``recipe`` and run their own checks.

    The steps follow what NeMo does before the first training step, with NeMo's
    own functions: the precision plugin and the strategy (with its DDP config)
    are built; the model's TransformerConfig is built and given the strategy's
    parallel layout (``set_model_parallel_attributes``, which runs its
    ``__post_init__`` checks again); the plugin's dtype settings are applied to
    the model, optimizer and DDP configs (``update_config_with_dtype_overrides``);
    the learning-rate schedule gets the trainer's ``max_steps``; the data module
    and megatron-core's micro-batch calculator are built; megatron-core's
    attention-backend rule is run under ``environ`` (default: this process's).

    What needs Transformer Engine or a GPU and cannot be built here is listed
    in ``not_checked`` with the reason; nothing in NeMo is patched.
    """
    import fiddle as fdl
    from nemo.lightning.pytorch.plugins.mixed_precision import update_config_with_dtype_overrides

    setup = Setup()
    trainer_cfg = recipe.trainer
    plugin = None
    if trainer_cfg.plugins is not None:
        plugin = setup.attempt("MegatronMixedPrecision (NeMo precision plugin)", lambda: fdl.build(trainer_cfg.plugins))
    strategy = setup.attempt(
        "MegatronStrategy with its DistributedDataParallelConfig (NeMo, megatron-core)",
        lambda: fdl.build(trainer_cfg.strategy),
    )
    dtype_config = getattr(plugin, "dtype_config", None)
    if strategy is not None and strategy.pipeline_dtype is None and dtype_config is not None:
        strategy.pipeline_dtype = dtype_config.pipeline_dtype  # as MegatronStrategy.connect does

    model = setup.model = _model_config(setup, recipe.model.config, strategy, dtype_config)
    name = recipe.model.config.__fn_or_cls__.__name__

    optimizer = setup.attempt("OptimizerConfig (megatron-core)", lambda: fdl.build(recipe.optim.config))
    ddp = getattr(strategy, "ddp_config", None)
    if dtype_config is not None:
        for config in (optimizer, ddp):
            if config is not None:
                update_config_with_dtype_overrides(dtype_config, config)
    if optimizer is not None and ddp is not None:
        ddp.use_distributed_optimizer = optimizer.use_distributed_optimizer  # as MegatronStrategy.connect does
    setup.optimizer, setup.ddp = optimizer, ddp

    setup.attempt(
        f"{recipe.optim.lr_scheduler.__fn_or_cls__.__name__} (NeMo learning-rate schedule)",
        lambda: fdl.build(recipe.optim.lr_scheduler),
    )
    setup.lr_max_steps = trainer_cfg.max_steps  # MegatronStrategy.setup gives the schedule the trainer's max_steps

    data = setup.attempt(f"{recipe.data.__fn_or_cls__.__name__} (NeMo data module)", lambda: fdl.build(recipe.data))
    if data is not None and strategy is not None:
        _micro_batches(setup, data, strategy, trainer_cfg.num_nodes * trainer_cfg.devices)
    if model is not None:
        setup.attempt(
            f"attention backend {_jsonable(model.attention_backend)} and the NVTE_* environment "
            "(megatron-core LanguageModule._set_attention_backend)",
            lambda: _attention_rule(model, environ),
        )
    if getattr(model, "fp8", None):
        setup.not_checked.append(
            f"fp8={model.fp8!r}, fp8_recipe={model.fp8_recipe!r}: Transformer Engine builds the FP8 recipe "
            "when the model runs"
        )
    _trainer(setup, trainer_cfg, build=build_trainer)
    setup.not_checked.append(
        f"{name}.configure_model (the model's layers): needs torch.distributed, megatron-core's parallel state "
        "and, for its layers, Transformer Engine; built when training starts"
    )
    return setup


def _model_config(setup: Setup, config: Any, strategy: Any, dtype_config: Any) -> Any:
    """The model's TransformerConfig: built, given the strategy's parallel layout, then the plugin's dtypes.

    megatron-core's ``__post_init__`` checks run at the build and again with the
    layout.  A switch that needs Transformer Engine (:data:`NEEDS_TE`) is off
    for the checks where it does not import, and listed in ``not_checked``.
    """
    import copy

    import fiddle as fdl
    from nemo.lightning._strategy_lib import set_model_parallel_attributes
    from nemo.lightning.pytorch.plugins.mixed_precision import update_config_with_dtype_overrides

    config = copy.deepcopy(config)  # the recipe itself stays as given
    name = config.__fn_or_cls__.__name__
    declared = config_values(config)
    switched_off = {}
    if not _has_module("transformer_engine"):
        for field, why in NEEDS_TE.items():
            if declared.get(field):
                switched_off[field] = declared[field]
                setattr(config, field, False)
                setup.not_checked.append(
                    f"{name}.{field}=True: {why}, and Transformer Engine is not importable here; "
                    "the model config's other checks ran with it off"
                )
    model = setup.attempt(f"{name} (megatron-core TransformerConfig.__post_init__)", lambda: fdl.build(config))
    if model is None:
        return None
    if strategy is not None:
        setup.attempt(
            f"{name} with the strategy's parallel layout (NeMo set_model_parallel_attributes, "
            "TransformerConfig.__post_init__ again)",
            lambda: set_model_parallel_attributes(
                SimpleNamespace(config=model, configure_model=None), strategy.parallelism
            ),
        )
    for field, value in switched_off.items():
        setattr(model, field, value)  # record the recipe's value, not the one the checks ran with
    if dtype_config is not None:
        update_config_with_dtype_overrides(dtype_config, model)
    return model


def _micro_batches(setup: Setup, data: Any, strategy: Any, world_size: int) -> None:
    """megatron-core's micro-batch calculator, as NeMo's data sampler sets it up (no batch-size ramp-up)."""
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator

    model_parallel = (
        strategy.tensor_model_parallel_size * strategy.pipeline_model_parallel_size * strategy.context_parallel_size
    )
    if world_size % model_parallel:
        setup.problems.append(
            f"data-parallel size: {world_size} GPUs are not a multiple of tensor × pipeline × context parallel "
            f"= {model_parallel} (megatron-core's initialize_model_parallel refuses it)"
        )
        return
    setup.attempt(
        f"micro-batches: global batch {data.global_batch_size}, micro batch {data.micro_batch_size}, "
        f"data-parallel {world_size // model_parallel} (megatron-core ConstantNumMicroBatchesCalculator)",
        lambda: ConstantNumMicroBatchesCalculator(
            data.global_batch_size,
            data.micro_batch_size,
            world_size // model_parallel,
            False,
            1,  # rank 1: no log line
        ),
    )


def _trainer(setup: Setup, trainer_cfg: Any, *, build: bool) -> None:
    """NeMo's Trainer (Lightning, accelerator "gpu"): built only on request; on a machine without CUDA it cannot be."""
    import fiddle as fdl

    what = f"Trainer(accelerator={trainer_cfg.accelerator!r})"
    if not build:
        setup.not_checked.append(f"{what}: built when training starts")
        return
    try:
        fdl.build(trainer_cfg)
    except Exception as exc:
        setup.not_checked.append(f"{what}: needs a CUDA device, none here ({_error(exc)})")
    else:
        setup.checked.append(f"{what} (Lightning, with the strategy, plugins and callbacks)")


def set_at_setup(recipe: Any, setup: Setup) -> dict[str, Any]:
    """The values NeMo's start-up gives that differ from the recipe's: ``section.field`` → value.

    Derived by megatron-core's ``__post_init__`` (initialisation methods, the
    parallel layout) or copied from the precision plugin (dtypes, FP8) and the
    trainer (the schedule's ``max_steps``).  A section's value overlaid with
    these is the value NeMo runs with.
    """
    changes = {}
    pairs = (
        ("model", config_values(recipe.model.config), setup.model),
        ("optimizer", config_values(recipe.optim.config), setup.optimizer),
        ("ddp", config_values(recipe.trainer.strategy.ddp), setup.ddp),
    )
    for section, before, after in pairs:
        if after is None:
            continue
        for name, value in field_values(after).items():
            now = _jsonable(value)
            if name not in before or _jsonable(before[name]) != now:
                changes[f"{section}.{name}"] = now
    given = call_values(recipe.optim.lr_scheduler).get("max_steps")
    if setup.lr_max_steps is not None and given != setup.lr_max_steps:
        changes["lr_scheduler.max_steps"] = setup.lr_max_steps
    return changes


def machine() -> dict:
    """The installed versions and optional kernels that decide some of NeMo's defaults.

    NeMo turns gradient-accumulation fusion on when APEX's fused kernel imports,
    and its data modules build attention masks when Transformer Engine does not.
    """
    from importlib import metadata

    import torch

    versions: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "versions": versions,
        "transformer_engine_importable": _has_module("transformer_engine"),
        "apex_fused_weight_gradient_importable": _has_module("fused_weight_gradient_mlp_cuda"),
        "cuda_available": torch.cuda.is_available(),
    }


def framework_environment(environ: Mapping[str, str]) -> dict:
    """The variables under which Transformer Engine, NCCL and CUDA pick kernels and communication."""
    return {k: environ[k] for k in sorted(environ) if k.startswith(FRAMEWORK_ENV)}


def resolve(recipe: Any, environ: Mapping[str, str] | None = None, *, build_trainer: bool = False) -> dict:
    """The recipe as it will run: every field of every config, what NeMo changes at start-up, and the checks.

    Sections ``model``, ``optimizer``, ``ddp``, ``lr_scheduler``, ``strategy``,
    ``trainer``, ``precision``, ``data`` and ``log`` hold every field or
    argument, set or default; ``set_at_setup`` the values NeMo's start-up
    replaces (see :func:`set_at_setup`); ``check`` the verdict of NeMo's and
    megatron-core's own checks (see :func:`configure`); ``environment`` the
    framework variables of ``environ``; ``machine`` the versions.
    """
    import fiddle as fdl

    env = os.environ if environ is None else environ
    setup = configure(recipe, env, build_trainer=build_trainer)
    model = config_values(recipe.model.config)
    optimizer = config_values(recipe.optim.config)
    data = fdl.build(recipe.data)
    trainer = recipe.trainer
    strategy = trainer.strategy
    plugin = trainer.plugins
    sched = recipe.optim.lr_scheduler
    tokenizer = getattr(data, "tokenizer", None)
    dataset = data.gpt_dataset_config if hasattr(type(data), "gpt_dataset_config") else None
    return {
        "model_class": recipe.model.config.__fn_or_cls__.__name__,
        "model": {k: _jsonable(v) for k, v in model.items()},
        "optimizer": {k: _jsonable(v) for k, v in optimizer.items()},
        "lr_scheduler": {"class": sched.__fn_or_cls__.__name__, **_jsonable(call_values(sched))},
        "strategy": _jsonable(call_values(strategy, skip=("ddp",))),
        "ddp": _jsonable(config_values(strategy.ddp)),
        "trainer": _jsonable(call_values(trainer, skip=("strategy", "plugins", "callbacks", "logger"))),
        "precision": None
        if plugin is None
        else {"class": plugin.__fn_or_cls__.__name__, **_jsonable(call_values(plugin))},
        "data": {
            "class": type(data).__name__,
            "seq_length": data.seq_length,
            "micro_batch_size": data.micro_batch_size,
            "global_batch_size": data.global_batch_size,
            "tokenizer": type(data.tokenizer).__name__ if hasattr(data, "tokenizer") else None,
            "tokenizer_vocab_size": getattr(tokenizer, "vocab_size", None),
            "paths": _jsonable(recipe.data.__arguments__.get("paths")),
            "split": _jsonable(recipe.data.__arguments__.get("split")),
            "arguments": _jsonable(call_values(recipe.data)),
            # NeMo builds attention masks whenever Transformer Engine is missing, whatever was asked.
            "create_attention_mask": getattr(data, "create_attention_mask", None),
            # megatron-core's GPT dataset config (eod_mask_loss, reset_position_ids, ...); the mock
            # data module has none: its loss mask covers every token and positions never reset.
            "dataset": None if dataset is None else _jsonable(dataset),
        },
        "log": _jsonable(call_values(recipe.log)),
        "resume": _jsonable(recipe.resume),
        "callbacks": [
            {
                "class": getattr(c, "__fn_or_cls__", type(c)).__name__,
                **{k: _jsonable(v) for k, v in getattr(c, "__arguments__", {}).items()},
            }
            for c in (trainer.callbacks or [])
        ],
        "set_at_setup": set_at_setup(recipe, setup),
        "check": setup.verdict(),
        "environment": framework_environment(env),
        "machine": machine(),
    }


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def write_json_atomically(path: Path, value: dict) -> None:
    """Write ``value`` to ``path`` through a temporary file beside it, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


#: The line that carries the resolved recipe in the run's log (one line of JSON after it).
RESOLVED_MARKER = "TPRIMAT_NEMO_RESOLVED"


def record_resolved(recipe: Any, path: Path) -> Path | None:
    """Rank 0 (``RANK`` unset or 0) writes the resolved recipe to ``path`` and prints it on one log
    line (``TPRIMAT_NEMO_RESOLVED {...}``), so the log says what NeMo ran with; other ranks do nothing."""
    if os.environ.get("RANK", "0") not in ("", "0"):
        return None
    resolved = resolve(recipe)
    write_json_atomically(path, resolved)
    print(f"{RESOLVED_MARKER} {json.dumps(resolved, sort_keys=True, separators=(',', ':'))}", flush=True)
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=str(Path(__file__).with_name("nemo_settings.json")))
    parser.add_argument(
        "--resolved-out",
        default=None,
        help=f"where rank 0 writes the resolved recipe before training (default: {RESOLVED} beside --settings)",
    )
    parser.add_argument("--dry-run", action="store_true", help="build the recipe and print it as JSON; do not train")
    parser.add_argument(
        "--check",
        action="store_true",
        help="as --dry-run, and also build the Trainer; exit 1 when NeMo's or megatron-core's checks reject it",
    )
    return parser.parse_args(argv)


def start(args: argparse.Namespace) -> tuple[dict, object]:
    """Everything before training: the settings, NeMo's recipe with them applied, the resolved recipe written."""
    settings = load_settings(args.settings)
    recipe = build_recipe(settings)
    record_resolved(recipe, Path(args.resolved_out) if args.resolved_out else Path(args.settings).with_name(RESOLVED))
    return settings, recipe


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lacking = [m for m in ("nemo", "nemo_run", "megatron.core") if not _has_module(m)]
    if lacking:
        print(
            f"nemo_pretrain.py: {', '.join(lacking)} not importable in {sys.executable}; "
            "run inside the NeMo image (docker/nvd.Dockerfile)",
            file=sys.stderr,
        )
        return 2
    if args.dry_run or args.check:
        resolved = resolve(build_recipe(load_settings(args.settings)), build_trainer=args.check)
        json.dump(resolved, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        if args.check and not resolved["check"]["accepted"]:
            for problem in resolved["check"]["problems"]:
                print(f"nemo_pretrain.py: rejected: {problem}", file=sys.stderr)
            return 1
        return 0
    settings, recipe = start(args)
    import lightning.pytorch as pl
    import nemo_run as run

    pl.seed_everything(settings["seed"], workers=True)
    run.run(recipe, direct=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
