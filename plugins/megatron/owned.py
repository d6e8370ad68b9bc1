"""Which config field decides each Megatron-LM setting tprimat renders.

Every argument destination in :data:`tprimat.plugins.megatron.settings.ARGS` is
either decided by tprimat — from a config field, the model registry or the
benchmark's fixed rules (every iteration logged, no checkpoints) — or is a
framework switch a tuned preset may set (:data:`FREE`).  The backends declare
the decided ones as :attr:`~tprimat.contract.backend.BackendSpec.config_owned`,
under both spellings a preset could use (``global_batch_size`` in
``overrides``, ``--global-batch-size`` in ``args``), so the core refuses a
preset that would launch another batch, sequence length or precision than the
config and the result say.

This module holds plain tables only: declaring a backend must stay cheap.
"""

from __future__ import annotations

#: Destination -> the config field (or registry field, or fixed rule) that decides it.
OWNER: dict[str, str] = {
    # the model registry
    "num_layers": "model.num_layers",
    "hidden_size": "model.hidden_size",
    "ffn_hidden_size": "model.ffn_hidden_size",
    "num_attention_heads": "model.num_attention_heads",
    "kv_channels": "model.kv_channels",
    "group_query_attention": "model.num_query_groups",
    "num_query_groups": "model.num_query_groups",
    "swiglu": "model.swiglu",
    "normalization": "model (RMSNorm)",
    "norm_epsilon": "model.rms_norm_eps",
    "layernorm_epsilon": "model.rms_norm_eps",
    "position_embedding_type": "model (RoPE)",
    "rotary_base": "model.rope_theta",
    "use_rope_scaling": "model.rope_scaling",
    "rope_scaling_factor": "model.rope_scaling",
    "max_position_embeddings": "model.max_position_embeddings",
    "untie_embeddings_and_output_weights": "model.tie_embeddings",
    "add_bias_linear": "model (no linear bias)",
    "add_qkv_bias": "model.qkv_bias",
    "hidden_dropout": "model (no dropout)",
    "attention_dropout": "model (no dropout)",
    "make_vocab_size_divisible_by": "model.vocab_size",
    "vocab_size": "model.vocab_size",
    # the config
    "tensor_model_parallel_size": "parallel.tensor",
    "pipeline_model_parallel_size": "parallel.pipeline",
    "context_parallel_size": "parallel.context",
    "sequence_parallel": "parallel.sequence_parallel",
    "use_distributed_optimizer": "parallel.distributed_optimizer",
    "overlap_grad_reduce": "parallel.overlap_grad_reduce",
    "overlap_param_gather": "parallel.overlap_param_gather",
    "micro_batch_size": "training.micro_batch_size",
    "global_batch_size": "training.global_batch_size",
    "seq_length": "training.seq_length",
    "train_iters": "benchmark.iterations",
    "seed": "benchmark.seed",
    "optimizer": "training (Adam)",
    "lr": "training.lr",
    "min_lr": "training.min_lr",
    "lr_warmup_iters": "training.lr_warmup_iterations",
    "lr_decay_style": "training.lr_decay_style",
    "lr_decay_iters": "training.lr_decay_iterations",
    "weight_decay": "training.weight_decay",
    "adam_beta1": "training.adam_beta1",
    "adam_beta2": "training.adam_beta2",
    "adam_eps": "training.adam_eps",
    "clip_grad": "training.clip_grad",
    "init_method_std": "training.init_method_std",
    "recompute_granularity": "training.recompute",
    "recompute_method": "training.recompute",
    "recompute_num_layers": "training.recompute",
    "eod_mask_loss": "benchmark (no loss masking at document boundaries)",
    "bf16": "precision.dtype",
    "fp8": "precision.dtype",
    "fp8_recipe": "precision.fp8_recipe",
    "fp8_amax_history_len": "precision.fp8_recipe",
    "fp8_amax_compute_algo": "precision.fp8_recipe",
    "attention_backend": "kernels.attention_backend",
    "apply_rope_fusion": "kernels.fused_rope",
    "bias_swiglu_fusion": "kernels.fused_swiglu",
    "cross_entropy_loss_fusion": "kernels.fused_cross_entropy",
    "cross_entropy_fusion_impl": "kernels.fused_cross_entropy",
    # data
    "mock_data": "data.dataset",
    "data_path": "data.dataset",
    "split": "data.dataset",
    "train_data_path": "data.dataset",
    "valid_data_path": "data.dataset",
    "test_data_path": "data.dataset",
    "tokenizer_type": "data.tokenizer",
    "tokenizer_model": "data.tokenizer",
    # fixed by the benchmark: every iteration logged, no checkpoints, evaluation only for convergence
    "log_interval": "benchmark (every iteration logged)",
    "log_throughput": "benchmark (every iteration logged)",
    "eval_interval": "convergence.eval_interval_samples",
    "eval_iters": "convergence.eval_sequences",
    "save": "benchmark (no checkpoints)",
    "load": "benchmark (no checkpoints)",
    "finetune": "benchmark (no checkpoints)",
    # the profile window and allocator snapshots
    "profile": "profile.enabled",
    "use_pytorch_profiler": "profile.enabled",
    "profile_step_start": "profile.wait",
    "profile_step_end": "profile.active",
    "profile_ranks": "profile.ranks",
    "tensorboard_dir": "profile.enabled",
    "record_memory_history": "tprimat run --memory-snapshot",
    "memory_snapshot_path": "tprimat run --memory-snapshot",
}

#: The destinations whose value is their config field's value, unchanged.
RENDERED_AS_IS: tuple[str, ...] = (
    "micro_batch_size",
    "global_batch_size",
    "seq_length",
    "train_iters",
    "seed",
    "lr",
    "min_lr",
    "lr_warmup_iters",
    "lr_decay_style",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_eps",
    "clip_grad",
    "init_method_std",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "use_distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "attention_backend",
    "apply_rope_fusion",
    "bias_swiglu_fusion",
    "cross_entropy_loss_fusion",
)

#: Megatron-LM switches no config field decides: a tuned preset may set them (speed only).
FREE: frozenset[str] = frozenset({"gradient_accumulation_fusion"})

#: Each destination's command-line flag where it is not ``--`` + the name with dashes.
FLAGS: dict[str, str] = {
    "layernorm_epsilon": "--norm-epsilon",
    "add_bias_linear": "--disable-bias-linear",
    "fp8": "--fp8-format",
    "apply_rope_fusion": "--no-rope-fusion",
    "bias_swiglu_fusion": "--no-bias-swiglu-fusion",
    "gradient_accumulation_fusion": "--no-gradient-accumulation-fusion",
}


def flag_of(dest: str) -> str:
    """The ``pretrain_gpt.py`` flag of a destination."""
    return FLAGS.get(dest, "--" + dest.replace("_", "-"))


def config_owned() -> dict[str, str]:
    """:data:`OWNER` under both spellings a preset can use: destinations and flags."""
    return {**OWNER, **{flag_of(dest): field for dest, field in OWNER.items()}}
