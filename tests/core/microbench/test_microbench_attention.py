"""Attention on the CPU: masks against a dense reference, FLOPs and TFLOP/s of the rows."""

import pytest

from tprimat.microbench.formulas import attended_pairs, attention_flops

pytestmark = pytest.mark.torch


def test_masks_by_hand():
    import torch

    from tprimat.microbench.attention import dense_mask

    t, f = True, False
    assert dense_mask(torch, "causal", 4).tolist() == [[t, f, f, f], [t, t, f, f], [t, t, t, f], [t, t, t, t]]
    assert dense_mask(torch, "sliding", 5, 2).tolist() == [
        [t, f, f, f, f],
        [t, t, f, f, f],
        [f, t, t, f, f],
        [f, f, t, t, f],
        [f, f, f, t, t],
    ]
    assert bool(dense_mask(torch, "full", 3).all())
    assert torch.equal(dense_mask(torch, "sliding", 6, 6), dense_mask(torch, "causal", 6))
    with pytest.raises(ValueError, match="unknown attention variant"):
        dense_mask(torch, "local", 3)


@pytest.mark.parametrize(
    "variant, window", [("full", None), ("causal", None), ("sliding", 5), ("sliding", 1), ("sliding", 40)]
)
def test_pair_counts_match_the_mask(variant, window):
    """The FLOPs convention drops half of the diagonal: exact count minus (window or s) / 2."""
    import torch

    from tprimat.microbench.attention import dense_mask

    s = 24
    exact = int(dense_mask(torch, variant, s, window).sum())
    diagonal = 0 if variant == "full" else min(window or s, s)
    assert attended_pairs(s, variant, window) == exact - diagonal / 2


@pytest.mark.parametrize("variant, window", [("full", None), ("causal", None), ("sliding", 3), ("sliding", 16)])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_sdpa_matches_the_dense_reference(variant, window, groups):
    import torch

    from tprimat.microbench.attention import dense_mask, reference_attention, sdpa_attention

    torch.manual_seed(0)
    q = torch.randn(2, 4, 16, 8)
    k = torch.randn(2, groups, 16, 8)
    v = torch.randn(2, groups, 16, 8)
    out = sdpa_attention(torch, q, k, v, variant, window)
    expected = reference_attention(torch, q, k, v, dense_mask(torch, variant, 16, window))
    assert torch.allclose(out, expected, atol=1e-5)
    if variant != "full":  # the mask changes the answer, so a wrong mask cannot pass
        unmasked = reference_attention(torch, q, k, v, dense_mask(torch, "full", 16))
        assert not torch.allclose(out, unmasked, atol=1e-3)


def test_flash_attn_window_arguments():
    from tprimat.microbench.attention import flash_attn_window

    assert flash_attn_window("sliding", 8192, 4096) == (4095, 0)
    assert flash_attn_window("sliding", 100, 4096) == (99, 0)
    assert flash_attn_window("causal", 8192, 4096) == (-1, -1)


def test_run_attention_rows():
    import torch

    from tprimat.microbench.attention import run_attention
    from tprimat.microbench.timing import Method, make_flush

    device = torch.device("cpu")
    method = Method(warmup=1, iterations=3, flush_bytes=1 << 16, timer="perf_counter")
    seen = []
    rows = run_attention(
        torch,
        device,
        0,
        batch=1,
        heads=4,
        kv_heads=2,
        seq_length=32,
        head_dim=16,
        window=8,
        dtypes=["bf16", "fp8"],
        method=method,
        flush=make_flush(torch, device, method.flush_bytes),
        progress=seen.append,
    )
    sdpa = {r["variant"]: r for r in rows if r["impl"] == "sdpa" and r["status"] == "ok"}
    assert set(sdpa) == {"causal", "full", "sliding"}
    for variant, row in sdpa.items():
        window = 8 if variant == "sliding" else None
        assert row["window"] == window
        assert row["backend"] and not row["backend"].startswith("unknown")
        fwd = attention_flops(batch=1, heads=4, seq_length=32, head_dim=16, variant=variant, window=window)
        assert row["fwd"]["flops"] == fwd
        assert row["bwd"]["flops"] == 2 * fwd
        assert row["fwd+bwd"]["flops"] == 3 * fwd
        for part in ("fwd", "bwd", "fwd+bwd"):
            assert row[part]["time_s"]["count"] == 3
            assert row[part]["tflops"] == pytest.approx(row[part]["flops"] / row[part]["time_s"]["median"] / 1e12)
    flash = [r for r in rows if r["impl"] == "flash_attn"]
    assert len(flash) == 1 and flash[0]["status"] == "unavailable"  # not installed / CPU
    fp8 = [r for r in rows if r["dtype"] == "fp8"]
    assert len(fp8) == 1 and fp8[0]["status"] == "unavailable" and fp8[0]["reason"]
    assert len(seen) == 3


def test_backward_runs_through_the_measured_path():
    """The timed phases really produce gradients (the backward is not a no-op)."""
    import torch

    from tprimat.microbench.attention import _inputs, _prepare, sdpa_attention

    q, k, v = _inputs(torch, torch.device("cpu"), torch.float32, [(1, 2, 8, 4)] * 3)
    grad_out = torch.empty(1, 2, 8, 4)
    _prepare(torch, (q, k, v), grad_out)()
    sdpa_attention(torch, q, k, v, "causal").backward(grad_out)
    assert q.grad is not None and float(q.grad.abs().sum()) > 0
    _prepare(torch, (q, k, v), grad_out)()
    assert q.grad is None
