"""Under ``iso`` the backends run the same settings: compared plan against plan."""

from __future__ import annotations

import pytest
import yaml

from tests.plugins.test_launch_golden import context_for
from tprimat.contract.registry import Registry
from tprimat.plugins.megatron.owned import FREE
from tprimat.plugins.megatron.settings import ARGS, from_argv


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment({})


def _argv_dict(argv) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    words = list(argv)
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[word] = None if nxt is None or nxt.startswith("--") else nxt
    return out


OVERRIDES = [
    [],
    ['precision.dtype="fp8"', "parallel.tensor=2", "parallel.sequence_parallel=true", 'training.recompute="full"'],
]


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("overrides", OVERRIDES)
def test_amd_and_nvidia_megatron_differ_only_in_what_rocm_needs(registry, tmp_path, model, overrides):
    amd_ctx, amd_rep = context_for("amd_megatron", model, tmp_path / "a", overrides)
    nvd_ctx, nvd_rep = context_for("nvd_megatron", model, tmp_path / "n", overrides)
    amd = registry.launch("amd_megatron", context=amd_ctx)
    nvd = registry.launch("nvd_megatron", context=nvd_ctx)
    strip = {amd_ctx.options["megatron_path"]: "M", nvd_ctx.options["megatron_path"]: "M"}

    def norm(words):
        out = []
        for w in words:
            for old, new in strip.items():
                w = w.replace(old, new)
            out.append(w)
        return out

    assert norm(amd.argv) == norm(nvd.argv)
    extra = {k: v for k, v in amd.env.items() if nvd.env.get(k) != v}
    # ROCm's scratch setting, and the attention variables that replace the ROCm image's own
    # (stock Megatron-LM asserts them against --attention-backend)
    rocm = {"HSA_NO_SCRATCH_RECLAIM", "NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN"}
    assert set(extra) - {"PYTHONPATH"} == rocm
    assert set(nvd.env) - set(amd.env) == set()


def _defaults() -> dict[str, object]:
    """What Megatron's parser gives a destination no flag sets."""
    return {arg.dest: {"store_true": False, "store_false": True}.get(arg.action) for arg in ARGS.values()}


def _same(argv_value, primus_value) -> bool:
    """A command-line word (or list of words) and a YAML value that Megatron reads as the same."""
    if isinstance(primus_value, bool) or primus_value is None or isinstance(argv_value, bool):
        return argv_value == primus_value
    if isinstance(primus_value, list):
        return [str(v) for v in primus_value] == argv_value
    if isinstance(primus_value, str):
        return argv_value == primus_value
    return type(primus_value)(argv_value) == primus_value


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("overrides", [*OVERRIDES, ["kernels.fused_rope=false", "kernels.fused_swiglu=false"]])
def test_primus_gets_the_same_settings_as_megatron(registry, tmp_path, model, overrides):
    """Both renderings of the one settings model, read back as Megatron destinations, agree on every one."""
    mctx, _ = context_for("amd_megatron", model, tmp_path / "m", overrides)
    pctx, _ = context_for("amd_primus", model, tmp_path / "p", overrides)
    argv = list(registry.launch("amd_megatron", context=mctx).argv)
    megatron = from_argv(argv[argv.index(next(a for a in argv if a.endswith("pretrain_gpt.py"))) + 1 :])
    primus_plan = registry.launch("amd_primus", context=pctx)
    # the whole experiment Primus reads: its base experiment merged with tprimat's overrides
    primus = yaml.safe_load(primus_plan.files["primus_experiment.yaml"])["modules"]["pre_trainer"]["overrides"]
    defaults = _defaults()
    # FREE switches are the frameworks' own (Primus's experiments turn gradient-accumulation fusion
    # off): speed only, recorded as kept settings and compared under their shared names.
    differ = {
        dest: (megatron[dest], primus.get(dest, defaults[dest]))
        for dest in ARGS
        if dest not in FREE and not _same(megatron[dest], primus.get(dest, defaults[dest]))
    }
    assert differ == {}


NEMO_PAIRS = {
    "--num-layers": ("architecture", "num_layers"),
    "--hidden-size": ("architecture", "hidden_size"),
    "--ffn-hidden-size": ("architecture", "ffn_hidden_size"),
    "--num-attention-heads": ("architecture", "num_attention_heads"),
    "--num-query-groups": ("architecture", "num_query_groups"),
    "--kv-channels": ("architecture", "kv_channels"),
    "--norm-epsilon": ("architecture", "layernorm_epsilon"),
    "--rotary-base": ("architecture", "rotary_base"),
    "--rope-scaling-factor": ("architecture", "scale_factor"),
    "--micro-batch-size": (None, "micro_batch_size"),
    "--global-batch-size": (None, "global_batch_size"),
    "--seq-length": (None, "seq_length"),
    "--train-iters": (None, "max_steps"),
    "--seed": (None, "seed"),
    "--init-method-std": (None, "init_method_std"),
    "--lr": ("optimizer", "lr"),
    "--min-lr": ("optimizer", "min_lr"),
    "--lr-warmup-iters": ("optimizer", "warmup_steps"),
    "--lr-decay-style": ("optimizer", "decay_style"),
    "--lr-decay-iters": ("optimizer", "decay_steps"),
    "--weight-decay": ("optimizer", "weight_decay"),
    "--adam-beta1": ("optimizer", "adam_beta1"),
    "--adam-beta2": ("optimizer", "adam_beta2"),
    "--adam-eps": ("optimizer", "adam_eps"),
    "--clip-grad": ("optimizer", "clip_grad"),
    "--tensor-model-parallel-size": ("parallel", "tensor"),
    "--pipeline-model-parallel-size": ("parallel", "pipeline"),
    "--context-parallel-size": ("parallel", "context"),
    "--fp8-format": (None, "fp8_format"),
    "--attention-backend": ("kernels", "attention_backend"),
}


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("overrides", OVERRIDES)
def test_nemo_gets_the_same_settings_as_megatron(registry, tmp_path, model, overrides):
    import json

    mctx, _ = context_for("nvd_megatron", model, tmp_path / "m", overrides)
    nctx, _ = context_for("nvd_nemo", model, tmp_path / "n", overrides)
    megatron = _argv_dict(registry.launch("nvd_megatron", context=mctx).argv)
    s = json.loads(registry.launch("nvd_nemo", context=nctx).files["nemo_settings.json"])
    for flag, (section, key) in NEMO_PAIRS.items():
        if flag not in megatron:
            continue
        value = s[key] if section is None else s[section][key]
        assert str(value) == megatron[flag] or float(value) == float(megatron[flag]), flag
    assert s["parallel"]["sequence_parallel"] is ("--sequence-parallel" in megatron)
    assert s["parallel"]["distributed_optimizer"] is ("--use-distributed-optimizer" in megatron)
    assert s["precision"] == ("fp8" if "--fp8-format" in megatron else "bf16")
    assert s["architecture"]["add_qkv_bias"] is ("--add-qkv-bias" in megatron)
    assert s["recompute"]["granularity"] == megatron.get("--recompute-granularity")
    # the same embedding: Megatron pads the NullTokenizer's vocabulary, NeMo is given the result
    from tprimat.settings.models import get_model

    spec = get_model(model)
    assert s["padded_vocab_size"] == spec.padded_vocab_size(s["parallel"]["tensor"])
    assert int(megatron["--vocab-size"]) + 1 == spec.vocab_size  # core 0.15: NullTokenizer adds 1
