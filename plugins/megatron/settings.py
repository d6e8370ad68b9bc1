"""The one Megatron settings model: a benchmark config as Megatron-LM's own argument destinations.

Primus, ROCm Megatron-LM and upstream Megatron-LM all train with Megatron-LM's
argument namespace: ``pretrain_gpt.py`` fills it from flags, Primus from
the ``overrides`` of its experiment YAML, whose keys are the same argparse
destinations (``micro_batch_size``, ``fp8`` for ``--fp8-format``,
``apply_rope_fusion`` for ``--no-rope-fusion``).  So tprimat builds the
settings once, as ``{dest: value}``, checks them once
(:func:`validate`), and renders them two ways: :func:`to_argv` and
:func:`to_overrides`.  :func:`from_argv` reads an argument list back into
destinations, the way Megatron's parser would.

Two Megatron facts drive the details:

* The mock-data tokenizer (``NullTokenizer``) decides the embedding size, and
  the embedding/output layer is part of the FLOPs.  Up to Megatron-core 0.17
  its vocabulary is ``vocab_size`` + 1 (an extra EOD token); from 0.18 on it is
  exactly ``vocab_size``.  We pass whatever makes the tokenizer's vocabulary
  equal the model's, and Megatron pads it to a multiple of
  ``make_vocab_size_divisible_by`` × TP, exactly as
  :meth:`tprimat.settings.models.ModelSpec.padded_vocab_size` computes.
* ``--use-rope-scaling`` applies Llama 3.1's scaling with fixed low/high
  frequency factors (1, 4) and original context (8192); only the factor is a
  setting.  A model whose scaling differs cannot be expressed and is refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from tprimat.contract import BenchmarkConfig, ModelSpec
from tprimat.contract.plans import DataArguments
from tprimat.errors import TprimatError
from tprimat.plugins.megatron.owned import OWNER, RENDERED_AS_IS

#: Megatron-core version assumed when none can be read from a checkout.
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


class MegatronSettingsError(TprimatError):
    """A config, model or preset that Megatron-LM's arguments cannot express."""


#: How argparse stores an argument (see :class:`Arg`).
Action = Literal["value", "list", "store_true", "store_false"]


@attrs.frozen(kw_only=True)
class Arg:
    """One Megatron-LM argument: its destination, its flag, and how argparse stores it.

    ``action``: ``value`` (one value), ``list`` (``nargs``), ``store_true`` (the
    flag sets True), ``store_false`` (the flag sets False, e.g. ``--no-rope-fusion``
    for ``apply_rope_fusion``).  ``since``: the first Megatron-core version that
    accepts the flag (None: every version tprimat targets).
    """

    dest: str
    flag: str
    action: Action = "value"
    since: tuple[int, int] | None = None


def _args(*specs: tuple[str, Action] | tuple[str, Action, str]) -> dict[str, Arg]:
    """The table from ``(dest, action)`` (flag derived from the name) or ``(dest, action, flag)``."""
    table: dict[str, Arg] = {}
    for spec in specs:
        flag = spec[2] if len(spec) == 3 else "--" + spec[0].replace("_", "-")
        table[spec[0]] = Arg(dest=spec[0], flag=flag, action=spec[1])
    return table


_V: Action = "value"
_L: Action = "list"
_T: Action = "store_true"
_F: Action = "store_false"

