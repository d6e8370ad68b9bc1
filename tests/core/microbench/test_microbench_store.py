"""Microbench documents: summary, MAMF utilisation, saving and finding the latest one (no torch)."""

import json
import math

import pytest

from tprimat.microbench import (
    ENV_DIRECTORY,
    KIND,
    SCHEMA_VERSION,
    MicrobenchError,
    default_directory,
    latest_for_device,
    load,
    mamf_utilisation,
    save,
    summarize,
)
from tprimat.microbench.attention import attention_case
from tprimat.microbench.gemm import gemm_case
from tprimat.microbench.shapes import GemmShape
from tprimat.microbench.store import GEMM_CASE_FIELDS, case_spread

H100 = "NVIDIA H100 80GB HBM3"


# --- mamf_utilisation -------------------------------------------------------------------------


def test_mamf_utilisation_is_achieved_over_ceiling():
    assert mamf_utilisation(400.0, 800.0) == 0.5
    assert mamf_utilisation(0.0, 700.0) == 0.0
    assert mamf_utilisation(900.0, 750.0) == pytest.approx(1.2)  # above the ceiling is shown


@pytest.mark.parametrize(
    "achieved, ceiling",
    [
        (None, 700.0),
        (400.0, None),
        (None, None),
        (400.0, 0.0),
        (400.0, -1.0),
        (-5.0, 700.0),
        (math.nan, 700.0),
        (400.0, math.inf),
    ],
)
def test_mamf_utilisation_none_when_undefined(achieved, ceiling):
    assert mamf_utilisation(achieved, ceiling) is None


# --- summary ----------------------------------------------------------------------------------


def _gemm(
    device,
    m,
    n,
    k,
    seconds,
    *,
    op="matmul",
    pass_="fwd",
    group="model",
    name="qkv",
    dtype="bf16",
    used="bf16",
    reason=None,
):
    shape = GemmShape(name=name, pass_=pass_, m=m, n=n, k=k, group=group)
    return gemm_case(
        shape, op=op, dtype=dtype, dtype_used=used, device_index=device, times=list(seconds), reason=reason
    )


def _document(device_name=H100, created="2026-11-20T10:00:00+00:00", gemm=(), attention=(), host="node1"):
    doc = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "created_at": created,
        "device_name": device_name,
        "platform_device_name": device_name,
        "device_count": 2,
        "host": host,
        "config": {"model": "llama3.1-8b"},
        "method": {"iterations": 3},
        "gemm": list(gemm),
        "attention": list(attention),
    }
    doc["summary"] = summarize(doc)
    return doc


def _two_gpu_rows():
    flops = 2 * 1024 * 1024 * 1024  # 2.147 GFLOP
    return [
        # GPU 0: best 2.147 TFLOP/s (1 ms median); GPU 1 is slower: 2 ms median on its best
        _gemm(0, 1024, 1024, 1024, [0.001, 0.0009, 0.0012]),
        _gemm(0, 1024, 1024, 1024, [0.002, 0.002, 0.002], op="linear"),
        _gemm(0, 1024, 1024, 1024, [0.004, 0.004, 0.004], pass_="bwd_weight"),
        _gemm(1, 1024, 1024, 1024, [0.002, 0.002, 0.002]),
        _gemm(1, 1024, 1024, 1024, [0.002, 0.002, 0.002], op="linear"),
        _gemm(1, 1024, 1024, 1024, [0.004, 0.004, 0.004], pass_="bwd_weight"),
        _gemm(0, 1024, 1024, 2048, [0.0015] * 3, group="sweep", name="sweep"),
    ], flops


def test_tflops_is_flops_over_median_time():
    row = _gemm(0, 64, 32, 16, [0.5, 0.1, 0.2])
    assert row["flops"] == 2 * 64 * 32 * 16
    assert row["tflops"] == row["flops"] / 0.2 / 1e12
    assert row["tflops_max"] == row["flops"] / 0.1 / 1e12
    assert row["time_s"]["median"] == 0.2 and row["time_s"]["max"] == 0.5


def test_summary_mamf_is_the_slowest_gpus_best():
    rows, flops = _two_gpu_rows()
    summary = _document(gemm=rows)["summary"]
    best0 = 2 * flops / 0.0015 / 1e12  # the sweep shape, 2x the FLOPs in 1.5 ms
    best1 = flops / 0.002 / 1e12
    assert summary["mamf_per_device"]["bf16"] == [pytest.approx(best0), pytest.approx(best1)]
    assert summary["mamf_tflops"]["bf16"] == pytest.approx(best1)
    assert summary["mamf_tflops_max"]["bf16"] == pytest.approx(best0)
    assert summary["mamf_spread"]["bf16"] == pytest.approx((best0 - best1) / best0)
    assert summary["mamf_best"]["bf16"][0]["group"] == "sweep"
    assert summary["peak_tflops"]["bf16"] == 989.4
    assert summary["mamf_fraction_of_peak"]["bf16"] == pytest.approx(best1 / 989.4)
    assert "H100-SXM" in summary["peak_source"]["bf16"]


