"""`tprimat compare` shows the memory estimate beside the measured peak, per system."""

from __future__ import annotations

import json

import attrs
from compare_helpers import AMD, NVD, imported

from tprimat.compare.model import build_comparison
from tprimat.compare.report import write_report
from tprimat.result.memory import memory_report
from tprimat.result.resultjson import write_result
from tprimat.settings.config import load_config

COST = load_config().cost


def _with_estimate(result):
    """The seed result with its recorded settings (TP1 PP2 DP4, GBS 64, sequence 2048) as a full config."""
    settings = load_config(
        overrides=["parallel.pipeline=2", "training.global_batch_size=64", "training.seq_length=2048"]
    ).to_dict()
    memory = memory_report(
        settings=settings,
        model_name=result.config.model,
        trainer="megatron-core",
        device_name=result.hardware.device_name,
        capacity_gib=result.hardware.memory_per_device_gib,
        records=result.iterations,
        summary=result.summary,
    )
    return attrs.evolve(result, memory=memory)


def test_predicted_beside_measured_memory_per_system(tmp_path):
    results = [_with_estimate(imported(AMD)), _with_estimate(imported(NVD))]
    for result in results:
        write_result(result, tmp_path / "in" / f"{result.run.id}.json")
    comparison = build_comparison([tmp_path / "in"], cost=COST, baseline="H100")
    nemo = comparison.system(comparison.baseline)
    predicted = nemo.predicted_memory["predicted_allocated_gib"].median
    measured = nemo.predicted_memory["measured_peak_allocated_gib"].median
    assert measured == results[1].summary.mem_max_allocated_gib  # the seed run's own measurement
    assert predicted == results[1].memory.predicted_allocated_gib
    written = write_report(comparison, tmp_path / "out", ["md", "json"])
    text = written["report.md"].read_text()
    assert "### Predicted and measured memory" in text
    assert "measured ÷ predicted" in text and f"{measured / predicted:.2f}" in text
    assert f"{predicted:.2f}" in text
    data = json.loads(written["report.json"].read_text())
    assert any("predicted_memory" in s for s in data["systems"])


def test_without_an_estimate_the_measured_peak_stands_alone(tmp_path):
    """A legacy result has no benchmark config to estimate from: measured only, no ratio."""
    import re

    write_result(imported(NVD), tmp_path / "in" / "nvd.json")
    comparison = build_comparison([tmp_path / "in"], cost=COST)
    text = write_report(comparison, tmp_path / "out", ["md"])["report.md"].read_text()
    assert re.search(r"\| 8× H100-SXM · NeMo \| [\d.]+ \(single run\) \|  \|  \|", text), text
