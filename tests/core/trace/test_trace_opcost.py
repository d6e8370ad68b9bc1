"""FLOPs and bytes of recorded operator calls: checked against the recorded dimensions of real traces."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from tprimat.microbench.formulas import attention_flops
from tprimat.trace.opcost import DTYPE_BYTES, op_cost

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
SHAPED = [
    FIXTURES / "tracelens" / "mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    FIXTURES / "tracelens" / "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    FIXTURES / "tracelens" / "mi300_resnet_act_checkpoint.json.gz",
    FIXTURES / "tracelens" / "b200_eager_trace.json.gz",
    FIXTURES / "hta" / "trace_diff_control_control.json.gz",
]
GEMMS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear", "aten::_scaled_mm"}


def _ops(path: Path) -> list[dict]:
    with gzip.open(path) as fh:
        events = json.load(fh)["traceEvents"]
    return [e for e in events if str(e.get("cat", "")).lower() == "cpu_op" and isinstance(e.get("args"), dict)]


def _independent_gemm_flops(name: str, dims: list) -> int:
    """2·M·N·K × batch written out per operator from its documented argument order (no shared code)."""
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * n * k
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * n * k
    if name == "aten::bmm":
        (b, m, k), (_, _, n) = dims[0], dims[1]
        return 2 * b * m * n * k
    if name == "aten::linear":
        x, w = dims[0], dims[1]
        return 2 * math.prod(x[:-1]) * w[0] * x[-1]
    if name == "aten::matmul":
        a, b = dims[0], dims[1]
        if len(b) == 2:  # [..., m, k] @ [k, n]: every leading dimension of a is batch
            return 2 * math.prod(a[:-1]) * b[1] * a[-1]
        batch = math.prod(max(x, y) for x, y in zip(a[:-2], b[:-2], strict=True))
        return 2 * batch * a[-2] * b[-1] * a[-1]
    raise AssertionError(name)


@pytest.mark.parametrize("path", SHAPED, ids=lambda p: p.name[:40])
def test_every_recorded_gemm_costs_two_m_n_k_times_batch(path):
    checked = 0
    for event in _ops(path):
        name = event["name"]
        if name not in GEMMS or "Input Dims" not in event["args"]:
            continue
        args = event["args"]
        cost = op_cost(name, args["Input Dims"], args["Input type"], args.get("Concrete Inputs"))
        assert cost.kind == "gemm" and cost.costed, (name, args["Input Dims"], cost.reason)
        assert cost.flops == _independent_gemm_flops(name, args["Input Dims"]), (name, args["Input Dims"])
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("path", SHAPED[:2], ids=lambda p: p.name[:40])
def test_qwen_attention_follows_the_documented_formula(path):
    found = 0
    for event in _ops(path):
        if event["name"] != "aten::_flash_attention_forward":
            continue
        args = event["args"]
        q = args["Input Dims"][0]  # [batch, seq, heads, head_dim]
        assert args["Concrete Inputs"][8] == "True"  # is_causal
        cost = op_cost(event["name"], args["Input Dims"], args["Input type"], args["Concrete Inputs"])
        expected = attention_flops(
            batch=q[0], heads=q[2], seq_length=q[1], head_dim=q[3], variant="causal", direction="fwd"
        )
        assert cost.kind == "attention" and cost.flops == pytest.approx(expected) and cost.dtype == "bf16"
        assert cost.flops == pytest.approx(4 * q[0] * q[2] * q[3] * q[1] ** 2 / 2)
        assert cost.bytes == 4 * math.prod(q) * 2  # Q, K, V read, O written, bf16
        found += 1
    assert found == 24


def _attention(name, q, k, v, causal_index, causal="True", dtype="c10::BFloat16", extra=None):
    n = max(causal_index + 1, 16)
    dims = [[] for _ in range(n)]
    types = ["" for _ in range(n)]
    concrete = ["" for _ in range(n)]
    for index, shape in enumerate((q, k, v)):
        dims[index], types[index] = shape, dtype
    concrete[causal_index] = causal
    for index, value in (extra or {}).items():
        concrete[index] = value
    return op_cost(name, dims, types, concrete)


def test_sdpa_layouts_agree_and_full_is_twice_causal():
    bhsd = _attention("aten::scaled_dot_product_attention", [2, 8, 1024, 128], [2, 8, 1024, 128], [2, 8, 1024, 128], 5)
    bshd = _attention("aten::_flash_attention_forward", [2, 1024, 8, 128], [2, 1024, 8, 128], [2, 1024, 8, 128], 8)
    full = _attention(
        "aten::scaled_dot_product_attention", [2, 8, 1024, 128], [2, 8, 1024, 128], [2, 8, 1024, 128], 5, "False"
    )
    assert (
        bhsd.flops == bshd.flops == attention_flops(batch=2, heads=8, seq_length=1024, head_dim=128, variant="causal")
    )
    assert full.flops == 2 * bhsd.flops


def test_backward_is_twice_forward_and_reads_gradients():
    shape = [2, 1024, 8, 128]
    forward = _attention("flash_attn::_flash_attn_forward", shape, shape, shape, 5)
    dims = [[2, 1024, 8, 128]] * 5 + [[]] * 13
    types = ["c10::BFloat16"] * 5 + [""] * 13
    concrete = [""] * 18
    concrete[11] = "True"
    backward = op_cost("flash_attn::_flash_attn_backward", dims, types, concrete)
    assert backward.flops == 2 * forward.flops
    one = math.prod(shape) * 2
    assert forward.bytes == 4 * one and backward.bytes == 8 * one


def test_grouped_query_attention_counts_query_heads_and_reads_fewer_bytes():
    gqa = _attention("aten::_flash_attention_forward", [1, 512, 32, 64], [1, 512, 8, 64], [1, 512, 8, 64], 8)
    mha = _attention("aten::_flash_attention_forward", [1, 512, 32, 64], [1, 512, 32, 64], [1, 512, 32, 64], 8)
    assert gqa.flops == mha.flops and gqa.bytes < mha.bytes


def test_sliding_window_uses_the_microbench_pair_count():
    cost = _attention(
        "aten::_flash_attention_forward",
        [1, 4096, 8, 64],
        [1, 4096, 8, 64],
        [1, 4096, 8, 64],
        8,
        extra={11: "1023", 12: "0"},
    )
    assert cost.flops == attention_flops(batch=1, heads=8, seq_length=4096, head_dim=64, variant="sliding", window=1024)


@pytest.mark.parametrize(
    "name, causal, reason",
    [
        ("aten::scaled_dot_product_attention", "", "is_causal not recorded"),
        ("aten::scaled_dot_product_attention", "maybe", "not understood"),
    ],
)
def test_attention_without_what_it_needs_is_not_guessed(name, causal, reason):
    cost = _attention(name, [1, 8, 64, 64], [1, 8, 64, 64], [1, 8, 64, 64], 5, causal)
    assert not cost.costed and reason in cost.reason and cost.flops is None


def test_causal_attention_of_unequal_lengths_and_varlen_are_not_modelled():
    unequal = _attention("aten::scaled_dot_product_attention", [1, 8, 1, 64], [1, 8, 64, 64], [1, 8, 64, 64], 5)
    assert "not modelled" in unequal.reason
    dims = [[4096, 8, 64], [4096, 8, 64], [4096, 8, 64], [9], [9]] + [[]] * 10
    types = ["c10::BFloat16"] * 3 + ["int", "int"] + [""] * 10
    varlen = op_cost("aten::_flash_attention_forward", dims, types, [""] * 8 + ["True"] + [""] * 6)
    assert "variable-length" in varlen.reason


def test_bytes_only_operators():
    bf16 = "c10::BFloat16"
    add = op_cost("aten::add", [[16, 1024], [1, 1024], []], [bf16, bf16, "Scalar"], ["", "", "1"])
    assert add.kind == "elementwise" and add.flops is None
    assert add.bytes == (16 * 1024 + 1024) * 2 + 16 * 1024 * 2  # inputs read, broadcast output written
    inplace = op_cost("aten::add_", [[16, 1024], [16, 1024], []], [bf16, bf16, "Scalar"], ["", "", "1"])
    assert inplace.bytes == 3 * 16 * 1024 * 2
    copy = op_cost("aten::copy_", [[8, 8], [8, 8], []], [bf16, "float", "Scalar"], ["", "", "False"])
    assert copy.bytes == 64 * 4 + 64 * 2
    fill = op_cost("aten::fill_", [[8, 8], []], [bf16, "Scalar"], ["", "0"])
    assert fill.bytes == 64 * 2
    eq = op_cost("aten::eq", [[100], [100]], ["long int", "long int"], ["", ""])
    assert eq.bytes == 2 * 100 * 8 + 100 * DTYPE_BYTES["bool"]
    mean = op_cost(
        "aten::mean", [[16, 559, 1024], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""]
    )
    assert mean.kind == "reduction" and mean.bytes == 16 * 559 * 1024 * 4 + 16 * 559 * 4
    norm = op_cost(
        "aten::native_layer_norm", [[8, 1024], [], [1024], [1024], []], [bf16, "ScalarList", bf16, bf16, "Scalar"]
    )
    assert norm.kind == "norm" and norm.bytes == (8 * 1024 + 2 * 1024) * 2 + 8 * 1024 * 2
    softmax = op_cost("aten::_softmax", [[4, 128], [], []], ["float", "Scalar", "Scalar"], ["", "-1", "False"])
    assert softmax.kind == "softmax" and softmax.bytes == 2 * 4 * 128 * 4


def test_unknown_and_unrecorded():
    assert op_cost("aten::convolution", [[1]], ["float"]).reason == "unknown op"
    assert not op_cost("aten::convolution", [[1]], ["float"]).known
    no_shapes = op_cost("aten::mm", None, None)
    assert no_shapes.kind == "gemm" and no_shapes.reason == "no shapes recorded"
    listed = op_cost("aten::cat", [[[2, 3], [2, 3]], []], ["TensorList", "Scalar"], ["", "0"])
    assert "tensor-list dtypes not recorded" in listed.reason
    odd = op_cost("aten::mm", [[2, 3], [4, 5]], ["float", "float"])
    assert "inner dimensions differ" in odd.reason
    strange = op_cost("aten::mm", [[2, 3], [3, 5]], ["c10::Float2", "c10::Float2"])
    assert "unknown dtype" in strange.reason


def test_scaled_mm_output_dtype():
    fp8 = "c10::Float8_e4m3fn"
    dims = [[128, 256], [256, 64], [], [], [], [], [], []]
    types = [fp8, fp8, "float", "float", "", "", "Scalar", "Scalar"]
    bf16_out = op_cost("aten::_scaled_mm", dims, types, ["", "", "", "", "", "", "15", "False"])
    default_out = op_cost("aten::_scaled_mm", dims, types, [""] * 8)
    assert bf16_out.flops == default_out.flops == 2 * 128 * 64 * 256 and bf16_out.dtype == "fp8"
    assert bf16_out.bytes - default_out.bytes == 128 * 64  # two bytes per output element instead of one
