"""Megatron-LM ``pretrain_gpt.py`` arguments from one benchmark config and one model spec.

Every flag produced here exists in the Megatron-LM release it targets (tests
check them against the argument lists that Megatron's own parser accepts).
The mapping is the same for AMD and NVIDIA; platform differences live in the
launch modules and in ``tuned`` presets, never here.

Two Megatron facts drive the details:

* The mock-data tokenizer (``--tokenizer-type NullTokenizer``) decides the
  embedding size, and the embedding/output layer is part of the FLOPs.  Up to
  Megatron-core 0.17 its vocabulary is ``--vocab-size`` + 1 (an extra EOD
  token); from 0.18 on it is exactly ``--vocab-size``.  We pass whatever makes
  the tokenizer's vocabulary equal the model's real one, and Megatron then
  pads it to a multiple of ``--make-vocab-size-divisible-by`` × TP, exactly as
  :meth:`tprimat.settings.models.ModelSpec.padded_vocab_size` computes.
* ``--use-rope-scaling`` applies Llama 3.1's scaling with fixed low/high
  frequency factors (1, 4) and original context (8192); only the factor is a
  flag.  A model whose scaling differs cannot be expressed and is refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from tprimat.contract.plans import DataArguments
from tprimat.errors import TprimatError
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.models import ModelSpec

#: Megatron-core version assumed when none can be read from the checkout.
DEFAULT_VERSION: tuple[int, int] = (0, 15)
#: Megatron pads the vocabulary to a multiple of this × TP (its default, kept explicit).
VOCAB_DIVISIBLE_BY = 128
#: Llama 3.1 scaling as Megatron hard-codes it next to ``--rope-scaling-factor``.
_MEGATRON_LLAMA3_SCALING = {
    "rope_type": "llama3",
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


class MegatronArgsError(TprimatError):
    """A config or model that Megatron-LM's flags cannot express."""


def parse_version(text: str) -> tuple[int, int]:
    """``"0.15"``, ``"core_v0.15.0"``, ``"0.19.0rc1"`` → ``(0, 15)``."""
    match = re.search(r"(\d+)\.(\d+)", text)
    if not match:
        raise MegatronArgsError(f"cannot read a Megatron-core version from {text!r}")
    return int(match.group(1)), int(match.group(2))


def detect_version(megatron_path: str | os.PathLike[str] | None) -> tuple[int, int] | None:
    """The Megatron-core version of a checkout, read from ``megatron/core/package_info.py``."""
    if not megatron_path:
        return None
    info = Path(megatron_path) / "megatron" / "core" / "package_info.py"
    try:
        text = info.read_text(encoding="utf-8")
    except OSError:
        return None
    major = re.search(r"^MAJOR\s*=\s*(\d+)", text, re.M)
    minor = re.search(r"^MINOR\s*=\s*(\d+)", text, re.M)
    if not (major and minor):
        return None
    return int(major.group(1)), int(minor.group(1))


def null_tokenizer_vocab_arg(vocab_size: int, version: tuple[int, int]) -> int:
    """The ``--vocab-size`` that gives a NullTokenizer of exactly ``vocab_size`` tokens."""
    return vocab_size - 1 if version < (0, 18) else vocab_size


@attrs.frozen(kw_only=True)
class MegatronArgs:
    """The argument list and what it implies, for the dry run and the result."""

    args: tuple[str, ...]
    version: tuple[int, int]
    padded_vocab_size: int
    notes: tuple[str, ...] = ()


def _num(value: float) -> str:
    """A number as Megatron's argparse reads it, without float noise (3e-05, 0.95, 500000)."""
    if float(value).is_integer() and abs(value) >= 1:
        return str(int(value))
    return repr(float(value))


def architecture_args(model: ModelSpec) -> list[str]:
    """The model's architecture as Megatron flags (everything that shapes the FLOPs)."""
    args = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--ffn-hidden-size", str(model.ffn_hidden_size),
        "--num-attention-heads", str(model.num_attention_heads),
        "--kv-channels", str(model.kv_channels),
    ]
    if model.num_query_groups != model.num_attention_heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.num_query_groups)]
    if model.swiglu:
        args.append("--swiglu")
    args += [
        "--normalization", "RMSNorm",
        "--norm-epsilon", _num(model.rms_norm_eps),
        "--position-embedding-type", "rope",
        "--rotary-base", _num(model.rope_theta),
        "--max-position-embeddings", str(model.max_position_embeddings),
    ]
    if model.rope_scaling:
        scaling = dict(model.rope_scaling)
        factor = scaling.pop("factor", None)
        if factor is None or scaling != _MEGATRON_LLAMA3_SCALING:
            raise MegatronArgsError(
                f"{model.name}: rope scaling {model.rope_scaling} is not Llama 3.1 scaling, "
                "the only kind Megatron-LM's --use-rope-scaling applies"
            )
        args += ["--use-rope-scaling", "--rope-scaling-factor", _num(factor)]
    if not model.tie_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    args.append("--disable-bias-linear")
    if model.qkv_bias:
        args.append("--add-qkv-bias")
    # Llama and Qwen train without dropout; Megatron's default is 0.1 (extra kernels).
    args += ["--hidden-dropout", "0", "--attention-dropout", "0"]
    return args


