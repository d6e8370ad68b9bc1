"""Golden test: the ROCm fork of Megatron-LM (srun prefixes, ``mem usages``, versions)."""

from __future__ import annotations

import pytest

from tests.plugins.logfixtures import LOGS, collect, events_of, facts_of, timed
from tprimat.plugins.amd_megatron.parse import parse_rocm_megatron

NAME = "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log"


def test_golden():
    collector = collect(parse_rocm_megatron, LOGS / NAME)
    records = timed(collector)
    assert [r.iteration for r in records] == list(range(1, 11))
    assert records[0].step_time_s == pytest.approx(57.6727)
    assert records[0].loss == pytest.approx(12.57728)
    assert records[-1].step_time_s == pytest.approx(2.8614)
    assert records[-1].loss == pytest.approx(12.60071)
    assert records[0].reported["mem_usage_ratio"] == 0.7524
    assert records[1].reported["mem_usage_ratio"] == 0.7779
    assert records[0].mem_max_reserved_gib == pytest.approx(138508.0 / 1024)
    assert collector.issue_count == 0


def test_facts_from_arguments_and_versions():
    facts = facts_of(events_of(parse_rocm_megatron, LOGS / NAME))
    assert (facts["world_size"], facts["global_batch_size"], facts["seq_length"]) == (8, 80, 2048)
    assert facts["micro_batch_size"] == 5
    assert facts["rocm_version"] == "6.1.0.0-82-5fabb4c"
    assert facts["hip_version"] == "6.1.40091-a8dbc0c19"
    assert facts["collectives"] == "RCCL 2.20.5-develop:c246e25"
