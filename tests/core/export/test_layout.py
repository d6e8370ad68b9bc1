"""A result laid out for trackers carries the result's own values, under one name each."""

from __future__ import annotations

import json
import math
import shlex
from datetime import UTC, datetime

import attrs
import pytest

from tests.core.export.trackers import H200, H200_OOM, ROOT, SUITE
from tprimat.compare.load import load_runs
from tprimat.contract.exporter import as_text
from tprimat.export.layout import tracker_run
from tprimat.result.schema import Stats, load_result
from tprimat.running.manifest import load_manifest


@pytest.fixture(scope="module")
def h200():
    result = load_result(H200 / "result.json")
    return result, tracker_run(result, H200 / "result.json")


def test_config_is_flattened_with_dotted_keys_and_lists_as_json(h200):
    result, run = h200
    assert run.params["config.model"] == "llama3.1-8b"
    assert run.params["config.settings.training.seq_length"] == 2048
    assert run.params["config.settings.parallel.sequence_parallel"] is False
    assert run.params["config.layers"] == json.dumps(result.config.layers)
    assert run.params["config.preset"] is None and as_text(None) == "null"
    assert all(not isinstance(value, dict | list) for value in run.params.values())


def test_facts_hold_hardware_versions_provenance_and_the_manifest(h200):
    result, run = h200
    manifest = load_manifest(H200 / "manifest.json")
    assert run.facts["hardware.device_name"] == "NVIDIA H200"
    assert run.facts["software.torch"] == result.software.torch
    assert run.facts["software.extra.transformers"] == "5.17.0"
    assert run.facts["provenance.parser"] == "torch.parse_metrics"
    assert json.loads(run.facts["provenance.notes"]) == result.provenance.notes
    assert run.facts["manifest.command"] == shlex.join(manifest.command)
    assert run.facts["environment.CUDA_VERSION"] == manifest.environment["CUDA_VERSION"]
    assert run.facts["summary.flops_formula"] == result.summary.flops_formula
    assert run.facts["run.status"] == "completed" and run.status == "completed"
    assert "hardware.partition" not in run.facts  # unknown values are left out, not written as "None"
    assert run.labels == ("torch", "llama3.1-8b", "nvidia", "NVIDIA H200", "completed")


def test_series_are_the_iteration_records_keyed_by_iteration(h200):
    result, run = h200
    for name in ("step_time_s", "tokens_per_s_per_gpu", "loss", "lr", "mem_max_allocated_gib", "energy_j"):
        expected = [(r.iteration, getattr(r, name)) for r in result.iterations if getattr(r, name) is not None]
        assert run.series[name] == expected, name
    assert "mem_rss_gib" not in run.series  # a quantity the run did not measure has no series
    first = result.iterations[0]
    assert first.timestamp == "2026-11-27T18:58:54.364921+00:00"
    assert run.wall_times[first.iteration] == datetime(2026, 11, 27, 18, 58, 54, 364921, tzinfo=UTC).timestamp()


def test_measured_marks_the_iterations_the_statistics_count(h200):
    _, run = h200
    measured = dict(run.series["measured"])
    assert [i for i, flag in measured.items() if not flag] == [1, 2, 3, 4, 5]  # warm-up 1-2, profiled 3-5


def test_measured_agrees_with_every_fixture_result_summary():
    loaded = load_runs([ROOT / "tests" / "fixtures"])
    assert len(loaded.runs) >= 8
    for entry in loaded.runs:
        run = tracker_run(entry.result, entry.path)
        counted = sum(flag for _, flag in run.series.get("measured", []))
        assert counted == entry.result.summary.measured_iterations, entry.path


def test_summary_is_the_result_summary_as_written(h200):
    result, run = h200
    summary = result.summary
    for name in ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu"):
        stats = getattr(summary, name)
        for field in attrs.fields(Stats):
            assert run.summary[f"summary/{name}/{field.name}"] == getattr(stats, field.name)
    for name in ("mfu", "tflops_per_gpu", "mamf_utilisation", "energy_per_token_j", "final_loss"):
        assert run.summary[f"summary/{name}"] == getattr(summary, name)
    assert run.summary["summary/measured_iterations"] == 25
    assert run.summary["memory/measured_peak_allocated_gib"] == result.memory.measured_peak_allocated_gib
    assert all(isinstance(value, float) for value in run.summary.values())


def test_a_suite_of_results_lays_out_one_run_each():
    loaded = load_runs([SUITE])
    runs = [tracker_run(entry.result, entry.path) for entry in loaded.runs]
    assert sorted(run.run_id for run in runs) == sorted(path.parent.name for path in SUITE.glob("*/result.json"))
    for run, entry in zip(runs, loaded.runs, strict=True):
        assert run.params["config.settings.training.seq_length"] == 128
        assert run.facts["run.platform"] == "cpu" and run.facts["software.torch"] == "2.13.0+cpu"
        assert run.facts["manifest.command"].startswith("tprimat run --backend torch")
        assert run.params["config.world_size"] == entry.result.config.world_size
        assert run.series["mem_rss_gib"]  # a CPU run measures the host process's memory


def test_a_failed_run_keeps_what_it_measured():
    path = H200_OOM / "result.json"
    result = load_result(path)
    run = tracker_run(result, path)
    assert run.status == "failed"
    assert [step for step, _ in run.series.get("step_time_s", [])] == [
        r.iteration for r in result.iterations if r.step_time_s is not None
    ]
    assert all(not math.isinf(value) for value in run.summary.values())
