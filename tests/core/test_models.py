import pytest

from tprimat.settings.models import ModelSpec, UnknownModelError, get_model, iter_models, register_model


def test_llama31_8b_architecture_and_parameter_count():
    m = get_model("llama3.1-8b")
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size) == (32, 4096, 14336)
    assert (m.num_attention_heads, m.num_query_groups, m.kv_channels) == (32, 8, 128)
    assert m.vocab_size == 128256 and m.rope_theta == 500000.0
    assert m.rope_scaling["rope_type"] == "llama3" and m.rope_scaling["factor"] == 8.0
    assert not m.qkv_bias and not m.tie_embeddings
    # embeddings 2 x 128256 x 4096 + 32 layers x 218,112,000 + final norm 4096
    assert m.parameter_count == 8_030_261_248


def test_qwen25_7b_architecture_and_parameter_count():
    m = get_model("qwen2.5-7b")
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size) == (28, 3584, 18944)
    assert (m.num_attention_heads, m.num_query_groups) == (28, 4)
    assert m.vocab_size == 152064 and m.rope_theta == 1_000_000.0 and m.qkv_bias
    assert m.parameter_count == 7_615_616_512  # Qwen's own model card: 7.61B


@pytest.mark.parametrize("tiny, full", [("llama3.1-tiny", "llama3.1-8b"), ("qwen2.5-tiny", "qwen2.5-7b")])
def test_tiny_siblings_keep_the_architectural_features(tiny, full):
    t, f = get_model(tiny), get_model(full)
    assert t.family == f.family and t.hf_architecture == f.hf_architecture
    assert t.qkv_bias == f.qkv_bias and t.tie_embeddings == f.tie_embeddings
    assert t.rope_theta == f.rope_theta and t.rope_scaling == f.rope_scaling
    assert t.num_query_groups < t.num_attention_heads  # still GQA
    assert t.parameter_count < 5_000_000


def test_padded_vocab_follows_megatron():
    m = get_model("llama3.1-8b")
    assert m.padded_vocab_size() == 128256  # already a multiple of 128
    assert m.padded_vocab_size(tensor_parallel=8) == 129024  # next multiple of 1024


def test_unknown_model_names_the_known_ones():
    with pytest.raises(UnknownModelError) as info:
        get_model("llama-9000")
    assert "llama3.1-8b" in str(info.value)


def test_register_model_rejects_a_conflicting_redefinition():
    base = get_model("llama3.1-tiny")
    import attrs

    with pytest.raises(ValueError):
        register_model(attrs.evolve(base, num_layers=3))
    register_model(base)  # the identical spec again is fine


def test_heads_must_divide_into_groups():
    with pytest.raises(ValueError):
        ModelSpec(
            name="x",
            family="llama",
            hf_architecture="LlamaForCausalLM",
            num_layers=1,
            hidden_size=8,
            ffn_hidden_size=8,
            num_attention_heads=3,
            num_query_groups=2,
            kv_channels=4,
            vocab_size=8,
            max_position_embeddings=8,
            rope_theta=1.0,
        )


def test_iter_models_is_sorted():
    names = [m.name for m in iter_models()]
    assert names == sorted(names) and {"llama3.1-8b", "qwen2.5-7b"} <= set(names)
