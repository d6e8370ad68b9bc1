"""The model registry: exact architectures of the models tprimat benchmarks.

Every backend builds its model from these numbers (Megatron flags, Primus
overrides, NeMo recipes, Hugging Face configs), and the FLOPs formula reads
them too, so one registry entry is the single truth about a model.  Plugins
add models through :func:`register_model`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class ModelSpec:
    """A decoder-only transformer (Llama/Qwen family) described exactly."""

    name: str
    family: str  # "llama" or "qwen2": selects tokenizer and HF architecture
    hf_architecture: str  # transformers class name, e.g. "LlamaForCausalLM"
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int  # KV heads (GQA); equal to heads for plain MHA
    kv_channels: int  # head dimension
    vocab_size: int  # the tokenizer's vocabulary (unpadded)
    max_position_embeddings: int
    rope_theta: float
    rope_scaling: dict[str, Any] | None = None  # HF-style rope_scaling dict
    rms_norm_eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = False
    swiglu: bool = True
    tokenizer: str = ""  # Hugging Face id or local path of the model's own tokenizer
    description: str = ""

    def __attrs_post_init__(self) -> None:
        if self.num_attention_heads % self.num_query_groups:
            raise ValueError(
                f"{self.name}: {self.num_attention_heads} heads are not divisible "
                f"into {self.num_query_groups} query groups"
            )

    @property
    def layer_parameters(self) -> tuple[int, int]:
        """(trainable parameters of one transformer layer, of which in its linear layers' weights)."""
        h, d = self.hidden_size, self.kv_channels
        q_out = self.num_attention_heads * d
        kv_out = self.num_query_groups * d
        linear = h * q_out + 2 * h * kv_out + q_out * h + (3 if self.swiglu else 2) * h * self.ffn_hidden_size
        bias = q_out + 2 * kv_out if self.qkv_bias else 0
        norms = 2 * h
        return linear + bias + norms, linear

    @property
    def parameter_count(self) -> int:
        """Exact number of trainable parameters (unpadded vocabulary)."""
        per_layer, _ = self.layer_parameters
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)
        return self.num_layers * per_layer + embeddings + self.hidden_size  # + final norm

    def padded_vocab_size(self, tensor_parallel: int = 1, divisible_by: int = 128) -> int:
        """Vocabulary padded the way Megatron pads it (a multiple of divisible_by × TP)."""
        multiple = divisible_by * tensor_parallel
        return -(-self.vocab_size // multiple) * multiple


_LLAMA31_ROPE_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

BUILTIN_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="llama3.1-8b",
        family="llama",
        hf_architecture="LlamaForCausalLM",
        num_layers=32,
        hidden_size=4096,
        ffn_hidden_size=14336,
        num_attention_heads=32,
        num_query_groups=8,
        kv_channels=128,
        vocab_size=128256,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling=_LLAMA31_ROPE_SCALING,
        rms_norm_eps=1e-5,
        tokenizer="meta-llama/Llama-3.1-8B",
        description="Meta Llama 3.1 8B",
    ),
    ModelSpec(
        name="qwen2.5-7b",
        family="qwen2",
        hf_architecture="Qwen2ForCausalLM",
        num_layers=28,
        hidden_size=3584,
        ffn_hidden_size=18944,
        num_attention_heads=28,
        num_query_groups=4,
        kv_channels=128,
        vocab_size=152064,
        max_position_embeddings=131072,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        qkv_bias=True,
        tokenizer="Qwen/Qwen2.5-7B",
        description="Alibaba Qwen 2.5 7B",
    ),
    # CPU-sized siblings with the same architectural features (GQA, SwiGLU,
    # RMSNorm, RoPE base and scaling, QKV bias, untied embeddings) and a small
    # vocabulary, so that tests and laptops can train them in seconds.  Their
    # data must be tokenized with a tokenizer of at most 4096 tokens.
    ModelSpec(
        name="llama3.1-tiny",
        family="llama",
        hf_architecture="LlamaForCausalLM",
        num_layers=2,
        hidden_size=128,
        ffn_hidden_size=448,
        num_attention_heads=4,
        num_query_groups=2,
        kv_channels=32,
        vocab_size=4096,
        max_position_embeddings=2048,
        rope_theta=500000.0,
        rope_scaling=_LLAMA31_ROPE_SCALING,
        rms_norm_eps=1e-5,
        tokenizer="meta-llama/Llama-3.1-8B",
        description="Llama 3.1 architecture at CPU size (tests, laptops)",
    ),
    ModelSpec(
        name="qwen2.5-tiny",
        family="qwen2",
        hf_architecture="Qwen2ForCausalLM",
        num_layers=2,
        hidden_size=128,
        ffn_hidden_size=672,
        num_attention_heads=4,
        num_query_groups=2,
        kv_channels=32,
        vocab_size=4096,
        max_position_embeddings=2048,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        qkv_bias=True,
        tokenizer="Qwen/Qwen2.5-7B",
        description="Qwen 2.5 architecture at CPU size (tests, laptops)",
    ),
)

_registry: dict[str, ModelSpec] = {m.name: m for m in BUILTIN_MODELS}


class UnknownModelError(KeyError):
    """Raised for a model name nobody registered."""

    def __str__(self) -> str:
        return f"unknown model {self.args[0]!r}; known: {', '.join(sorted(_registry))}"


def register_model(spec: ModelSpec) -> None:
    """Add a model (plugins call this); a second model with the same name is an error."""
    existing = _registry.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"model {spec.name!r} is already registered with another architecture")
    _registry[spec.name] = spec


def get_model(name: str) -> ModelSpec:
    """The registered model called ``name``."""
    try:
        return _registry[name]
    except KeyError:
        raise UnknownModelError(name) from None


def iter_models() -> Iterator[ModelSpec]:
    """All registered models, sorted by name."""
    return iter(sorted(_registry.values(), key=lambda m: m.name))