#: Every Megatron-LM argument tprimat sets, by destination (tests check each flag against the
#: flags Megatron-LM's parser accepts in every targeted release, and each destination
#: against Primus's module configs).
ARGS: dict[str, Arg] = _args(
    # architecture
    ("num_layers", _V),
    ("hidden_size", _V),
    ("ffn_hidden_size", _V),
    ("num_attention_heads", _V),
    ("kv_channels", _V),
    ("group_query_attention", _T),
    ("num_query_groups", _V),
    ("swiglu", _T),
    ("normalization", _V),
    ("norm_epsilon", _V),
    ("position_embedding_type", _V),
    ("rotary_base", _V),
    ("use_rope_scaling", _T),
    ("rope_scaling_factor", _V),
    ("max_position_embeddings", _V),
    ("untie_embeddings_and_output_weights", _T),
    ("add_bias_linear", _F, "--disable-bias-linear"),
    ("add_qkv_bias", _T),
    ("hidden_dropout", _V),
    ("attention_dropout", _V),
    # parallelism
    ("tensor_model_parallel_size", _V),
    ("pipeline_model_parallel_size", _V),
    ("context_parallel_size", _V),
    ("sequence_parallel", _T),
    ("use_distributed_optimizer", _T),
    ("overlap_grad_reduce", _T),
    ("overlap_param_gather", _T),
    # training
    ("micro_batch_size", _V),
    ("global_batch_size", _V),
    ("seq_length", _V),
    ("train_iters", _V),
    ("seed", _V),
    ("optimizer", _V),
    ("lr", _V),
    ("min_lr", _V),
    ("lr_warmup_iters", _V),
    ("lr_decay_style", _V),
    ("lr_decay_iters", _V),
    ("weight_decay", _V),
    ("adam_beta1", _V),
    ("adam_beta2", _V),
    ("adam_eps", _V),
    ("clip_grad", _V),
    ("init_method_std", _V),
    ("recompute_granularity", _V),
    ("recompute_method", _V),
    ("recompute_num_layers", _V),
    ("eod_mask_loss", _T),
    ("gradient_accumulation_fusion", _F, "--no-gradient-accumulation-fusion"),
    # precision
    ("bf16", _T),
    ("fp8", _V, "--fp8-format"),
    ("fp8_recipe", _V),
    ("fp8_amax_history_len", _V),
    ("fp8_amax_compute_algo", _V),
    # kernels
    ("attention_backend", _V),
    ("apply_rope_fusion", _F, "--no-rope-fusion"),
    ("bias_swiglu_fusion", _F, "--no-bias-swiglu-fusion"),
    ("cross_entropy_loss_fusion", _T),
    ("cross_entropy_fusion_impl", _V),
    # vocabulary and data
    ("make_vocab_size_divisible_by", _V),
    ("mock_data", _T),
    ("data_path", _L),
    ("split", _V),
    ("train_data_path", _L),
    ("valid_data_path", _L),
    ("test_data_path", _L),
    ("tokenizer_type", _V),
    ("tokenizer_model", _V),
    ("vocab_size", _V),
    # logging, evaluation, checkpoints
    ("log_interval", _V),
    ("log_throughput", _T),
    ("eval_interval", _V),
    ("eval_iters", _V),
    ("save", _V),
    ("load", _V),
    ("finetune", _T),
    # profiling
    ("profile", _T),
    ("use_pytorch_profiler", _T),
    ("profile_step_start", _V),
    ("profile_step_end", _V),
    ("profile_ranks", _L),
    ("tensorboard_dir", _V),
    # allocator snapshots (tprimat run --memory-snapshot)
    ("record_memory_history", _T),
    ("memory_snapshot_path", _V),
)

#: The config field each destination renders unchanged (the rest are derived or fixed; see
#: :func:`build_settings`).  Tests read a rendered command back through this map.
FROM_CONFIG: dict[str, str] = {dest: OWNER[dest] for dest in RENDERED_AS_IS}