def test_summary_model_gemm_efficiency_and_linear_ratio():
    rows, flops = _two_gpu_rows()
    summary = _document(gemm=rows)["summary"]
    # model GEMMs through matmul: GPU 0 runs 2 shapes in 1 + 4 ms, GPU 1 in 2 + 4 ms (slowest)
    model = summary["model_gemm"]["bf16"]
    assert model["tflops_per_device"] == [
        pytest.approx(2 * flops / 0.005 / 1e12),
        pytest.approx(2 * flops / 0.006 / 1e12),
    ]
    assert model["tflops"] == pytest.approx(2 * flops / 0.006 / 1e12)
    assert model["efficiency"] == pytest.approx(model["tflops"] / summary["mamf_tflops"]["bf16"])
    ratio = summary["linear_vs_matmul"]["bf16"]["linear"]
    assert ratio["worst_ratio"] == pytest.approx(0.5)  # GPU 0: linear 2 ms vs matmul 1 ms
    assert ratio["median_ratio"] == pytest.approx(0.75)
    assert ratio["cases"] == 2


def test_fallback_dtype_counts_for_what_ran_and_is_noted():
    reason = "bf16 is not supported here (RuntimeError: no): measured in fp32"
    rows = [_gemm(0, 64, 64, 64, [0.001] * 3, used="fp32", reason=reason)]
    summary = _document(device_name="Some CPU", gemm=rows)["summary"]
    assert list(summary["mamf_tflops"]) == ["fp32"]
    assert reason in summary["notes"]
    assert summary["peak_tflops"]["fp32"] is None
    assert "no datasheet peak" in summary["peak_source"]["fp32"]


def test_unavailable_paths_are_reported_not_counted():
    fp8 = gemm_case(
        GemmShape(name="*", pass_="fwd", m=1, n=1, k=1),
        op="scaled_mm",
        dtype="fp8",
        dtype_used=None,
        device_index=0,
        status="unavailable",
        reason="no FP8 here",
    )
    summary = _document(gemm=[fp8])["summary"]
    assert summary["mamf_tflops"] == {}
    assert summary["unavailable"] == {"gemm fp8": "no FP8 here"}


def test_failed_and_skipped_cases_are_noted():
    shape = GemmShape(name="logits", pass_="fwd", m=8, n=8, k=8)
    oom = "OutOfMemoryError: CUDA out of memory"
    rows = [
        gemm_case(shape, op="matmul", dtype="bf16", dtype_used="bf16", device_index=i, status="failed", reason=oom)
        for i in (0, 1)
    ]
    rows.append(
        gemm_case(
            GemmShape(name="x", pass_="fwd", m=8, n=8, k=8),
            op="scaled_mm",
            dtype="fp8",
            dtype_used=None,
            device_index=0,
            status="skipped",
            reason="needs 16",
        )
    )
    notes = _document(gemm=rows)["summary"]["notes"]
    assert notes == [
        f"2 GEMM case(s) failed: {oom} (e.g. logits/fwd 8x8x8 matmul bf16 on device 0)",
        "1 GEMM case(s) skipped: needs 16 (e.g. x/fwd 8x8x8 scaled_mm fp8 on device 0)",
    ]


def test_attention_summary_uses_the_slowest_gpu():
    common = {
        "impl": "sdpa",
        "backend": "flash",
        "variant": "causal",
        "window": None,
        "dtype": "bf16",
        "dtype_used": "bf16",
        "batch": 1,
        "heads": 4,
        "kv_heads": 2,
        "seq_length": 64,
        "head_dim": 32,
    }
    rows = [
        attention_case(device_index=0, fwd_times=[1e-4] * 3, bwd_times=[2e-4] * 3, **common),
        attention_case(device_index=1, fwd_times=[2e-4] * 3, bwd_times=[4e-4] * 3, **common),
    ]
    gemm = [_gemm(0, 64, 64, 64, [1e-6] * 3), _gemm(1, 64, 64, 64, [1e-6] * 3)]
    summary = _document(gemm=gemm, attention=rows)["summary"]
    entry = summary["attention"]["sdpa causal bf16"]
    fwd_flops = 4 * 4 * 32 * 64 * 64 / 2
    assert entry["fwd_tflops"] == pytest.approx(fwd_flops / 2e-4 / 1e12)
    assert entry["bwd_tflops"] == pytest.approx(2 * fwd_flops / 4e-4 / 1e12)
    assert entry["fwd_bwd_tflops"] == pytest.approx(3 * fwd_flops / 6e-4 / 1e12)
    assert entry["spread"] == pytest.approx(0.5)
    assert entry["efficiency"] == pytest.approx(entry["fwd_bwd_tflops"] / summary["mamf_tflops"]["bf16"])


