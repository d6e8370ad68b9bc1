"""``nvd_nemo`` launch: a NeMo 2 recipe script and its settings, started with torchrun.

tprimat writes two files into the run directory: ``nemo_pretrain.py`` (shipped
with this plugin, independent of tprimat) and ``nemo_settings.json`` (every
benchmark-config field, and the model's architecture from the registry).  The
script builds NeMo's own recipe for the model and applies the settings; its
``--dry-run`` prints the resolved recipe, which tests check on the real NeMo.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from tprimat.contract import BenchmarkConfig, ModelSpec
from tprimat.contract.plans import FrameworkSettings, LaunchContext, LaunchPlan
from tprimat.contract.torchrun import torchrun_argv
from tprimat.errors import TprimatError
from tprimat.plugins.megatron_core.attention import refuse_attention_conflicts

SCRIPT = "nemo_pretrain.py"
SETTINGS = "nemo_settings.json"
#: NeMo's recipe module for each registry model.
RECIPES = {"llama3.1-8b": "llama31_8b", "qwen2.5-7b": "qwen25_7b"}
#: NeMo 2's memory-history callback (nemo.lightning.pytorch.callbacks), and where it writes.
MEMORY_CALLBACK = "nemo.lightning.pytorch.callbacks.memory_profiler.MemoryProfileCallback"
SNAPSHOT_DIR = "memory"
#: The FP8 recipe every backend runs (the launch script sets it on NeMo's precision plugin).
FP8_RECIPE = {"fp8_recipe": "delayed", "fp8_amax_history_len": 1024, "fp8_amax_compute_algo": "max"}
#: What Megatron (NeMo's engine) asks of the environment on every platform.
PLATFORM_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def architecture(model: ModelSpec) -> dict[str, Any]:
    """Registry values under NeMo's (Megatron-core TransformerConfig) field names."""
    arch: dict[str, Any] = {
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_query_groups": model.num_query_groups,
        "kv_channels": model.kv_channels,
        "gated_linear_unit": model.swiglu,
        "normalization": "RMSNorm",
        "layernorm_epsilon": model.rms_norm_eps,
        "position_embedding_type": "rope",
        "rotary_base": model.rope_theta,
        "share_embeddings_and_output_weights": model.tie_embeddings,
        "add_bias_linear": False,
        "add_qkv_bias": model.qkv_bias,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }
    scaling = model.rope_scaling
    if scaling:
        if scaling.get("rope_type") != "llama3":
            raise TprimatError(f"{model.name}: NeMo's recipes apply Llama 3.1 RoPE scaling only")
        arch.update(
            scale_factor=float(scaling["factor"]),
            low_freq_factor=float(scaling["low_freq_factor"]),
            high_freq_factor=float(scaling["high_freq_factor"]),
            old_context_len=int(scaling["original_max_position_embeddings"]),
        )
    return arch


def settings(context: LaunchContext, config: BenchmarkConfig) -> dict[str, Any]:
    model = context.model
    try:
        recipe = RECIPES[model.name]
    except KeyError:
        raise TprimatError(
            f"NeMo has no pretraining recipe mapped for model {model.name}; supported: {', '.join(RECIPES)}"
        ) from None
    t, b, p, k = config.training, config.benchmark, config.parallel, config.kernels
    if t.lr_decay_iterations not in (0, b.iterations):
        raise TprimatError(
            f"training.lr_decay_iterations = {t.lr_decay_iterations}: NeMo's MegatronStrategy sets the "
            f"learning-rate schedule's max_steps to the trainer's ({b.iterations}, benchmark.iterations) "
            "at set-up, so the run would decay over another length than the plan says; "
            "use 0 (decay over the whole run) or the iteration count"
        )
    recompute = {
        "none": {"granularity": None, "method": None, "num_layers": None},
        "selective": {"granularity": "selective", "method": None, "num_layers": None},
        "full": {"granularity": "full", "method": "uniform", "num_layers": 1},
    }[t.recompute]
    run_dir = Path(context.run_dir)
    out: dict[str, Any] = {
        "recipe": recipe,
        "name": context.run_id,
        "dir": str(run_dir / "nemo"),
        "num_nodes": config.launch.nnodes,
        "num_gpus_per_node": config.launch.nproc_per_node,
        "max_steps": b.iterations,
        "seed": b.seed,
        "seq_length": t.seq_length,
        "micro_batch_size": t.micro_batch_size,
        "global_batch_size": t.global_batch_size,
        "init_method_std": t.init_method_std,
        "vocab_size": model.vocab_size,
        "padded_vocab_size": model.padded_vocab_size(p.tensor),
        "architecture": architecture(model),
        "parallel": {
            "tensor": p.tensor,
            "pipeline": p.pipeline,
            "context": p.context,
            "sequence_parallel": p.sequence_parallel and p.tensor > 1,
            "distributed_optimizer": p.distributed_optimizer,
            "overlap_grad_reduce": p.overlap_grad_reduce,
            "overlap_param_gather": p.overlap_param_gather,
        },
        "optimizer": {
            "lr": t.lr,
            "min_lr": t.min_lr,
            "warmup_steps": t.lr_warmup_iterations,
            "decay_style": t.lr_decay_style,
            "decay_steps": t.lr_decay_iterations or b.iterations,
            "weight_decay": t.weight_decay,
            "adam_beta1": t.adam_beta1,
            "adam_beta2": t.adam_beta2,
            "adam_eps": t.adam_eps,
            "clip_grad": t.clip_grad,
        },
        "precision": config.precision.dtype,
        "fp8_format": config.precision.fp8_recipe,
        "kernels": {
            "attention_backend": k.attention_backend,
            "fused_rope": k.fused_rope,
            "fused_swiglu": k.fused_swiglu,
            "fused_cross_entropy": k.fused_cross_entropy,
        },
        "recompute": recompute,
        "data": None,
    }
    if context.data is not None:
        out["data"] = context.data.overrides["data"]
    v = config.convergence
    if v.enabled:  # validation in whole global batches (a Lightning val batch is one global batch)
        out["validation"] = {
            "check_interval_steps": max(1, math.ceil(v.eval_interval_samples / t.global_batch_size)),
            "batches": math.ceil(v.eval_sequences / t.global_batch_size),
        }
    return out