_RECOMPUTE: dict[str, dict[str, Any]] = {
    "none": {"recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None},
    "selective": {"recompute_granularity": "selective", "recompute_method": None, "recompute_num_layers": None},
    "full": {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1},
}


# -- versions ------------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, int]:
    """``"0.15"``, ``"core_v0.15.0"``, ``"0.19.0rc1"`` → ``(0, 15)``."""
    match = re.search(r"(\d+)\.(\d+)", text)
    if not match:
        raise MegatronSettingsError(f"cannot read a Megatron-core version from {text!r}")
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


def null_tokenizer_vocab_size(vocab_size: int, version: tuple[int, int]) -> int:
    """The ``vocab_size`` that gives a NullTokenizer of exactly ``vocab_size`` tokens."""
    return vocab_size - 1 if version < (0, 18) else vocab_size


# -- the model -----------------------------------------------------------------------------


def _number(value: float) -> int | float:
    """Integral floats as ints (``rotary_base`` 500000), others unchanged."""
    return int(value) if float(value).is_integer() and abs(value) >= 1 else float(value)


def architecture(model: ModelSpec) -> dict[str, Any]:
    """The model's architecture (everything that shapes the FLOPs)."""
    gqa = model.num_query_groups != model.num_attention_heads
    settings: dict[str, Any] = {
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "kv_channels": model.kv_channels,
        "group_query_attention": gqa,
        "num_query_groups": model.num_query_groups if gqa else None,
        "swiglu": model.swiglu,
        "normalization": "RMSNorm",
        "norm_epsilon": model.rms_norm_eps,
        "position_embedding_type": "rope",
        "rotary_base": _number(model.rope_theta),
        "use_rope_scaling": bool(model.rope_scaling),
        "max_position_embeddings": model.max_position_embeddings,
        "untie_embeddings_and_output_weights": not model.tie_embeddings,
        "add_bias_linear": False,
        "add_qkv_bias": model.qkv_bias,
        # Llama and Qwen train without dropout; Megatron's default is 0.1 (extra kernels).
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }
    if model.rope_scaling:
        scaling = dict(model.rope_scaling)
        factor = scaling.pop("factor", None)
        if factor is None or scaling != _MEGATRON_LLAMA3_SCALING:
            raise MegatronSettingsError(
                f"{model.name}: rope scaling {model.rope_scaling} is not Llama 3.1 scaling, "
                "the only kind Megatron-LM's --use-rope-scaling applies"
            )
        # after use_rope_scaling, as Megatron's own listing orders them
        at = list(settings).index("use_rope_scaling") + 1
        items = list(settings.items())
        settings = dict([*items[:at], ("rope_scaling_factor", float(factor)), *items[at:]])
    return settings


def training(config: BenchmarkConfig) -> dict[str, Any]:
    """Parallel layout, schedule, optimizer, precision and kernels."""
    t, b, p, k = config.training, config.benchmark, config.parallel, config.kernels
    settings: dict[str, Any] = {
        "tensor_model_parallel_size": p.tensor,
        "pipeline_model_parallel_size": p.pipeline,
        "context_parallel_size": p.context,
        # Megatron turns sequence parallelism off (with a warning) at TP 1: say it only when it acts.
        "sequence_parallel": p.sequence_parallel and p.tensor > 1,
        "use_distributed_optimizer": p.distributed_optimizer,
        "overlap_grad_reduce": p.overlap_grad_reduce,
        "overlap_param_gather": p.overlap_param_gather,
        "micro_batch_size": t.micro_batch_size,
        "global_batch_size": t.global_batch_size,
        "seq_length": t.seq_length,
        "train_iters": b.iterations,
        "seed": b.seed,
        "optimizer": "adam",
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
        **_RECOMPUTE[t.recompute],
        # Every backend computes the loss on every token (Megatron-LM's default; Primus's
        # experiments turn masking at document boundaries on, which changes the loss).
        "eod_mask_loss": False,
        # Megatron trains in fp32 when bf16 is off.
        "bf16": config.precision.dtype != "fp32",
        "fp8": None,
    }
    if config.precision.dtype == "fp8":
        # Delayed scaling with a 1024-step amax history and "max": what Primus's trainer
        # defaults and NeMo's bf16_with_fp8_mixed use, so all backends run the same recipe.
        settings.update(
            fp8=config.precision.fp8_recipe,
            fp8_recipe="delayed",
            fp8_amax_history_len=1024,
            fp8_amax_compute_algo="max",
        )
    settings.update(
        attention_backend=k.attention_backend,
        apply_rope_fusion=k.fused_rope,
        bias_swiglu_fusion=k.fused_swiglu,
        cross_entropy_loss_fusion=k.fused_cross_entropy,
        cross_entropy_fusion_impl="native",
    )
    return settings


def mock_data(model: ModelSpec, version: tuple[int, int]) -> dict[str, Any]:
    """Synthetic tokens with a tokenizer of the model's real vocabulary (no hub download).

    ``data_path`` and ``split`` stay at the framework's defaults (no dataset to split).
    """
    return {
        "mock_data": True,
        "train_data_path": None,
        "valid_data_path": None,
        "test_data_path": None,
        "tokenizer_type": "NullTokenizer",
        "tokenizer_model": None,
        "vocab_size": null_tokenizer_vocab_size(model.vocab_size, version),
    }


#: Every iteration logged with throughput; no checkpoints (evaluation: :func:`evaluation`).
LOGGING: dict[str, Any] = {
    "log_interval": 1,
    "log_throughput": True,
    "save": None,
    "load": None,
    "finetune": False,
}


def evaluation(config: BenchmarkConfig) -> dict[str, Any]:
    """Evaluation on the held-out split: none for throughput runs.

    A convergence run evaluates every ``convergence.eval_interval_samples`` training samples
    on ``convergence.eval_sequences`` held-out sequences.  Megatron-LM counts both in
    iterations of one global batch (``--eval-interval``, ``--eval-iters``), so they are
    rounded up to whole global batches; the run's ``validation loss at iteration N`` lines
    then become its evaluation records.
    """
    c = config.convergence
    if not c.enabled:
        return {"eval_iters": 0}
    gbs = config.training.global_batch_size
    return {"eval_interval": -(-c.eval_interval_samples // gbs), "eval_iters": -(-c.eval_sequences // gbs)}


#: Where the family's launches have Megatron write its allocator snapshot (the last rank dumps it).
SNAPSHOT_FILE = "memory/snapshot.pickle"


def memory_snapshot(run_dir: Any) -> dict[str, Any]:
    """``--record-memory-history --memory-snapshot-path <run>/memory/snapshot.pickle``."""
    return {"record_memory_history": True, "memory_snapshot_path": str(Path(run_dir) / SNAPSHOT_FILE)}


def build_settings(
    config: BenchmarkConfig,
    model: ModelSpec,
    *,
    version: tuple[int, int] = DEFAULT_VERSION,
    data: DataArguments | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every Megatron setting of one run as ``{dest: value}``, validated.

    ``data`` is the ``prepare_data`` answer (its ``overrides`` are destinations; None:
    mock data); ``extra`` (profiling, a ``tuned`` preset's destinations) is applied last.
    ``None`` means "unset": no flag, and ``null`` in a Primus experiment (which pins it
    over the base experiment); a destination left out keeps the framework's default.
    """
    settings = {
        **architecture(model),
        **training(config),
        "make_vocab_size_divisible_by": VOCAB_DIVISIBLE_BY,
        **mock_data(model, version),
        **LOGGING,
        **evaluation(config),
    }
    if data is not None:
        settings.update(data.overrides)
    settings.update(extra or {})
    validate(settings, version)
    return settings


def validate(settings: Mapping[str, Any], version: tuple[int, int]) -> None:
    """Refuse what Megatron-LM would refuse or silently change."""
    unknown = sorted(set(settings) - set(ARGS))
    if unknown:
        raise MegatronSettingsError(
            f"not Megatron-LM arguments tprimat knows: {', '.join(unknown)} "
            "(a tuned preset's Megatron keys must be argument destinations, e.g. micro_batch_size)"
        )
    too_new = sorted(
        arg.flag
        for arg, value in ((ARGS[dest], value) for dest, value in settings.items())
        if arg.since is not None and version < arg.since and value not in (None, False)
    )
    if too_new:
        raise MegatronSettingsError(
            f"Megatron-core {version[0]}.{version[1]} has no {', '.join(too_new)}; "
            "use a newer Megatron-LM or leave these settings out"
        )
    if settings.get("overlap_param_gather") and not settings.get("use_distributed_optimizer"):
        raise MegatronSettingsError(
            "parallel.overlap_param_gather needs parallel.distributed_optimizer = true in Megatron-LM"
        )


def padded_vocab_size(config: BenchmarkConfig, model: ModelSpec) -> int:
    return model.padded_vocab_size(config.parallel.tensor, VOCAB_DIVISIBLE_BY)


# -- the two renderings, and reading one back -----------------------------------------------


def _word(value: Any) -> str:
    """A value as Megatron's argparse reads it, without float noise (3e-05, 0.95, 500000)."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) >= 1 else repr(value)
    return str(value)


def to_argv(settings: Mapping[str, Any]) -> list[str]:
    """``pretrain_gpt.py`` arguments: unset values and switches at their default give no flag."""
    argv: list[str] = []
    for dest, value in settings.items():
        arg = ARGS[dest]
        if arg.action == "store_true":
            argv += [arg.flag] if value else []
        elif arg.action == "store_false":
            argv += [arg.flag] if value is False else []
        elif value is None:
            continue
        elif arg.action == "list":
            argv += [arg.flag, *(_word(v) for v in (value if isinstance(value, list | tuple) else [value]))]
        else:
            argv += [arg.flag, _word(value)]
    return argv


#: Destinations a Megatron-core release moved: (tprimat's name, the new destination, first version).
#: From core 0.16 ``--norm-epsilon`` stores into TransformerConfig's ``layernorm_epsilon``; a
#: Primus override still named ``norm_epsilon`` is then ignored and the model gets the default.
MOVED: tuple[tuple[str, str, tuple[int, int]], ...] = (("norm_epsilon", "layernorm_epsilon", (0, 16)),)


def destination(dest: str, version: tuple[int, int]) -> str:
    """Where Megatron-core ``version`` stores the argument tprimat calls ``dest``."""
    for old, new, since in MOVED:
        if dest == old and version >= since:
            return new
    return dest


def to_overrides(settings: Mapping[str, Any], version: tuple[int, int] = DEFAULT_VERSION) -> dict[str, Any]:
    """Primus experiment ``overrides``: the destinations of ``version`` themselves (``None`` pins "unset")."""
    return {
        destination(dest, version): list(value) if isinstance(value, tuple) else value
        for dest, value in settings.items()
    }


_BY_FLAG = {arg.flag: arg for arg in ARGS.values()}


def from_argv(argv: Sequence[str]) -> dict[str, Any]:
    """Megatron destinations read back from an argument list (strings, as argparse sees them).

    Switches become booleans; every destination in :data:`ARGS` that the list does
    not set gets argparse's default for its action (False, True, or None).  Words
    before the first known flag (torchrun, the script) are skipped; an unknown flag
    is an error, as in Megatron's parser.
    """
    out: dict[str, Any] = {}
    words = list(argv)
    i = 0
    while i < len(words) and words[i] not in _BY_FLAG:
        i += 1
    while i < len(words):
        arg = _BY_FLAG.get(words[i])
        if arg is None:
            raise MegatronSettingsError(f"unknown Megatron-LM flag {words[i]!r}")
        values: list[str] = []
        i += 1
        while i < len(words) and not (words[i].startswith("--") and words[i] in _BY_FLAG):
            values.append(words[i])
            i += 1
        if arg.action in ("store_true", "store_false"):
            out[arg.dest] = arg.action == "store_true"
        elif arg.action == "list":
            out[arg.dest] = values
        else:
            out[arg.dest] = values[0] if values else None
    for arg in ARGS.values():
        out.setdefault(arg.dest, {"store_true": False, "store_false": True}.get(arg.action))
    return out


def flags(argv: Iterable[str]) -> list[str]:
    """The ``--flag`` words of an argument list (values dropped)."""
    return [word for word in argv if word.startswith("--") and not _is_number(word)]


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
