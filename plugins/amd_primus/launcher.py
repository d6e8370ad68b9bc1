"""``amd_primus`` launch: a Primus experiment YAML from the benchmark config, and Primus's launcher.

The experiment is Primus's own one for the model and precision
(``examples/megatron/configs/<GPU>/<model>-<BF16|FP8>-pretrain.yaml``) with
an ``overrides`` entry for every benchmark-config field, so nothing that
shapes the work is left to Primus's defaults: its Qwen experiment reads the
sequence length from ``$PRIMUS_SEQ_LENGTH`` (2048 unless set), its Llama 3.1
model file leaves RoPE scaling off and its Qwen 2.5 file leaves the QKV bias
off; all of these are pinned here from the model registry.  Primus-only
switches that the config does not name (Primus Turbo kernels, its logging
averages) stay as Primus ships them; a ``tuned`` preset may change them and
then lists the change.

The file written into the run directory is self-contained: the base
experiment merged with the overrides, so a reader sees every key Primus gets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tprimat.contract.plans import LaunchContext, LaunchPlan
from tprimat.errors import TprimatError
from tprimat.plugins._megatron.args import (
    DEFAULT_VERSION,
    VOCAB_DIVISIBLE_BY,
    detect_version,
    null_tokenizer_vocab_arg,
    parse_version,
)
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.models import ModelSpec

EXPERIMENT_FILE = "primus_experiment.yaml"
#: Primus experiment names for the registry's models.
PRIMUS_MODELS = {"llama3.1-8b": "llama3.1_8B", "qwen2.5-7b": "qwen2.5_7B"}
#: ROCm needs this on MI300X-class GPUs (Primus's own launcher sets it too); set and recorded.
PLATFORM_ENV = {"HSA_NO_SCRATCH_RECLAIM": "1"}
HINT = "use the ROCm Primus image (docker/amd.Dockerfile), which ships Primus at /workspace/Primus"


class PrimusError(TprimatError):
    """Primus is missing, or lacks what this run needs."""


def primus_path(context: LaunchContext) -> Path:
    given = context.options.get("primus_path") or os.environ.get("PRIMUS_PATH")
    if not given:
        raise PrimusError(
            "Primus not found: set PRIMUS_PATH (or pass --primus-path) to a Primus checkout; "
            + HINT
        )
    path = Path(given)
    if not (path / "examples" / "megatron" / "configs").is_dir():
        raise PrimusError(
            f"Primus not found: {path}/examples/megatron/configs does not exist "
            f"(PRIMUS_PATH or --primus-path must name a Primus checkout); {HINT}"
        )
    return path


def gpu_config_dir(context: LaunchContext) -> str:
    """Which of Primus's per-GPU experiment folders to start from."""
    chosen = context.options.get("primus_gpu")
    if chosen:
        return str(chosen)
    name = (context.platform.device_name or "").upper()
    return "MI355X" if ("MI355" in name or "MI350" in name) else "MI300X"


def base_experiment(path: Path, gpu: str, model: ModelSpec, config: BenchmarkConfig) -> Path:
    try:
        primus_model = PRIMUS_MODELS[model.name]
    except KeyError:
        raise PrimusError(
            f"Primus ships no experiment for model {model.name}; "
            f"supported: {', '.join(PRIMUS_MODELS)}"
        ) from None
    precision = "FP8" if config.precision.dtype == "fp8" else "BF16"
    configs = path / "examples" / "megatron" / "configs"
    file = configs / gpu / f"{primus_model}-{precision}-pretrain.yaml"
    if not file.is_file():
        raise PrimusError(f"Primus experiment {file} does not exist in this Primus checkout")
    return file