def script_text() -> str:
    return resources.files("tprimat.plugins.nvd_nemo").joinpath(SCRIPT).read_text(encoding="utf-8")


def plan(context: LaunchContext) -> LaunchPlan:
    resolved = context.methodology  # decided by the core; applied here, never changed
    config = context.config
    values = settings(context, config)
    values.update(resolved.overrides)
    if context.profile is not None:
        values["profile"] = context.profile.overrides
    run_dir = Path(context.run_dir)
    if context.memory_snapshot:  # NeMo's own callback: records the allocator history, dumps a snapshot per rank
        profile = dict(values.get("profile") or {})
        profile["callbacks"] = [
            *profile.get("callbacks", []),
            {"target": MEMORY_CALLBACK, "kwargs": {"dir": str(run_dir / SNAPSHOT_DIR), "warn_cycles": False}},
        ]
        values["profile"] = profile
    argv = [
        *torchrun_argv(config, node_rank=context.node_rank),
        str(run_dir / SCRIPT),
        "--settings",
        str(run_dir / SETTINGS),
        *resolved.args,
        *(context.profile.args if context.profile else ()),
    ]
    env = {
        **PLATFORM_ENV,
        **(context.data.env if context.data else {}),
        **resolved.env,
        **(context.profile.env if context.profile else {}),
    }
    refuse_attention_conflicts(config.kernels.attention_backend, env)  # NeMo builds with megatron-core
    notes = [
        f"NeMo recipe llm.{values['recipe']}.pretrain_recipe, every field set from "
        f"{SETTINGS}; padded vocabulary {values['padded_vocab_size']}"
    ]
    if context.config.benchmark.seed != 1234:
        notes.append(
            "NeMo's model-parallel RNG seed is fixed at 1234 by NeMo; benchmark.seed seeds Python, NumPy and torch"
        )
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        cwd=run_dir,
        files={SCRIPT: script_text(), SETTINGS: json.dumps(values, indent=2) + "\n"},
        snapshot_globs=(f"{SNAPSHOT_DIR}/*.pickle",) if context.memory_snapshot else (),
        description=f"NeMo 2 pretrain recipe llm.{values['recipe']}, {context.model.name}",
        notes=tuple(notes),
        framework=framework_settings(values),
    )


def framework_settings(values: dict[str, Any]) -> FrameworkSettings:
    """What the launch script sets on NeMo's recipe; NeMo's own values for the rest are read at run time.

    The script prints NeMo's resolved recipe at start-up (and writes it beside the
    settings), so the result records every value NeMo ran with; what the recipe keeps
    is not known before then, and the shared values it decides are null here.
    """
    arch, kernels, parallel = values["architecture"], values["kernels"], values["parallel"]
    fp8 = values["precision"] == "fp8"
    fused_ce = kernels["fused_cross_entropy"]
    return FrameworkSettings(
        framework=f"NeMo 2 recipe llm.{values['recipe']}",
        rendered=dict(values),
        kept_from="NeMo's recipe, resolved by the launch script at start-up",
        shared={
            # MockDataModule's loss mask covers every token; PreTrainingDataModule is built without
            # eod_mask_loss, whose default in NeMo's dataset config is off.
            "loss.eod_mask": False,
            "norm.epsilon": arch["layernorm_epsilon"],
            "init.std": values["init_method_std"],
            "dropout.hidden": arch["hidden_dropout"],
            "dropout.attention": arch["attention_dropout"],
            "precision.dtype": values["precision"],
            "precision.fp8_format": values["fp8_format"] if fp8 else None,
            "precision.fp8_recipe": FP8_RECIPE["fp8_recipe"] if fp8 else None,
            "precision.fp8_amax_history_len": FP8_RECIPE["fp8_amax_history_len"] if fp8 else None,
            "precision.fp8_amax_compute_algo": FP8_RECIPE["fp8_amax_compute_algo"] if fp8 else None,
            "attention.kernel": kernels["attention_backend"],
            # megatron-core's default implementation of the fused cross-entropy
            "loss.fused_cross_entropy": "native" if fused_ce else False,
            # NeMo enables it when APEX's fused kernel imports: known only where the run happens
            "grad.accumulation_fusion": None,
            "kernels.fused_rope": kernels["fused_rope"],
            "kernels.fused_swiglu": kernels["fused_swiglu"],
            "recompute": values["recompute"]["granularity"] or "none",
            "optimizer.distributed": parallel["distributed_optimizer"],
            "overlap.grad_reduce": parallel["overlap_grad_reduce"],
            "overlap.param_gather": parallel["overlap_param_gather"],
        },
    )
