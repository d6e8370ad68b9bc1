"""A result's memory section: the estimate beside per-rank measured peaks, from real logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tprimat.contract.records import RankPeak
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.plugins.megatron_core.memory_lines import memory_peaks
from tprimat.result.memory import log_rank_peaks, memory_report, monitor_rank_peaks
from tprimat.result.schema import IterationRecord, dumps_result, load_result
from tprimat.running.monitor import GpuReading, Sample
from tprimat.settings.config import load_config

LOGS = Path(__file__).parents[2] / "fixtures" / "logs"
GPT_4RANKS = LOGS / "megatron" / "mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"


def test_parsed_log_records_every_ranks_peak_and_the_rank_that_peaked(tmp_path):
    outcome = parse_logs([GPT_4RANKS], registry=Registry.from_environment(), backend="nvd_megatron")
    memory = outcome.result.memory
    assert memory is not None
    assert memory.per_rank_max_allocated_gib == pytest.approx(
        {
            "0": 3059.67138671875 / 1024,
            "1": 3065.67138671875 / 1024,
            "2": 3081.17138671875 / 1024,
            "3": 3081.67138671875 / 1024,
        }
    )
    assert memory.per_rank_max_reserved_gib["3"] == pytest.approx(3398.0 / 1024)
    assert memory.peak_rank == "3"
    assert memory.measured_peak_allocated_gib == pytest.approx(3081.67138671875 / 1024)
    assert memory.predicted_total_gib is None and "no estimate" in memory.estimator_note
    path = tmp_path / "result.json"
    path.write_text(dumps_result(outcome.result))
    assert load_result(path).memory == memory
    assert json.loads(path.read_text())["memory"]["peak_rank"] == "3"


def test_the_estimate_is_recorded_beside_the_measurement_when_the_config_is_known():
    config = load_config()
    peaks = log_rank_peaks(
        memory_peaks,
        [LOGS / "megatron" / "rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log"],
    )
    report = memory_report(
        settings=config.to_dict(),
        model_name="llama3.1-8b",
        trainer="megatron-core",
        device_name="AMD Instinct MI300X",
        capacity_gib=None,
        records=[],
        rank_peaks=peaks,
    )
    assert set(report.predicted_terms_gib) == {"parameters", "gradients", "optimizer_states", "activations", "overhead"}
    assert report.predicted_total_gib == pytest.approx(sum(report.predicted_terms_gib.values()))
    assert report.fits is True and report.capacity_gib == pytest.approx(191.98, abs=0.01)
    assert report.peak_rank == "0" and report.measured_peak_allocated_gib == pytest.approx(136935.04736328125 / 1024)


def test_records_without_ranks_still_give_the_measured_peak_and_nothing_gives_no_section():
    records = [
        IterationRecord(iteration=1, mem_max_allocated_gib=10.0),
        IterationRecord(iteration=2, mem_max_allocated_gib=12.5),
    ]
    report = memory_report(
        settings={}, model_name="x", trainer="megatron-core", device_name=None, capacity_gib=None, records=records
    )
    assert report.measured_peak_allocated_gib == 12.5 and report.peak_rank is None
    assert (
        memory_report(
            settings={}, model_name="x", trainer="megatron-core", device_name=None, capacity_gib=None, records=[]
        )
        is None
    )


def test_a_live_runs_monitor_samples_give_device_used_per_local_rank(tmp_path):
    samples = [
        Sample(time_s=1.0, gpus=(GpuReading(index=0, mem_used_gib=50.0), GpuReading(index=1, mem_used_gib=61.0))),
        Sample(time_s=2.0, gpus=(GpuReading(index=0, mem_used_gib=70.0), GpuReading(index=1, mem_used_gib=60.0))),
    ]
    peaks = [*log_rank_peaks(memory_peaks, [tmp_path / "missing.log"]), *monitor_rank_peaks(samples)]
    assert peaks == [RankPeak(rank=0, device_used_gib=70.0), RankPeak(rank=1, device_used_gib=61.0)]
    report = memory_report(
        settings={},
        model_name="x",
        trainer="megatron-core",
        device_name=None,
        capacity_gib=None,
        records=[],
        rank_peaks=peaks,
    )
    assert report.peak_rank == "0" and report.measured_peak_device_used_gib == 70.0
