"""The model's GEMM shapes per tensor-parallel rank, and the sweep around them."""

import pytest

from tprimat.microbench.shapes import (
    GemmShape,
    ShapeError,
    layer_dimensions,
    model_gemm_shapes,
    sweep_shapes,
)
from tprimat.settings.models import get_model


def _by_key(shapes):
    return {(s.name, s.pass_): (s.m, s.n, s.k) for s in shapes}


def test_llama_8b_shapes_tp1():
    shapes = _by_key(model_gemm_shapes(get_model("llama3.1-8b"), seq_length=8192))
    assert shapes[("qkv", "fwd")] == (8192, (32 + 2 * 8) * 128, 4096)
    assert shapes[("attn_out", "fwd")] == (8192, 4096, 4096)
    assert shapes[("mlp_up_gate", "fwd")] == (8192, 2 * 14336, 4096)
    assert shapes[("mlp_down", "fwd")] == (8192, 4096, 14336)
    assert shapes[("logits", "fwd")] == (8192, 128256, 4096)
    # backward: dx = dy @ w is tokens x in x out; dW = dy.T @ x is out x in x tokens
    assert shapes[("mlp_down", "bwd_data")] == (8192, 14336, 4096)
    assert shapes[("mlp_down", "bwd_weight")] == (4096, 14336, 8192)
    assert shapes[("qkv", "bwd_weight")] == (6144, 4096, 8192)
    assert len(shapes) == 15


def test_qwen_shapes_tp2_and_micro_batch():
    model = get_model("qwen2.5-7b")
    shapes = _by_key(model_gemm_shapes(model, seq_length=4096, micro_batch_size=2, tensor_parallel=2))
    tokens = 8192
    assert shapes[("qkv", "fwd")] == (tokens, (28 + 8) * 128 // 2, 3584)
    assert shapes[("attn_out", "fwd")] == (tokens, 3584, 28 * 128 // 2)
    assert shapes[("mlp_up_gate", "fwd")] == (tokens, 18944, 3584)
    assert shapes[("mlp_down", "fwd")] == (tokens, 3584, 18944 // 2)
    # 152064 padded to a multiple of 128*2 is 152064; each rank holds half
    assert shapes[("logits", "fwd")] == (tokens, 152064 // 2, 3584)


def test_logits_use_the_padded_vocabulary():
    model = get_model("llama3.1-8b")
    out, inp = layer_dimensions(model, 8)["logits"]
    assert out * 8 == model.padded_vocab_size(8) == 129024
    assert inp == 4096


def test_every_pass_has_the_same_flops_per_layer():
    for layer in ("qkv", "attn_out", "mlp_up_gate", "mlp_down", "logits"):
        flops = {s.flops for s in model_gemm_shapes(get_model("llama3.1-8b"), seq_length=2048) if s.name == layer}
        assert len(flops) == 1


@pytest.mark.parametrize("tp", [3, 16])
def test_tensor_parallel_must_divide_heads_and_groups(tp):
    with pytest.raises(ShapeError, match="not divisible by tensor parallel size"):
        model_gemm_shapes(get_model("llama3.1-8b"), seq_length=128, tensor_parallel=tp)


def test_bad_sizes_are_rejected():
    with pytest.raises(ShapeError):
        model_gemm_shapes(get_model("llama3.1-tiny"), seq_length=0)
    with pytest.raises(ShapeError):
        sweep_shapes([], step=0)


def test_sweep_surrounds_forward_shapes_without_repeating_them():
    base = [
        GemmShape(name="qkv", pass_="fwd", m=64, n=256, k=128),
        GemmShape(name="attn_out", pass_="fwd", m=64, n=128, k=128),
    ]
    sweep = sweep_shapes(base, step=16, radius=1)
    triples = [(s.m, s.n, s.k) for s in sweep]
    assert len(triples) == len(set(triples))
    assert (64, 256, 128) not in triples and (64, 128, 128) not in triples
    assert (64, 272, 144) in triples and (64, 240, 112) in triples and (64, 112, 128) in triples
    # the 8 neighbours of each base shape
    assert len(triples) == 16
    assert all(s.group == "sweep" and s.pass_ == "fwd" for s in sweep)
    assert sweep_shapes(base, step=16, radius=0) == []


def test_sweep_drops_non_positive_sizes():
    sweep = sweep_shapes([GemmShape(name="x", pass_="fwd", m=8, n=16, k=16)], step=16, radius=2)
    assert all(s.n > 0 and s.k > 0 for s in sweep)
    assert {(s.n, s.k) for s in sweep} == {(n, k) for n in (16, 32, 48) for k in (16, 32, 48) if (n, k) != (16, 16)}
