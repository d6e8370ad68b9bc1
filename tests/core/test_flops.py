import pytest

from tprimat.result.flops import FLOPS_FORMULA, flops_per_token, formula_name
from tprimat.settings.models import get_model


def test_llama31_8b_at_8192_matches_megatron():
    assert flops_per_token(get_model("llama3.1-8b"), 8192) / 1e9 == pytest.approx(51.47, abs=0.005)


def test_llama31_8b_without_causal_halving():
    value = flops_per_token(get_model("llama3.1-8b"), 8192, causal=False)
    assert value / 1e9 == pytest.approx(57.91, abs=0.005)


def test_qwen25_7b_at_4096_matches_megatron():
    assert flops_per_token(get_model("qwen2.5-7b"), 4096) / 1e9 == pytest.approx(44.89, abs=0.005)


def test_formula_by_hand_for_llama():
    # 12 L h^2 [ (1 + g/a + s/2h) + 1.5 f/h + V/(2 L h) ]
    L, h, f, a, g, V, s = 32, 4096, 14336, 32, 8, 128256, 2048
    expected = 12 * L * h * h * ((1 + g / a + s / h / 2) + 1.5 * f / h + V / (2 * L * h))
    assert flops_per_token(get_model("llama3.1-8b"), s) == pytest.approx(expected)


def test_tensor_parallel_pads_the_vocabulary():
    m = get_model("llama3.1-8b")
    assert flops_per_token(m, 8192, tensor_parallel=8) > flops_per_token(m, 8192)


def test_bad_sequence_length():
    with pytest.raises(ValueError):
        flops_per_token(get_model("llama3.1-8b"), 0)


def test_formula_names_state_the_causal_term():
    assert "s/(2h)" in FLOPS_FORMULA and formula_name(causal=False) != FLOPS_FORMULA
