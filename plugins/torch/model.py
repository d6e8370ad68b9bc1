"""Build a registered architecture as a transformers model, from a local config only.

The transformers config is constructed from :class:`tprimat.settings.models.ModelSpec`
(never downloaded), so the torch backend trains exactly the architecture the
FLOPs formula and the Megatron backends describe.  Weights are initialised
by transformers' own initialiser with ``training.init_method_std``, under
``benchmark.seed``.
"""

from __future__ import annotations

from typing import Any

from tprimat.contract import BenchmarkConfig, ModelSpec
from tprimat.errors import TprimatError

#: kernels.attention_backend -> transformers attention implementation.
ATTENTION_IMPLEMENTATION = {"flash": "sdpa", "fused": "sdpa", "auto": "sdpa", "unfused": "eager"}


def hf_config(spec: ModelSpec, config: BenchmarkConfig) -> Any:
    """The transformers config object for ``spec`` (Llama or Qwen2 family)."""
    import transformers

    if not spec.swiglu:
        raise TprimatError(f"{spec.name}: transformers' Llama/Qwen2 models are SwiGLU only")
    common: dict[str, Any] = dict(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.ffn_hidden_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_query_groups,
        head_dim=spec.kv_channels,
        max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=spec.rms_norm_eps,
        hidden_act="silu",
        initializer_range=config.training.init_method_std,
        tie_word_embeddings=spec.tie_embeddings,
        use_cache=False,
        attn_implementation=ATTENTION_IMPLEMENTATION[config.kernels.attention_backend],
    )
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        rope = {"rope_type": "default", **(spec.rope_scaling or {}), "rope_theta": spec.rope_theta}
        common["rope_parameters"] = rope
    else:  # transformers 4.x (a vendor container's own build)
        common["rope_theta"] = spec.rope_theta
        common["rope_scaling"] = dict(spec.rope_scaling) if spec.rope_scaling else None
    if spec.hf_architecture == "LlamaForCausalLM":
        return transformers.LlamaConfig(attention_bias=spec.qkv_bias, mlp_bias=False, **common)
    if spec.hf_architecture == "Qwen2ForCausalLM":
        if not spec.qkv_bias:
            raise TprimatError(f"{spec.name}: Qwen2ForCausalLM always has QKV bias")
        return transformers.Qwen2Config(**common)
    raise TprimatError(
        f"{spec.name}: the torch backend builds LlamaForCausalLM or Qwen2ForCausalLM, not {spec.hf_architecture}"
    )


def build_model(spec: ModelSpec, config: BenchmarkConfig, device: Any) -> Any:
    """A freshly initialised model on ``device`` (fp32 parameters), seeded from the config."""
    import torch
    import transformers

    cfg = hf_config(spec, config)
    cls = getattr(transformers, spec.hf_architecture)
    torch.manual_seed(config.benchmark.seed)
    with torch.device(device):
        model = cls(cfg)
    return model
