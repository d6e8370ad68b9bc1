"""GEMM cases on the CPU with tiny shapes: FLOPs, TFLOP/s, operators, FP8 and dtype fallback."""

import pytest

from tprimat.microbench.shapes import GemmShape, model_gemm_shapes
from tprimat.settings.models import get_model

pytestmark = pytest.mark.torch


@pytest.fixture()
def cpu():
    import torch

    from tprimat.microbench.timing import Method, make_flush

    device = torch.device("cpu")
    method = Method(warmup=1, iterations=4, flush_bytes=1 << 16, timer="perf_counter")
    return torch, device, method, make_flush(torch, device, method.flush_bytes)


def test_rows_for_model_shapes(cpu):
    from tprimat.microbench.gemm import run_gemms

    torch, device, method, flush = cpu
    shapes = model_gemm_shapes(get_model("llama3.1-tiny"), seq_length=16)
    rows = run_gemms(torch, device, 0, shapes, dtypes=["bf16"], method=method, flush=flush)
    # forward shapes run matmul, linear and linear+bias; backward shapes matmul only
    assert len(rows) == 5 * 3 + 10
    for row in rows:
        assert row["status"] == "ok", row
        assert row["flops"] == 2 * row["m"] * row["n"] * row["k"]
        assert row["time_s"]["count"] == 4
        assert row["tflops"] == pytest.approx(row["flops"] / row["time_s"]["median"] / 1e12)
        assert row["tflops_max"] >= row["tflops"]
        assert row["dtype_used"] == "bf16"
    ops = {(r["pass"], r["op"]) for r in rows}
    assert ops == {
        ("fwd", "matmul"),
        ("fwd", "linear"),
        ("fwd", "linear+bias"),
        ("bwd_data", "matmul"),
        ("bwd_weight", "matmul"),
    }
    qkv_fwd = next(r for r in rows if r["name"] == "qkv" and r["pass"] == "fwd")
    assert (qkv_fwd["m"], qkv_fwd["n"], qkv_fwd["k"]) == (16, (4 + 2 * 2) * 32, 128)


@pytest.mark.parametrize("pass_", ["fwd", "bwd_data", "bwd_weight"])
def test_operands_in_each_layout_give_an_m_by_n_product(cpu, pass_):
    from tprimat.microbench.gemm import _matmul_fn, _operands, _refill

    torch, device, _, _ = cpu
    shape = GemmShape(name="x", pass_=pass_, m=6, n=5, k=3)
    ops = _operands(torch, device, shape, torch.float32, bias=True)
    _refill(ops.values())()
    out = _matmul_fn(torch, shape, ops)(None)
    assert out.shape == (6, 5)
    if pass_ == "fwd":
        linear = torch.nn.functional.linear(ops["a"], ops["b"], ops["bias"])
        assert torch.allclose(linear, out + ops["bias"], atol=1e-5)


def test_inputs_are_fresh_and_never_zero(cpu):
    from tprimat.microbench.gemm import _operands, _refill

    torch, device, _, _ = cpu
    ops = _operands(torch, device, GemmShape(name="x", pass_="fwd", m=32, n=32, k=32), torch.bfloat16, bias=False)
    refill = _refill(ops.values())
    refill()
    first = ops["a"].clone()
    refill()
    assert not torch.equal(first, ops["a"])
    assert float(ops["a"].float().abs().sum()) > 0 and float(ops["a"].float().std()) > 0.5


def test_fp8_is_unavailable_on_cpu_with_a_reason(cpu):
    from tprimat.microbench.gemm import fp8_support, run_gemms

    torch, device, method, flush = cpu
    dtype, reason = fp8_support(torch, device)
    assert dtype is None and "GPUs only" in reason
    rows = run_gemms(
        torch,
        device,
        0,
        [GemmShape(name="x", pass_="fwd", m=16, n=16, k=16)],
        dtypes=["fp8"],
        method=method,
        flush=flush,
        fp8_dtype=dtype,
        fp8_reason=reason,
    )
    assert len(rows) == 1
    assert rows[0]["status"] == "unavailable" and rows[0]["reason"] == reason
    assert rows[0]["tflops"] is None and rows[0]["op"] == "scaled_mm"


def test_dtype_fallback_is_explicit(cpu):
    from tprimat.microbench.gemm import resolve_dtype

    torch, device, _, _ = cpu
    assert resolve_dtype(torch, device, "bf16") == ("bf16", None)

    def unsupported(dtype):
        if dtype == torch.bfloat16:
            raise RuntimeError("\"addmm\" not implemented for 'BFloat16'\nmore detail")
        return None

    used, note = resolve_dtype(torch, device, "bf16", unsupported)
    assert used == "fp32"
    assert note.startswith('bf16 is not supported here (RuntimeError: "addmm" not implemented')
    assert note.endswith("measured in fp32")
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype(torch, device, "int4")


def test_a_failing_case_becomes_a_row(cpu, monkeypatch):
    from tprimat.microbench import gemm

    torch, device, method, flush = cpu

    def boom(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(gemm, "_operands", boom)
    rows = gemm.run_gemms(
        torch,
        device,
        3,
        [GemmShape(name="x", pass_="bwd_data", m=8, n=8, k=8)],
        dtypes=["bf16"],
        method=method,
        flush=flush,
    )
    assert [(r["status"], r["device_index"]) for r in rows] == [("failed", 3)]
    assert rows[0]["reason"] == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
