"""FLOP formulas of the microbenchmarks, checked against hand computation."""

import pytest

from tprimat.microbench.formulas import attended_pairs, attention_flops, gemm_flops, tflops
from tprimat.microbench.shapes import model_gemm_shapes
from tprimat.result.flops import flops_per_token
from tprimat.settings.models import get_model


def test_gemm_flops_is_two_m_n_k():
    assert gemm_flops(8192, 6144, 4096) == 2 * 8192 * 6144 * 4096 == 412_316_860_416
    assert gemm_flops(1, 1, 1) == 2
    assert gemm_flops(3, 5, 7) == 210


@pytest.mark.parametrize("bad", [(0, 1, 1), (1, -1, 1), (1, 1, 0)])
def test_gemm_flops_rejects_empty_dimensions(bad):
    with pytest.raises(ValueError, match="must be positive"):
        gemm_flops(*bad)


def test_attended_pairs_by_variant():
    assert attended_pairs(8, "full") == 64
    assert attended_pairs(8, "causal") == 32  # causal counts half
    assert attended_pairs(8, "sliding", 3) == 8 * 3 - 4.5
    # a window as long as the sequence (or longer) is causal attention
    assert attended_pairs(8, "sliding", 8) == attended_pairs(8, "causal")
    assert attended_pairs(8, "sliding", 100) == attended_pairs(8, "causal")


def test_attention_flops_by_hand_for_llama_8b():
    # b=1, 32 heads, s=8192, d=128: full forward is 4*b*h*s^2*d
    full = 4 * 32 * 8192 * 8192 * 128
    kw = {"batch": 1, "heads": 32, "seq_length": 8192, "head_dim": 128}
    assert attention_flops(**kw, variant="full") == full
    assert attention_flops(**kw, variant="causal") == full / 2
    assert attention_flops(**kw, variant="causal", direction="bwd") == full
    assert attention_flops(**kw, variant="causal", direction="fwd+bwd") == 1.5 * full
    window = 4 * 32 * 128 * (8192 * 4096 - 4096 * 4096 / 2)
    assert attention_flops(**kw, variant="sliding", window=4096) == window
    assert attention_flops(**{**kw, "batch": 2}, variant="full") == 2 * full


def test_attention_flops_rejects_nonsense():
    with pytest.raises(ValueError, match="window"):
        attended_pairs(8, "sliding", None)
    with pytest.raises(ValueError, match="unknown attention variant"):
        attended_pairs(8, "local")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="direction"):
        attention_flops(batch=1, heads=1, seq_length=4, head_dim=2, variant="full", direction="both")  # type: ignore[arg-type]


def test_tflops_is_flops_over_seconds():
    assert tflops(2e12, 0.5) == 4.0
    assert tflops(1.0, 0.0) is None
    assert tflops(1.0, None) is None


@pytest.mark.parametrize(
    ("name", "tp"),
    [
        ("llama3.1-8b", 1),
        ("llama3.1-8b", 2),
        ("llama3.1-8b", 8),
        ("qwen2.5-7b", 1),
        ("qwen2.5-7b", 4),
        ("llama3.1-tiny", 1),
        ("qwen2.5-tiny", 2),
    ],
)
def test_model_gemms_plus_attention_equal_the_megatron_formula(name, tp):
    """The shapes tprimat times are the FLOPs tprimat's MFU counts, no more, no less."""
    model = get_model(name)
    seq = 4096
    shapes = model_gemm_shapes(model, seq_length=seq, micro_batch_size=1, tensor_parallel=tp)
    logits = sum(s.flops for s in shapes if s.name == "logits")
    per_layer = sum(s.flops for s in shapes if s.name != "logits")
    attention = attention_flops(
        batch=1,
        heads=model.num_attention_heads // tp,
        seq_length=seq,
        head_dim=model.kv_channels,
        variant="causal",
        direction="fwd+bwd",
    )
    total = model.num_layers * (per_layer + attention) + logits
    expected = flops_per_token(model, seq, tensor_parallel=tp) * seq / tp
    assert total == pytest.approx(expected, rel=1e-12)