def test_case_spread_across_gpus():
    rows, _ = _two_gpu_rows()
    spread = {(e["op"], e["pass"], e["group"]): e for e in case_spread(rows, GEMM_CASE_FIELDS)}
    matmul = spread[("matmul", "fwd", "model")]
    assert matmul["devices"] == 2 and matmul["slowest_device"] == 1
    assert matmul["spread"] == pytest.approx(0.5)
    assert spread[("matmul", "bwd_weight", "model")]["spread"] == 0


# --- saving and finding -----------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    rows, _ = _two_gpu_rows()
    doc = _document(gemm=rows)
    path = save(doc, tmp_path)
    assert path.parent == tmp_path
    assert path.name.startswith("microbench-nvidia-h100-80gb-hbm3-node1-20261120T100000Z")
    assert load(path) == json.loads(json.dumps(doc))
    assert not list(tmp_path.glob(".*.tmp"))


def test_load_rejects_other_documents(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text(json.dumps({"kind": "tprimat.result"}))
    (tmp_path / "c.json").write_text(json.dumps({"kind": KIND, "schema_version": 99}))
    with pytest.raises(MicrobenchError, match="not JSON"):
        load(tmp_path / "a.json")
    with pytest.raises(MicrobenchError, match="not a tprimat microbench"):
        load(tmp_path / "b.json")
    with pytest.raises(MicrobenchError, match="schema version 99"):
        load(tmp_path / "c.json")
    with pytest.raises(MicrobenchError, match="cannot read"):
        load(tmp_path / "missing.json")


def test_latest_for_device_picks_the_newest_of_that_device(tmp_path):
    rows, _ = _two_gpu_rows()
    older = _document(created="2026-11-01T08:00:00+00:00", gemm=rows[:1])
    newer = _document(created="2026-11-21T08:00:00+00:00", gemm=rows)
    other = _document(device_name="AMD Instinct MI300X", created="2026-11-22T08:00:00+00:00", gemm=rows[:1])
    for doc in (newer, older, other):
        save(doc, tmp_path)
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "future.json").write_text(json.dumps({"kind": KIND, "schema_version": 2}))

    found = latest_for_device("nvidia h100  80gb hbm3", tmp_path)  # case and spacing ignored
    assert found is not None
    assert found["created_at"] == newer["created_at"]
    assert found["matched_by"] == "device name"
    assert found["mamf_tflops"]["bf16"] == pytest.approx(newer["summary"]["mamf_tflops"]["bf16"])
    assert found["path"].endswith(".json") and found["device_count"] == 2
    assert latest_for_device("AMD Instinct MI300X", tmp_path)["created_at"] == other["created_at"]
    assert latest_for_device("NVIDIA A100-SXM4-80GB", tmp_path) is None
    assert latest_for_device("", tmp_path) is None
    assert latest_for_device(H100, tmp_path / "nowhere") is None


def test_latest_for_device_prefers_this_host(tmp_path):
    rows, _ = _two_gpu_rows()
    mine = _document(created="2026-11-01T08:00:00+00:00", gemm=rows, host="node1")
    theirs = _document(created="2026-11-01T08:00:00+00:00", gemm=rows[:1], host="node2")
    paths = {save(mine, tmp_path), save(theirs, tmp_path)}
    assert len(paths) == 2  # same device, same second, two nodes: two files
    assert latest_for_device(H100, tmp_path, host="node2")["host"] == "node2"
    assert latest_for_device(H100, tmp_path, host="node1")["host"] == "node1"
    assert latest_for_device(H100, tmp_path, host="node9")["host"] in {"node1", "node2"}


def test_latest_for_device_falls_back_to_the_same_peaks_row(tmp_path):
    rows, _ = _two_gpu_rows()
    save(_document(device_name="AMD Instinct MI300X", gemm=rows), tmp_path)
    found = latest_for_device("MI300X", tmp_path)  # rocm-smi may print a shorter name
    assert found is not None and found["matched_by"] == "peaks table row MI300X"
    assert latest_for_device("AMD Instinct MI325X", tmp_path) is None


def test_default_directory_follows_the_environment(tmp_path, monkeypatch):
    rows, _ = _two_gpu_rows()
    monkeypatch.setenv(ENV_DIRECTORY, str(tmp_path))
    assert default_directory() == tmp_path
    save(_document(gemm=rows), None)
    assert latest_for_device(H100) is not None
    monkeypatch.delenv(ENV_DIRECTORY)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == tmp_path / "home" / ".cache" / "tprimat" / "microbench"
