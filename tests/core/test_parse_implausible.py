"""Numbers no run can have are refused or flagged where they are read, and nothing crashes on them;
a log that measured nothing is never ``completed``.

Each test is one finding of a fuzzing review, on a real fixture changed in one place (or not at all).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.plugins.logfixtures import LOGS
from tprimat.cli import cli
from tprimat.contract.records import MAX_STEP_TIME_S, ParseIssue
from tprimat.contract.registry import Registry
from tprimat.parse.errors import ParseError
from tprimat.parse.logs import Workload, parse_logs
from tprimat.result.collect import EventCollector, implausible
from tprimat.result.metrics import describe
from tprimat.result.schema import IterationRecord

BRIDGE = LOGS / "bridge/cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log"
FULL15 = LOGS / "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
LAUNCHER = LOGS / "nemo/cloudai-test_nemo-launcher_2025-03-04_perf_metrics_utils_snippet.log"
NEMO_RUN = LOGS / "nemo/cloudai-test_nemo-run_12iter_snippet.log"


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def changed(tmp_path: Path, fixture: Path, old: str, new: str, count: int = 1) -> Path:
    """A copy of ``fixture`` with ``old`` replaced by ``new`` (``count`` times, -1: everywhere)."""
    text = fixture.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / fixture.name
    path.write_text(text.replace(old, new, count), encoding="utf-8")
    return path


# -- measured nothing ------------------------------------------------------------------------


def test_the_unmodified_bridge_fixture_is_not_completed(registry):
    """One iteration line, and it is warm-up: the log holds iterations but measures nothing."""
    outcome = parse_logs([BRIDGE], registry=registry)
    result = outcome.result
    assert result.summary.measured_iterations == 0
    assert result.run.status == "partial"
    assert any(note.startswith("nothing measured") for note in result.provenance.notes)
    assert any(warning.startswith("nothing measured") for warning in outcome.warnings)


def test_tprimat_parse_says_so_and_marks_the_result(tmp_path):
    out = tmp_path / "result.json"
    done = CliRunner().invoke(cli, ["parse", str(BRIDGE), "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "warning: nothing measured" in done.stderr and "status: partial" in done.stdout
    assert '"status": "partial"' in out.read_text()


# -- non-finite, absurd and negative numbers -----------------------------------------------------


def test_1e308_step_times_do_not_overflow_and_are_refused_where_read(registry, tmp_path):
    path = changed(tmp_path, LAUNCHER, "2.14", "1e308", 2)
    result = parse_logs([path], registry=registry).result  # was OverflowError: intermediate overflow in fsum
    assert result.summary.step_time_s.max < 12
    assert sum("step time 1e+308 s is longer than a day" in note for note in result.provenance.notes) == 2
    assert result.run.status == "partial"  # two iterations are missing now
    assert "iterations missing from the log" in " ".join(result.provenance.notes)


def test_a_mean_step_time_of_1_9e37_s_is_never_a_result(registry, tmp_path):
    text = LAUNCHER.read_text(encoding="utf-8")
    head, _, values = text.partition("[")
    path = tmp_path / LAUNCHER.name
    path.write_text(head + "[" + re.sub(r"\d+\.\d+", "1.9e37", values))
    with pytest.raises(ParseError, match=r"no training iterations .*1\.9e\+37 s is longer than a day"):
        parse_logs([path], registry=registry)


def test_one_absurd_megatron_step_time_is_skipped_with_its_line(registry, tmp_path):
    path = changed(
        tmp_path, FULL15, "elapsed time per iteration (ms): 3153.5", "elapsed time per iteration (ms): 1.9e40"
    )
    result = parse_logs([path], registry=registry).result
    assert result.summary.step_time_s.max < MAX_STEP_TIME_S
    assert 5 not in [r.iteration for r in result.iterations]
    assert any(
        f"{path.name}:914: elapsed time per iteration is 1.9e+40 ms, not a physical" in n
        for n in result.provenance.notes
    )


def test_a_figure_of_1e308_the_framework_reports_does_not_overflow(registry, tmp_path):
    text = FULL15.read_text(encoding="utf-8")
    path = tmp_path / FULL15.name
    path.write_text(re.sub(r"\(TFLOP/s/GPU\): [\d.]+", "(TFLOP/s/GPU): 1e308", text))
    summary = parse_logs([path], registry=registry).result.summary  # was OverflowError in fmean
    assert summary.reported["tflops_per_gpu"].mean == 1e308 and summary.measured_iterations == 13
    assert describe([1e308, 1e308, 1.5e308]).mean == pytest.approx(1e308 / 3 * 3.5)


def test_a_huge_iteration_number_does_not_overflow(registry, tmp_path):
    path = changed(tmp_path, NEMO_RUN, "global_step: 28", "global_step: 99999999999999999999")
    result = parse_logs([path], registry=registry).result  # was OverflowError: ... C ssize_t
    assert max(r.iteration for r in result.iterations) < 10**9
    assert any(
        "iteration 100000000000000000000 is not a count from 0 to 1000000000" in n for n in result.provenance.notes
    )


def test_a_gap_of_a_billion_iterations_is_noted_as_a_span(registry, tmp_path):
    path = changed(tmp_path, NEMO_RUN, "global_step: 28", "global_step: 999999998")
    result = parse_logs([path], registry=registry, allow_mismatch=True).result  # was a list of a billion numbers
    assert "iterations missing from the log: 29-999999998" in result.provenance.notes


def test_a_negative_sequence_length_the_log_states_is_not_used(registry, tmp_path):
    path = changed(
        tmp_path,
        FULL15,
        "  seq_length ...................................... 2048",
        "  seq_length ...................................... -2048",
    )
    result = parse_logs([path], registry=registry).result  # was ValueError: 'tokens' must be >= 0
    assert result.config.seq_length is None and result.summary.tokens_per_s_per_gpu is None
    assert "the log states seq_length=-2048, not a size from 1 to 16777216: not used" in result.provenance.notes


def test_a_sequence_length_past_the_limit_on_the_command_line_is_refused():
    done = CliRunner().invoke(cli, ["parse", str(FULL15), "--seq-length", "99999999999"])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert "--seq-length 99999999999: must be a whole number from 1 to 16777216" in done.stderr


# -- where records are collected --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"step_time_s": float("inf")}, "step time inf s is not a finite number"),
        ({"step_time_s": 1.9e37}, "step time 1.9e+37 s is longer than a day"),
        ({"iteration": 10**10}, "iteration 10000000000 is not a count from 0 to 1000000000"),
        ({"consumed_samples": -1}, "consumed samples -1 is not a count"),
        ({"global_batch_size": 0}, "global batch size 0 is not a count from 1"),
        ({"mem_max_reserved_gib": float("nan")}, "mem_max_reserved_gib nan is not a memory figure"),
        ({"energy_j": -5.0}, "energy -5.0 J is not an energy"),
    ],
)
def test_the_collector_refuses_a_record_no_run_can_have_and_names_its_line(fields, message):
    record = IterationRecord(**{"iteration": 3, "step_time_s": 0.5, "source": "train.log:7", **fields})
    assert message in implausible(record)
    collector = EventCollector()
    assert collector.add(record) is None and not collector.records
    assert collector.issues == [ParseIssue(source="train.log:7", message=implausible(record))]


def test_a_nan_loss_is_a_measurement_and_is_kept():
    record = IterationRecord(iteration=3, step_time_s=0.5, loss=float("nan"), grad_norm=float("inf"))
    assert implausible(record) is None
    assert EventCollector().add(record) is record


def test_the_summary_leaves_out_step_times_it_is_given_that_cannot_be_physical(registry):
    from tprimat.result.metrics import summarize

    records = [IterationRecord(iteration=i, step_time_s=t) for i, t in enumerate((1.0, 1.0, 1.0, 2e5, 1.0), 1)]
    summary, notes = summarize(
        records, model=None, seq_length=None, world_size=None, precision=None, device_name=None, warmup_iterations=1
    )
    assert summary.measured_iterations == 3 and summary.step_time_s.max == 1.0
    assert any("left out iterations 4" in note and "longer than a day" in note for note in notes)


def test_workload_values_from_code_keep_the_limits():
    with pytest.raises(Exception, match="--world-size 0"):
        Workload(world_size=0)
