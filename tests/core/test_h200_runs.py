"""tprimat's own runs on one NVIDIA H200 (``tests/fixtures/h200``, made by ``bench/gpu_node.sh``).

What the GPU measured checks what tprimat predicts and reads without one:

* the memory estimator against the allocator peak of the run that fit, and against the two
  runs that ran out of memory (the CUDA message says how much was allocated when they did);
* the capacity table against the capacity CUDA reported;
* ``tprimat parse`` of the run's log against the result the run wrote on the GPU machine;
* ``tprimat trace analyze`` here against the analysis made there of the same trace.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.memory import estimate_memory, find_capacity
from tprimat.parse.logs import parse_logs
from tprimat.plugins.torch.protocol import parse_lines
from tprimat.result.schema import IterationRecord, load_result
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model
from tprimat.trace.analyze import analyze_paths

H200 = Path(__file__).parents[1] / "fixtures" / "h200"
FIT = H200 / "llama3.1-8b_seq2048_gbs1"
#: Runs that fit, one micro-batch a step each (the one above is profiled and has a trace).
FITTED = [FIT, H200 / "llama3.1-8b_seq4096_gbs1", H200 / "qwen2.5-7b_seq2048_gbs1"]
OUT_OF_MEMORY = [H200 / "llama3.1-8b_seq2048_gbs4_oom", H200 / "llama3.1-8b_seq4096_gbs4_oom"]

_OOM = re.compile(
    r"Tried to allocate (?P<request>[\d.]+) MiB\. GPU 0 has a total capacity of (?P<capacity>[\d.]+) GiB"
    r".*?Of the allocated memory (?P<allocated>[\d.]+) GiB is allocated by PyTorch"
)


def _estimate(run: Path):
    config = load_config(run / "config.toml")
    return estimate_memory(config, get_model(config.benchmark.model), device="NVIDIA H200", trainer="pytorch")


def _out_of_memory(run: Path) -> dict[str, float]:
    found = _OOM.search((run / "launcher.log").read_text(encoding="utf-8"))
    assert found, run.name
    return {key: float(value) for key, value in found.groupdict().items()}


def _measured_peak(run: Path) -> float:
    text = (run / "launcher.log").read_text(encoding="utf-8").splitlines()
    records = [event for event in parse_lines(text, "launcher.log") if isinstance(event, IterationRecord)]
    assert records
    return max(r.mem_max_allocated_gib for r in records if r.mem_max_allocated_gib is not None)


def test_the_capacity_table_holds_what_cuda_reported_for_the_h200():
    for run in OUT_OF_MEMORY:
        assert find_capacity("NVIDIA H200").capacity_gib == pytest.approx(_out_of_memory(run)["capacity"], abs=0.005)


@pytest.mark.parametrize("run", FITTED, ids=lambda run: run.name)
def test_the_estimate_of_a_run_that_fit_covers_its_measured_peak_closely(run):
    estimate = _estimate(run)
    measured = _measured_peak(run)
    assert estimate.fits
    assert measured <= estimate.allocated_gib <= measured * 1.06
    # One micro-batch a step: autocast's weight copies never meet the gradients, and are not counted.
    assert any("autocast" in note for note in estimate.notes)


@pytest.mark.parametrize("run", OUT_OF_MEMORY, ids=lambda run: run.name)
def test_the_estimate_says_the_runs_that_ran_out_of_memory_do_not_fit(run):
    estimate = _estimate(run)
    failed = _out_of_memory(run)
    assert estimate.fits is False
    # The estimate holds at least what was allocated, and asked for, when the allocation failed.
    assert estimate.allocated_gib >= failed["allocated"] + failed["request"] / 1024
    assert "autocast" in estimate.formulas["parameters"]
    assert not any("recompute" in remedy for remedy in estimate.remedies)  # it already recomputes


def test_parsing_the_runs_log_gives_the_result_the_run_wrote():
    live = load_result(FIT / "result.json")
    outcome = parse_logs(
        [FIT / "launcher.log"],
        registry=Registry.from_environment(),
        config=load_config(FIT / "config.toml"),
        manifest_path=FIT / "manifest.json",
        workers=1,
    )
    parsed = outcome.result
    assert outcome.backend == "torch"
    assert parsed.hardware == live.hardware
    assert [(r.iteration, r.tokens_per_s_per_gpu) for r in parsed.iterations] == [
        (r.iteration, r.tokens_per_s_per_gpu) for r in live.iterations
    ]
    for field in ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "mamf_tflops"):
        assert getattr(parsed.summary, field) == getattr(live.summary, field), field


def test_the_trace_analysis_here_is_the_one_made_on_the_gpu_machine():
    (there,) = json.loads((FIT / "trace-analysis.json").read_text(encoding="utf-8"))["ranks"]
    (here,) = analyze_paths([str(FIT / "rank-0.pt.trace.json.gz")], workers=1)
    assert here["device"] == there["device"] == "NVIDIA H200"
    for key in ("window", "activities", "temporal", "busy_us", "categories", "communication"):
        assert json.loads(json.dumps(here[key])) == there[key], key


def test_compare_refuses_the_h200_runs_of_two_sequence_lengths_and_names_the_difference(tmp_path):
    from click.testing import CliRunner

    from tprimat.cli import cli

    results = [str(H200 / name / "result.json") for name in ("llama3.1-8b_seq2048_gbs1", "llama3.1-8b_seq4096_gbs1")]
    refused = CliRunner().invoke(cli, ["compare", *results, "-o", str(tmp_path / "refused")])
    assert refused.exit_code != 0
    assert "seq_length" in refused.output and "2048" in refused.output and "4096" in refused.output
    shown = CliRunner().invoke(cli, ["compare", *results, "--allow-mismatch", "-o", str(tmp_path / "report")])
    assert shown.exit_code == 0, shown.output
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "H200-SXM" in report and "5,970.9" in report and "5,127.3" in report
    assert "configurations differ" in report