def _load_yaml(file: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise PrimusError(f"{file} is not a Primus experiment (not a mapping)")
    return data


def architecture_overrides(model: ModelSpec) -> dict[str, Any]:
    gqa = model.num_query_groups != model.num_attention_heads
    scaling = model.rope_scaling or {}
    return {
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "group_query_attention": gqa,
        "num_query_groups": model.num_query_groups if gqa else None,
        "kv_channels": model.kv_channels,
        "swiglu": model.swiglu,
        "normalization": "RMSNorm",
        "norm_epsilon": model.rms_norm_eps,
        "position_embedding_type": "rope",
        "rotary_base": int(model.rope_theta),
        "use_rope_scaling": bool(scaling),
        **({"rope_scaling_factor": float(scaling["factor"])} if scaling else {}),
        "max_position_embeddings": model.max_position_embeddings,
        "untie_embeddings_and_output_weights": not model.tie_embeddings,
        "add_bias_linear": False,
        "add_qkv_bias": model.qkv_bias,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }


def training_overrides(config: BenchmarkConfig) -> dict[str, Any]:
    t, b, p, k = config.training, config.benchmark, config.parallel, config.kernels
    recompute: dict[str, Any] = {
        "none": {"recompute_granularity": None, "recompute_method": None,
                 "recompute_num_layers": None},
        "selective": {"recompute_granularity": "selective", "recompute_method": None,
                      "recompute_num_layers": None},
        "full": {"recompute_granularity": "full", "recompute_method": "uniform",
                 "recompute_num_layers": 1},
    }[t.recompute]
    precision: dict[str, Any] = {"bf16": config.precision.dtype != "fp32", "fp8": None}
    if config.precision.dtype == "fp8":
        precision.update(
            fp8=config.precision.fp8_recipe, fp8_recipe="delayed",
            fp8_amax_history_len=1024, fp8_amax_compute_algo="max",
        )
    return {
        "train_iters": b.iterations,
        "seed": b.seed,
        "micro_batch_size": t.micro_batch_size,
        "global_batch_size": t.global_batch_size,
        "seq_length": t.seq_length,
        "lr": t.lr,
        "min_lr": t.min_lr,
        "lr_warmup_iters": t.lr_warmup_iterations,
        "lr_decay_style": t.lr_decay_style,
        "lr_decay_iters": t.lr_decay_iterations or b.iterations,
        "weight_decay": t.weight_decay,
        "adam_beta1": t.adam_beta1,
        "adam_beta2": t.adam_beta2,
        "adam_eps": t.adam_eps,
        "clip_grad": t.clip_grad,
        "init_method_std": t.init_method_std,
        **recompute,
        "tensor_model_parallel_size": p.tensor,
        "pipeline_model_parallel_size": p.pipeline,
        "context_parallel_size": p.context,
        "sequence_parallel": p.sequence_parallel and p.tensor > 1,
        "use_distributed_optimizer": p.distributed_optimizer,
        "overlap_grad_reduce": p.overlap_grad_reduce,
        "overlap_param_gather": p.overlap_param_gather,
        **precision,
        "attention_backend": k.attention_backend,
        "apply_rope_fusion": k.fused_rope,
        "bias_swiglu_fusion": k.fused_swiglu,
        "cross_entropy_loss_fusion": k.fused_cross_entropy,
        "cross_entropy_fusion_impl": "native",
        "make_vocab_size_divisible_by": VOCAB_DIVISIBLE_BY,
        # every iteration logged with throughput; no evaluation, no checkpoints
        "log_interval": 1,
        "log_throughput": True,
        "eval_iters": 0,
        "save": None,
        "load": None,
        "disable_last_saving": True,
        "finetune": False,
        "auto_continue_train": False,
    }


def mock_data_overrides(model: ModelSpec, version: tuple[int, int]) -> dict[str, Any]:
    """Synthetic tokens with a tokenizer of the model's real vocabulary (no hub download)."""
    return {
        "mock_data": True,
        "train_data_path": None,
        "valid_data_path": None,
        "test_data_path": None,
        "tokenizer_type": "NullTokenizer",
        "tokenizer_model": None,
        "vocab_size": null_tokenizer_vocab_arg(model.vocab_size, version),
    }


def build_overrides(
    context: LaunchContext, config: BenchmarkConfig, version: tuple[int, int]
) -> dict[str, Any]:
    overrides = {**architecture_overrides(context.model), **training_overrides(config)}
    if context.data is not None:
        overrides.update(context.data.overrides)
    else:
        overrides.update(mock_data_overrides(context.model, version))
    return overrides


def megatron_version(path: Path, context: LaunchContext) -> tuple[tuple[int, int], str | None]:
    if context.options.get("megatron_version"):
        return parse_version(str(context.options["megatron_version"])), None
    found = detect_version(path / "third_party" / "Megatron-LM")
    if found is None:
        return DEFAULT_VERSION, (
            f"Megatron-core version not readable from {path}/third_party/Megatron-LM; assumed "
            f"{DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]}"
        )
    return found, None


def experiment_yaml(base: dict[str, Any], overrides: dict[str, Any], context: LaunchContext) -> str:
    import yaml

    experiment = dict(base)
    experiment.update(
        work_group="tprimat",
        user_name="tprimat",
        exp_name=context.run_id,
        workspace=str(Path(context.run_dir) / "primus"),
    )
    modules = dict(experiment.get("modules") or {})
    trainer = dict(modules.get("pre_trainer") or {})
    merged = dict(trainer.get("overrides") or {})
    merged.update(overrides)
    trainer["overrides"] = merged
    modules["pre_trainer"] = trainer
    experiment["modules"] = modules
    return yaml.safe_dump(experiment, sort_keys=False, default_flow_style=False)


def launcher_argv(path: Path, config_file: Path) -> tuple[list[str], dict[str, str], str]:
    """``primus-cli direct -- train pretrain --config`` when present, else ``run_pretrain.sh``."""
    cli = path / "runner" / "primus-cli"
    if cli.is_file():
        argv = ["bash", str(cli), "direct", "--", "train", "pretrain", "--config", str(config_file)]
        return argv, {}, "primus-cli direct"
    script = path / "examples" / "run_pretrain.sh"
    if script.is_file():
        return ["bash", str(script)], {"EXP": str(config_file)}, "examples/run_pretrain.sh"
    raise PrimusError(
        f"Primus launcher not found: neither {cli} nor {script} exists "
        f"(PRIMUS_PATH must be a full Primus checkout, not a config tree); {HINT}"
    )


def plan(context: LaunchContext) -> LaunchPlan:
    path = primus_path(context)
    resolved = context.methodology  # decided by the core; applied here, never changed
    config = context.config
    gpu = gpu_config_dir(context)
    base_file = base_experiment(path, gpu, context.model, config)
    version, version_note = megatron_version(path, context)
    overrides = build_overrides(context, config, version)
    overrides.update(resolved.overrides)
    if context.profile is not None:
        overrides.update(context.profile.overrides)
    base = _load_yaml(base_file)
    kept = {
        k: v for k, v in ((base.get("modules") or {}).get("pre_trainer") or {}).get(
            "overrides", {}
        ).items() if k not in overrides
    }
    text = (
        f"# Generated by tprimat for run {context.run_id} from\n# {base_file}\n"
        f"# with every benchmark-config field pinned under modules.pre_trainer.overrides.\n"
        + experiment_yaml(base, overrides, context)
    )
    config_file = Path(context.run_dir) / EXPERIMENT_FILE
    argv, launcher_env, launcher = launcher_argv(path, config_file)
    launch = config.launch
    env = {
        # Primus's launchers read the rendezvous from these (they start torchrun themselves).
        "NNODES": str(launch.nnodes),
        "NODE_RANK": str(context.node_rank),
        "GPUS_PER_NODE": str(launch.nproc_per_node),
        "MASTER_ADDR": launch.master_addr,
        "MASTER_PORT": str(launch.master_port),
        **PLATFORM_ENV,
        **launcher_env,
        **(context.data.env if context.data else {}),
        **resolved.env,
        **(context.profile.env if context.profile else {}),
    }
    notes = [f"Primus experiment base: {base_file.relative_to(path)}", f"launcher: {launcher}",
             f"Megatron-core {version[0]}.{version[1]} rules for the mock tokenizer"]
    if version_note:
        notes.append(version_note)
    if kept:
        notes.append(
            "kept from Primus's experiment (not benchmark-config fields): "
            + ", ".join(f"{k}={v}" for k, v in kept.items())
        )
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        cwd=path,
        files={EXPERIMENT_FILE: text},
        description=f"Primus pretrain ({launcher}), {context.model.name}",
        notes=tuple(notes),
    )