def parallel_args(config: BenchmarkConfig) -> list[str]:
    p = config.parallel
    args = [
        "--tensor-model-parallel-size", str(p.tensor),
        "--pipeline-model-parallel-size", str(p.pipeline),
        "--context-parallel-size", str(p.context),
    ]
    # Megatron turns sequence parallelism off (with a warning) at TP 1: say it only when it acts.
    if p.sequence_parallel and p.tensor > 1:
        args.append("--sequence-parallel")
    if p.distributed_optimizer:
        args.append("--use-distributed-optimizer")
    if p.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if p.overlap_param_gather:
        if not p.distributed_optimizer:
            raise MegatronArgsError(
                "parallel.overlap_param_gather needs parallel.distributed_optimizer = true "
                "in Megatron-LM"
            )
        args.append("--overlap-param-gather")
    return args


def training_args(config: BenchmarkConfig) -> list[str]:
    t, b = config.training, config.benchmark
    decay = t.lr_decay_iterations or b.iterations
    args = [
        "--micro-batch-size", str(t.micro_batch_size),
        "--global-batch-size", str(t.global_batch_size),
        "--seq-length", str(t.seq_length),
        "--train-iters", str(b.iterations),
        "--seed", str(b.seed),
        "--optimizer", "adam",
        "--lr", _num(t.lr),
        "--min-lr", _num(t.min_lr),
        "--lr-warmup-iters", str(t.lr_warmup_iterations),
        "--lr-decay-style", t.lr_decay_style,
        "--lr-decay-iters", str(decay),
        "--weight-decay", _num(t.weight_decay),
        "--adam-beta1", _num(t.adam_beta1),
        "--adam-beta2", _num(t.adam_beta2),
        "--adam-eps", _num(t.adam_eps),
        "--clip-grad", _num(t.clip_grad),
        "--init-method-std", _num(t.init_method_std),
    ]
    if t.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif t.recompute == "full":
        args += [
            "--recompute-granularity", "full",
            "--recompute-method", "uniform",
            "--recompute-num-layers", "1",
        ]
    return args


def precision_args(config: BenchmarkConfig) -> list[str]:
    p = config.precision
    if p.dtype == "fp32":
        return []  # Megatron trains in fp32 when neither --bf16 nor --fp16 is given
    args = ["--bf16"]
    if p.dtype == "fp8":
        # Delayed scaling with a 1024-step amax history and "max": what Primus's trainer
        # defaults and NeMo's bf16_with_fp8_mixed use, so all backends run the same recipe.
        args += [
            "--fp8-format", p.fp8_recipe,
            "--fp8-recipe", "delayed",
            "--fp8-amax-history-len", "1024",
            "--fp8-amax-compute-algo", "max",
        ]
    return args


def kernel_args(config: BenchmarkConfig) -> list[str]:
    k = config.kernels
    args = ["--attention-backend", k.attention_backend]
    if not k.fused_rope:
        args.append("--no-rope-fusion")
    if not k.fused_swiglu:
        args.append("--no-bias-swiglu-fusion")
    if k.fused_cross_entropy:
        args.append("--cross-entropy-loss-fusion")
    return args


def logging_args() -> list[str]:
    """Every iteration logged with throughput; no evaluation, no checkpoints."""
    return ["--log-interval", "1", "--log-throughput", "--eval-iters", "0"]


def data_args(
    model: ModelSpec, version: tuple[int, int], data: DataArguments | None
) -> list[str]:
    if data is not None:
        return list(data.args)
    return [
        "--mock-data",
        "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(null_tokenizer_vocab_arg(model.vocab_size, version)),
    ]


def build_megatron_args(
    config: BenchmarkConfig,
    model: ModelSpec,
    *,
    version: tuple[int, int] = DEFAULT_VERSION,
    data: DataArguments | None = None,
    extra: Sequence[str] = (),
) -> MegatronArgs:
    """All ``pretrain_gpt.py`` arguments for one run (``extra`` appended last)."""
    # A prepared dataset brings its own divisor (see tprimat.plugins._megatron.data).
    has_divisor = data is not None and "--make-vocab-size-divisible-by" in data.args
    divisor = [] if has_divisor else ["--make-vocab-size-divisible-by", str(VOCAB_DIVISIBLE_BY)]
    args = [
        *architecture_args(model),
        *parallel_args(config),
        *training_args(config),
        *precision_args(config),
        *kernel_args(config),
        *divisor,
        *data_args(model, version, data),
        *logging_args(),
        *extra,
    ]
    notes = []
    if config.parallel.sequence_parallel and config.parallel.tensor == 1:
        notes.append("parallel.sequence_parallel has no effect with tensor parallel size 1")
    return MegatronArgs(
        args=tuple(args),
        version=version,
        padded_vocab_size=model.padded_vocab_size(config.parallel.tensor, VOCAB_DIVISIBLE_BY),
        notes=tuple(notes),
    )


def flags(args: Iterable[str]) -> list[str]:
    """The ``--flag`` words of an argument list (values dropped)."""
    return [a for a in args if a.startswith("--") and not _is_number(a)]


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
