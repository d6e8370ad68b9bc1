"""Legacy import on the real seed results, numbers checked by hand."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.parse.legacy import LegacyError, LegacyOptions, convert_legacy, load_legacy
from tprimat.result.resultjson import write_result
from tprimat.result.schema import dumps_result, load_result

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
CUDA = FIXTURES / "output__benchmark_cuda_llama.627dfac.json"
AMD = FIXTURES / "output_prev__train_amd_prim_llama.516b342.json"
NVD = FIXTURES / "output_prev__train_nvd_nemo_llama.516b342.json"


def _llama8b_flops_per_token(seq: int) -> float:
    # Megatron formula written out for Llama 3.1 8B: L=32, h=4096, f=14336, a=32, g=8, d=128,
    # V=128256 (already a multiple of 128, so padding keeps it).
    L, h, f, a, g, d, V = 32, 4096, 14336, 32, 8, 128, 128256
    return 12 * L * h * h * ((1 + g / a + seq / (2 * h)) * (d * a / h) + 1.5 * f / h + V / (2 * L * h))


def test_benchmark_file_throughput_recomputed_by_hand():
    result = convert_legacy(CUDA, LegacyOptions(precision="bf16"))
    # raw_step_times, iterations 3..10 after 2 warm-up iterations
    measured = [1.551, 1.547, 1.544, 1.533, 1.502, 1.548, 1.505, 2.143]
    ordered = sorted(measured)  # middle two: 1.544 and 1.547
    assert ordered[3:5] == [1.544, 1.547]
    # GBS 8 x SL 8192 = 65536 tokens per step on 8 GPUs -> 8192 / t per GPU
    per_gpu_median = (8192 / 1.544 + 8192 / 1.547) / 2
    s = result.summary
    assert s.warmup_iterations == 2 and s.measured_iterations == 8
    assert s.tokens_per_s_per_gpu.median == pytest.approx(per_gpu_median, rel=1e-12)
    assert s.tokens_per_s_per_gpu.median == pytest.approx(5300.555, abs=1e-3)
    assert s.step_time_s.median == pytest.approx((1.544 + 1.547) / 2)
    assert s.step_time_s.max == 2.143
    tflops = _llama8b_flops_per_token(8192) * per_gpu_median / 1e12
    assert s.tflops_per_gpu == pytest.approx(tflops, rel=1e-9)
    assert s.peak_tflops == 989.4  # H100 SXM dense BF16 (datasheet 1979 sparse / 2)
    assert s.mfu == pytest.approx(tflops / 989.4, rel=1e-9)
    assert result.run.status == "completed"  # 10 step times, max_steps 10
    assert result.run.platform == "nvidia"
    assert [r.iteration for r in result.iterations] == list(range(1, 11))
    assert result.iterations[0].step_time_s == 5.155


def test_memory_units_are_gb_converted_to_gib():
    result = convert_legacy(CUDA)
    # 85.018 "GB" for an H100 80GB: 85.018e9 / 2**30 = 79.179 GiB (85.018 GiB would be 91.3 GB)
    assert result.hardware.memory_per_device_gib == pytest.approx(85.018e9 / 2**30)
    assert result.hardware.memory_per_device_gib == pytest.approx(79.18, abs=0.01)
    assert result.summary.mem_max_allocated_gib == pytest.approx(22.295e9 / 2**30)
    assert result.summary.mem_max_reserved_gib == pytest.approx(32.588e9 / 2**30)
    notes = "\n".join(result.provenance.notes)
    assert "85.018 is in GB (10^9 bytes): 79.1792 GiB" in notes
    assert "peak_memory_reserved_gb 32.588 GB (10^9 bytes) = 30.3499 GiB" in notes
    amd = convert_legacy(AMD)
    assert amd.hardware.memory_per_device_gib == pytest.approx(206.14165e9 / 2**30)
    assert amd.hardware.memory_per_device_gib == pytest.approx(191.98, abs=0.01)  # MI300X 192 GB
    assert amd.summary.mem_max_allocated_gib is None
    assert "no memory figures in the legacy file" in amd.provenance.notes


def test_legacy_throughput_disagreements_are_noted_with_both_values():
    result = convert_legacy(NVD)
    data = json.loads(NVD.read_text())
    steps = data["step_times"]
    legacy_mean = sum(steps[1:]) / 499  # the earlier scripts dropped only the first step
    assert legacy_mean == pytest.approx(3.42805, abs=5e-6)
    ours = result.summary.tokens_per_s_per_gpu.median
    ordered = sorted(steps[2:])  # 498 values -> median is the mean of the 249th and 250th
    expected = (16384 / ordered[248] + 16384 / ordered[249]) / 2  # 64 x 2048 / t / 8
    assert ours == pytest.approx(expected, rel=1e-12)
    notes = result.provenance.notes
    key = "legacy performance_metrics.tokens_per_second_per_gpu"
    per_gpu = [n for n in notes if n.startswith(key)]
    assert len(per_gpu) == 1
    assert f"= 4779.39 disagrees with {ours:.6g}" in per_gpu[0]
    assert "it is 4779.39 (agrees)" in per_gpu[0]
    # total_time_seconds is wall time in the callback: not the sum of the step times
    total = [n for n in notes if "total_time_seconds" in n]
    assert total == [
        f"legacy performance_metrics.total_time_seconds = 1779.25 disagrees with "
        f"{sum(steps):.6g} (sum of the 500 recorded step times)"
    ]


def test_primus_file_learning_rates_not_aligned_and_status():
    result = convert_legacy(AMD)
    assert len(result.iterations) == 500
    assert all(r.lr is None for r in result.iterations)  # 499 learning rates for 500 steps
    assert result.iterations[0].loss == 11.89548 and result.iterations[-1].loss == 0.00444
    assert any("499 learning rates for 500 step times" in n for n in result.provenance.notes)
    assert result.run.status == "completed"
    assert result.run.backend == "amd_primus" and result.run.framework == "Primus"
    assert result.hardware.device_name == "AMD Instinct MI300X"
    assert result.hardware.source == "legacy result"
    assert result.software.rocm == "7.1.0"
    # 64 x 2048 / 8 = 16384 tokens per GPU per step; median over iterations 3..500
    steps = json.loads(AMD.read_text())["step_times"][2:]
    ordered = sorted(steps)
    assert result.summary.tokens_per_s_per_gpu.median == pytest.approx(
        (16384 / ordered[248] + 16384 / ordered[249]) / 2, rel=1e-12
    )


def test_nvd_losses_and_learning_rates_aligned():
    result = convert_legacy(NVD)
    data = json.loads(NVD.read_text())
    assert [r.lr for r in result.iterations] == data["learning_rates"]
    assert [r.loss for r in result.iterations] == data["loss_values"]
    assert result.summary.final_loss == data["loss_values"][-1]


def test_precision_unknown_gives_no_mfu_but_tflops():
    result = convert_legacy(NVD)
    assert result.config.precision is None
    assert result.summary.mfu is None and result.summary.peak_tflops is None
    assert result.summary.tflops_per_gpu is not None
    with_bf16 = convert_legacy(NVD, LegacyOptions(precision="bf16"))
    assert with_bf16.summary.mfu == pytest.approx(with_bf16.summary.tflops_per_gpu / 989.4)


def test_nan_loss_and_zero_lr_kept_and_partial_status(tmp_path):
    data = json.loads(NVD.read_text())
    data["loss_values"][10] = math.nan
    data["learning_rates"][0] = 0.0
    data["step_times"] = data["step_times"][:400]
    data["loss_values"] = data["loss_values"][:400]
    data["learning_rates"] = data["learning_rates"][:400]
    path = tmp_path / "train_nvd_nemo_llama.json"
    path.write_text(json.dumps(data))  # the bare NaN token, as the earlier scripts wrote it
    result = convert_legacy(path)
    assert math.isnan(result.iterations[10].loss)
    assert result.iterations[0].lr == 0.0
    assert result.run.status == "partial"  # 400 steps recorded, max_steps 500
    assert any("400 step times recorded for max_steps 500" in n for n in result.provenance.notes)
    assert any("non-finite loss kept at iterations [11]" in n for n in result.provenance.notes)
    written = write_result(result, tmp_path / "out" / "r.json")
    assert json.loads(written.read_text())["iterations"]["loss"][10] == "NaN"
    again = load_result(written)
    assert math.isnan(again.iterations[10].loss) and again.iterations[0].lr == 0.0


def test_round_trip_through_schema(tmp_path):
    for path in (CUDA, AMD, NVD):
        result = convert_legacy(path)
        written = write_result(result, tmp_path / f"{result.run.id}.json")
        assert dumps_result(load_result(written)) == dumps_result(result)


def test_renamed_file_recognised_by_content(tmp_path):
    copy = tmp_path / "something.json"
    shutil.copy(CUDA, copy)
    result = convert_legacy(copy)
    assert result.run.platform == "nvidia"
    assert result.summary.measured_iterations == 8


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"schema_version": 1}', "already a tprimat result"),
        ('{"platform": "amd"}', "not a result of the earlier tprimat scripts"),
        ("{not json", "corrupt JSON"),
    ],
)
def test_unusable_files_are_refused(tmp_path, content, message):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(LegacyError, match=message):
        convert_legacy(path)


def test_load_legacy_keeps_nan_token(tmp_path):
    path = tmp_path / "benchmark_rocm_llama.json"
    path.write_text('{"raw_step_times": [1.0, NaN]}')
    assert math.isnan(load_legacy(path)["raw_step_times"][1])


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.floats(min_value=0.01, max_value=100.0), min_size=3, max_size=40),
    gbs=st.integers(min_value=1, max_value=512),
    seq=st.sampled_from([512, 2048, 4096, 8192]),
    gpus=st.sampled_from([1, 2, 4, 8, 16]),
    extra_steps=st.integers(min_value=0, max_value=3),
    nan_at=st.integers(min_value=0, max_value=2),
)
def test_any_train_file_recomputes_throughput(steps, gbs, seq, gpus, extra_steps, nan_at):
    import statistics
    import tempfile

    losses = [1.0] * len(steps)
    losses[nan_at] = math.nan
    data = {
        "platform": "amd",
        "gpu_info": {
            "device_count": gpus,
            "device_name": "AMD Instinct MI300X",
            "total_memory_gb": 206.14165,
            "software_stack": "prim",
        },
        "training_config": {
            "max_steps": len(steps) + extra_steps,
            "global_batch_size": gbs,
            "micro_batch_size": 1,
            "sequence_length": seq,
            "num_gpus": gpus,
        },
        "performance_metrics": {"tokens_per_second_per_gpu": 1.0},
        "step_times": steps,
        "loss_values": losses,
        "learning_rates": [0.0] * len(steps),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_amd_prim_llama.json"
        path.write_text(json.dumps(data))
        result = convert_legacy(path)
    expected = statistics.median(gbs * seq / t / gpus for t in steps[2:])
    assert result.summary.tokens_per_s_per_gpu.median == pytest.approx(expected, rel=1e-9)
    assert result.run.status == ("completed" if extra_steps == 0 else "partial")
    assert math.isnan(result.iterations[nan_at].loss)
    assert all(r.lr == 0.0 for r in result.iterations)
    if not math.isclose(1.0, expected, rel_tol=1e-3):
        assert any(
            n.startswith("legacy performance_metrics.tokens_per_second_per_gpu = 1 ") for n in result.provenance.notes
        )
