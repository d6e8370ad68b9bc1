"""The one Megatron settings model: architecture, semantics, flags that really exist, and its renderings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.contract.plans import PreparedDataset
from tprimat.plugins.megatron.data import data_arguments, vocab_divisor
from tprimat.plugins.megatron.settings import (
    ARGS,
    MegatronSettingsError,
    build_settings,
    detect_version,
    flags,
    from_argv,
    null_tokenizer_vocab_size,
    padded_vocab_size,
    parse_version,
    to_argv,
    to_overrides,
)
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "megatron_args"
TARGETS = {
    (0, 12): "core_v0.12.0.txt",
    (0, 15): "core_v0.15.0.txt",
    (0, 19): "core_v0.19.0.txt",
    (0, 20): "main_2026-08-22.txt",
}

CONFIG_VARIANTS = [
    [],
    [
        'precision.dtype="fp8"',
        'training.recompute="full"',
        "parallel.tensor=2",
        "parallel.sequence_parallel=true",
        "kernels.fused_rope=false",
        "kernels.fused_swiglu=false",
    ],
    [
        'training.recompute="selective"',
        "parallel.pipeline=2",
        "parallel.context=2",
        'precision.dtype="fp32"',
        'training.lr_decay_style="constant"',
    ],
]


def argv_of(config, model, **kw) -> list[str]:
    return to_argv(build_settings(config, model, **kw))


def accepted(version: tuple[int, int]) -> set[str]:
    return set((FIXTURES / TARGETS[version]).read_text().split())


def as_dict(args) -> dict[str, str | None]:
    """Flag -> value (None for switches); a repeated flag keeps its last value, like argparse."""
    out: dict[str, str | None] = {}
    words = list(args)
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[word] = None if nxt is None or nxt.startswith("--") else nxt
    return out


@pytest.mark.parametrize("version", sorted(TARGETS))
@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("overrides", CONFIG_VARIANTS)
def test_every_flag_exists_in_the_targeted_megatron(version, model, overrides):
    config = load_config(None, [f'benchmark.model="{model}"', *overrides])
    unknown = sorted(set(flags(argv_of(config, get_model(model), version=version))) - accepted(version))
    assert unknown == []


def test_a_flag_megatron_does_not_know_is_caught():
    # The check itself can fail: a removed flag is reported against newer releases.
    assert "--no-async-tensor-model-parallel-allreduce" in accepted((0, 12))
    assert "--no-async-tensor-model-parallel-allreduce" not in accepted((0, 19))


def test_llama_architecture_is_complete():
    config = load_config(None, [])
    args = as_dict(argv_of(config, get_model("llama3.1-8b")))
    assert args["--num-layers"] == "32"
    assert args["--hidden-size"] == "4096"
    assert args["--ffn-hidden-size"] == "14336"
    assert args["--num-attention-heads"] == "32"
    assert args["--num-query-groups"] == "8" and "--group-query-attention" in args
    assert args["--kv-channels"] == "128"
    assert "--swiglu" in args and args["--normalization"] == "RMSNorm"
    assert args["--norm-epsilon"] == "1e-05"
    assert args["--position-embedding-type"] == "rope" and args["--rotary-base"] == "500000"
    assert "--use-rope-scaling" in args and args["--rope-scaling-factor"] == "8"
    assert "--untie-embeddings-and-output-weights" in args and "--disable-bias-linear" in args
    assert "--add-qkv-bias" not in args
    assert args["--hidden-dropout"] == "0.0" and args["--attention-dropout"] == "0.0"
    assert args["--log-interval"] == "1" and "--log-throughput" in args
    assert args["--eval-iters"] == "0"


def test_qwen_architecture_has_qkv_bias_and_no_rope_scaling():
    config = load_config(None, ['benchmark.model="qwen2.5-7b"'])
    args = as_dict(argv_of(config, get_model("qwen2.5-7b")))
    assert "--add-qkv-bias" in args
    assert args["--num-query-groups"] == "4"
    assert args["--rotary-base"] == "1000000"
    assert args["--norm-epsilon"] == "1e-06"
    assert "--use-rope-scaling" not in args
    assert padded_vocab_size(config, get_model("qwen2.5-7b")) == 152064


@pytest.mark.parametrize(("version", "expected"), [((0, 15), 128255), ((0, 17), 128255), ((0, 18), 128256)])
def test_mock_tokenizer_vocabulary_equals_the_models(version, expected):
    # Up to core 0.17 the NullTokenizer adds an EOD token to --vocab-size; from 0.18 it does not.
    assert null_tokenizer_vocab_size(128256, version) == expected
    config = load_config(None, [])
    args = as_dict(argv_of(config, get_model("llama3.1-8b"), version=version))
    assert args["--tokenizer-type"] == "NullTokenizer" and "--mock-data" in args
    assert args["--vocab-size"] == str(expected)


def test_config_fields_land():
    config = load_config(
        None,
        [
            "training.micro_batch_size=2",
            "training.global_batch_size=64",
            "training.seq_length=4096",
            "benchmark.iterations=30",
            "benchmark.seed=7",
            "training.lr=1e-4",
            "training.min_lr=1e-5",
            "training.lr_warmup_iterations=3",
            'training.lr_decay_style="linear"',
            "training.weight_decay=0.05",
            "training.adam_beta2=0.98",
            "training.adam_eps=1e-6",
            "training.clip_grad=0.5",
            "training.init_method_std=0.008",
            "parallel.tensor=2",
            "parallel.sequence_parallel=true",
            'precision.dtype="fp8"',
            'kernels.attention_backend="fused"',
            "parallel.overlap_param_gather=false",
        ],
    )
    args = as_dict(argv_of(config, get_model("llama3.1-8b")))
    assert args["--micro-batch-size"] == "2" and args["--global-batch-size"] == "64"
    assert args["--seq-length"] == "4096" and args["--train-iters"] == "30"
    assert args["--seed"] == "7" and args["--lr"] == "0.0001" and args["--min-lr"] == "1e-05"
    assert args["--lr-warmup-iters"] == "3" and args["--lr-decay-style"] == "linear"
    assert args["--lr-decay-iters"] == "30"  # 0 in the config: decay over the whole run
    assert args["--weight-decay"] == "0.05" and args["--adam-beta2"] == "0.98"
    assert args["--adam-eps"] == "1e-06" and args["--clip-grad"] == "0.5"
    assert args["--init-method-std"] == "0.008"
    assert args["--tensor-model-parallel-size"] == "2" and "--sequence-parallel" in args
    assert "--bf16" in args and args["--fp8-format"] == "hybrid"
    assert args["--fp8-recipe"] == "delayed"
    assert args["--attention-backend"] == "fused"
    assert "--use-distributed-optimizer" in args and "--overlap-grad-reduce" in args
    assert "--overlap-param-gather" not in args


def test_overlap_param_gather_needs_the_distributed_optimizer():
    config = load_config(None, ["parallel.distributed_optimizer=false"])
    with pytest.raises(MegatronSettingsError, match="distributed_optimizer"):
        build_settings(config, get_model("llama3.1-8b"))


def test_non_llama3_rope_scaling_is_refused():
    import attrs

    odd = attrs.evolve(get_model("llama3.1-8b"), rope_scaling={"rope_type": "yarn", "factor": 4.0})
    with pytest.raises(MegatronSettingsError, match="Llama 3.1 scaling"):
        build_settings(load_config(None, []), odd)


def test_version_reading(tmp_path):
    assert parse_version("core_v0.15.0") == (0, 15)
    assert parse_version("0.19.0rc1") == (0, 19)
    info = tmp_path / "megatron" / "core"
    info.mkdir(parents=True)
    (info / "package_info.py").write_text("MAJOR = 0\nMINOR = 13\nPATCH = 1\n")
    assert detect_version(tmp_path) == (0, 13)
    assert detect_version(tmp_path / "nowhere") is None


def test_prepared_data_uses_the_dataset_tokenizer_and_keeps_the_model_vocab(tmp_path):
    dataset = PreparedDataset(
        path_prefix=tmp_path / "qwen_text_document",
        tokenizer=str(tmp_path / "tok"),
        fingerprint="sha256:x",
        documents=10,
        tokens=1000,
        vocab_size=151665,
    )
    config = load_config(None, ['benchmark.model="qwen2.5-7b"'])
    data = data_arguments(dataset, config)
    args = as_dict(argv_of(config, get_model("qwen2.5-7b"), data=data))
    assert args["--data-path"] == str(tmp_path / "qwen_text_document")
    assert args["--split"] == "100,0,0"
    assert args["--tokenizer-type"] == "HuggingFaceTokenizer"
    assert args["--tokenizer-model"] == str(tmp_path / "tok")
    # 151665 tokens padded to 152064, the model's embedding
    assert args["--make-vocab-size-divisible-by"] == "512"
    assert "--mock-data" not in args and "--vocab-size" not in args
    argv = argv_of(config, get_model("qwen2.5-7b"), data=data)
    assert argv.count("--make-vocab-size-divisible-by") == 1
    assert not set(flags(argv)) - accepted((0, 15))


@pytest.mark.parametrize(
    ("tok", "model", "tp", "padded"),
    [
        (151665, 152064, 1, 152064),
        (128256, 128256, 1, 128256),
        (128256, 128256, 4, 128512),
        (151665, 152064, 8, 152576),
        (4000, 4096, 1, 4096),
    ],
)
def test_vocab_divisor_pads_like_a_mock_run(tok, model, tp, padded):
    step = vocab_divisor(tok, model, tp) * tp
    assert -(-tok // step) * step == padded


def test_a_tokenizer_larger_than_the_model_is_refused():
    from tprimat.errors import TprimatError

    with pytest.raises(TprimatError, match="another model"):
        vocab_divisor(200000, 152064, 1)


def test_every_argument_exists_in_each_targeted_megatron():
    for version in TARGETS:
        missing = sorted(
            a.flag for a in ARGS.values() if (a.since is None or version >= a.since) and a.flag not in accepted(version)
        )
        assert missing == [], (version, missing)


@pytest.mark.parametrize("overrides", CONFIG_VARIANTS)
def test_flags_read_back_into_the_settings(overrides):
    """Rendering as flags and parsing them as Megatron would gives back every setting."""
    config = load_config(None, list(overrides))
    settings = build_settings(config, get_model("llama3.1-8b"))
    back = from_argv(to_argv(settings))
    for dest, value in settings.items():
        parsed = back[dest]
        if value is None or isinstance(value, bool):
            assert parsed == value, dest
        elif isinstance(value, list):
            assert parsed == [str(v) for v in value], dest
        else:
            assert type(value)(parsed) == value, dest


def test_overrides_are_the_destinations_themselves():
    config = load_config(None, ['precision.dtype="fp8"', "kernels.fused_rope=false"])
    settings = build_settings(config, get_model("llama3.1-8b"))
    overrides = to_overrides(settings)
    assert overrides == settings
    assert overrides["fp8"] == "hybrid" and overrides["apply_rope_fusion"] is False
    assert overrides["add_bias_linear"] is False and overrides["recompute_granularity"] is None


def test_a_switch_at_its_default_gives_no_flag_and_a_store_false_switch_gives_its_flag():
    assert to_argv({"apply_rope_fusion": True, "sequence_parallel": False}) == []
    assert to_argv({"apply_rope_fusion": False, "sequence_parallel": True}) == [
        "--no-rope-fusion",
        "--sequence-parallel",
    ]


def test_an_unknown_destination_is_refused_with_its_name():
    with pytest.raises(MegatronSettingsError, match="use_turbo_attention"):
        build_settings(load_config(None, []), get_model("llama3.1-8b"), extra={"use_turbo_attention": True})


def test_a_flag_newer_than_the_target_is_refused(monkeypatch):
    import attrs

    from tprimat.plugins.megatron import settings as module

    newer = attrs.evolve(ARGS["cross_entropy_fusion_impl"], since=(0, 19))
    monkeypatch.setitem(module.ARGS, "cross_entropy_fusion_impl", newer)
    with pytest.raises(MegatronSettingsError, match="0.15 has no --cross-entropy-fusion-impl"):
        build_settings(load_config(None, []), get_model("llama3.1-8b"), version=(0, 15))
    build_settings(load_config(None, []), get_model("llama3.1-8b"), version=(0, 19))


def test_a_convergence_run_evaluates_on_whole_global_batches():
    from tprimat.plugins.megatron.settings import build_settings, to_argv, to_overrides
    from tprimat.settings.config import load_config
    from tprimat.settings.models import get_model

    throughput = load_config(None, ['benchmark.model="llama3.1-8b"'])
    assert build_settings(throughput, get_model("llama3.1-8b"))["eval_iters"] == 0
    config = load_config(
        None,
        [
            'benchmark.model="llama3.1-8b"',
            "convergence.enabled=true",
            "convergence.eval_interval_samples=1000",
            "convergence.eval_sequences=200",
            "training.global_batch_size=128",
        ],
    )
    settings = build_settings(config, get_model("llama3.1-8b"))
    argv = to_argv(settings)
    assert argv[argv.index("--eval-interval") + 1] == "8"  # ceil(1000 / 128)
    assert argv[argv.index("--eval-iters") + 1] == "2"  # ceil(200 / 128)
    assert to_overrides(settings)["eval_interval"] == 8
