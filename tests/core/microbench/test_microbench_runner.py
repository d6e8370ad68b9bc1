"""The whole run on the CPU with a tiny model, and the choice of devices."""

import json
import types

import pytest

from tprimat.microbench import KIND, SCHEMA_VERSION, latest_for_device, save
from tprimat.microbench.runner import parse_dtypes, plan_shapes, run_microbench, select_devices
from tprimat.microbench.store import MicrobenchError
from tprimat.settings.models import get_model

TINY = {
    "model": get_model("llama3.1-tiny"),
    "seq_length": 32,
    "warmup": 1,
    "iterations": 2,
    "sweep_step": 32,
    "sweep_radius": 1,
    "window": 8,
    "flush_bytes": 1 << 16,
    "device": "cpu",
}


def test_dtypes_are_parsed_strictly():
    assert parse_dtypes("bf16, fp8,bf16") == ["bf16", "fp8"]
    with pytest.raises(MicrobenchError, match="unknown dtype 'int8'"):
        parse_dtypes("bf16,int8")
    with pytest.raises(MicrobenchError, match="no dtype"):
        parse_dtypes(" , ")


def test_layout_errors_come_before_any_measurement():
    with pytest.raises(MicrobenchError, match="not divisible by tensor parallel size 3"):
        run_microbench(what="gemm", model=get_model("llama3.1-8b"), tensor_parallel=3)
    shapes, sweep = plan_shapes(
        get_model("llama3.1-tiny"), seq_length=16, micro_batch_size=1, tensor_parallel=1, sweep_step=16, sweep_radius=0
    )
    assert len(shapes) == 15 and sweep == []


def _fake_torch(gpus):
    class Device:
        def __init__(self, kind, index=None):
            self.type, self.index = kind, index

    cuda = types.SimpleNamespace(is_available=lambda: gpus > 0, device_count=lambda: gpus)
    return types.SimpleNamespace(cuda=cuda, device=Device)


def test_every_gpu_of_the_node_is_selected():
    devices = select_devices(_fake_torch(8))
    assert [(d.type, d.index) for d in devices] == [("cuda", i) for i in range(8)]
    assert [d.type for d in select_devices(_fake_torch(8), "cpu")] == ["cpu"]
    assert [d.type for d in select_devices(_fake_torch(0))] == ["cpu"]
    with pytest.raises(MicrobenchError, match="no CUDA or ROCm GPU"):
        select_devices(_fake_torch(0), "cuda")


@pytest.mark.torch
def test_full_run_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTORCH_TUNABLEOP_ENABLED", "0")
    lines = []
    doc = run_microbench(what="all", dtypes="bf16,fp8", progress=lines.append, **TINY)
    assert doc["kind"] == KIND and doc["schema_version"] == SCHEMA_VERSION
    assert doc["device_count"] == 1 and doc["devices"][0]["type"] == "cpu"
    assert doc["devices"][0]["fp8"]["available"] is False
    assert doc["method"]["timer"] == "perf_counter" and doc["method"]["iterations"] == 2
    assert doc["config"]["tokens"] == 32 and doc["software"]["torch"].startswith("2.13")
    assert doc["environment"]["PYTORCH_TUNABLEOP_ENABLED"] == "0"
    groups = {r["group"] for r in doc["gemm"] if r["status"] == "ok"}
    assert groups == {"model", "sweep"}
    assert {r["variant"] for r in doc["attention"] if r["status"] == "ok"} == {"causal", "full", "sliding"}
    summary = doc["summary"]
    best = max(r["tflops"] for r in doc["gemm"] if r["status"] == "ok")
    assert summary["mamf_tflops"]["bf16"] == best
    assert "gemm fp8" in summary["unavailable"]
    assert any("smaller than" in note for note in summary["notes"])  # 64 KiB flush < the LLC
    json.dumps(doc, allow_nan=False)  # strict JSON
    assert len(lines) == len(doc["gemm"]) - 1 + 3  # every measured case reports progress

    save(doc, tmp_path)
    found = latest_for_device(doc["device_name"], tmp_path)
    assert found is not None and found["mamf_tflops"] == summary["mamf_tflops"]
    assert found["config"]["model"] == "llama3.1-tiny"


@pytest.mark.torch
def test_gemm_only_and_attention_only():
    gemm = run_microbench(what="gemm", dtypes="bf16", **{**TINY, "sweep_radius": 0})
    assert gemm["attention"] == [] and gemm["gemm"]
    assert all(r["group"] == "model" for r in gemm["gemm"])
    attention = run_microbench(what="attention", dtypes="bf16", **TINY)
    assert attention["gemm"] == [] and attention["summary"]["mamf_tflops"] == {}
    assert attention["summary"]["attention"]["sdpa causal bf16"]["efficiency"] is None
