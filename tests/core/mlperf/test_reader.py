"""The MLPerf reader on published v5.1 llama31_8b results, checked against MLPerf's own summarizer."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import attrs
import pytest

from tprimat.mlperf.layout import read_scaling
from tprimat.mlperf.reader import MlperfLogError, is_mllog, olympic_score, read_file, read_run

FIXTURES = Path(__file__).parents[2] / "fixtures" / "mlperf" / "v5.1"
SYSTEMS = ("amd_mi355x", "dell_b200")


def runs_of(system: str):
    return [read_file(path) for path in sorted((FIXTURES / system).glob("result_*.txt"))]


def test_one_published_run():
    run = read_file(FIXTURES / "amd_mi355x" / "result_0.txt")
    assert (run.benchmark, run.org, run.division, run.platform) == ("llama31_8b", "AMD", "closed", "MI355X")
    assert run.status == "success" and run.converged
    # run_start 1759966206549 ms, run_stop in the same file: time to train in seconds
    assert run.time_to_train_s == pytest.approx(5758.137)
    assert run.samples_to_converge == 172032
    assert run.hyperparameters["global_batch_size"] == 32
    assert run.hyperparameters["max_sequence_length"] == 8192
    assert run.hyperparameters["opt_name"] == "adamw"
    assert run.evaluations[0].samples == 12256 and run.evaluations[0].value == pytest.approx(5.595030307769775)
    assert run.evaluations[-1].value <= 3.3 < run.evaluations[-2].value
    # The submitter's own per-block figure (tracked_stats throughput, about 30.6 samples/s) agrees.
    assert run.train_samples_per_s == pytest.approx(30.6, rel=0.01)
    assert run.train_tokens_per_s == pytest.approx(run.train_samples_per_s * 8192)


def test_nemo_block_convention_uses_steps():
    """NVIDIA's callbacks log the block size as samples_count and the step beside it."""
    run = read_file(FIXTURES / "dell_b200" / "result_0.txt")
    assert run.platform == "1xXE9680Lx8B200-SXM-180GB" and run.hyperparameters["global_batch_size"] == 16
    assert run.train_samples_per_s is not None
    # Throughput x time in blocks cannot exceed the samples trained.
    assert run.train_samples_per_s * run.time_to_train_s > run.samples_to_converge * 0.9


@pytest.mark.parametrize("system", SYSTEMS)
def test_olympic_score_equals_mlperf_result_summarizer(system):
    summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")
    ours = olympic_score(runs_of(system))
    with contextlib.redirect_stdout(io.StringIO()):
        official, _, scaling = summarizer._compute_strong_score_standalone(
            "llama31_8b", system, False, str(FIXTURES / system), "training", "5.1.0"
        )
    factor = read_scaling(FIXTURES / system).factor  # amd_mi355x ships scaling.json, dell_b200 none
    assert factor == scaling and ours.runs == ours.converged == 10 and len(ours.dropped) == 2
    # The summarizer's score is the olympic mean times the folder's scaling factor.
    assert ours.score_min * factor == pytest.approx(official, rel=1e-12)


def test_a_failed_run_counts_as_the_slowest():
    runs = runs_of("amd_mi355x")
    fastest = min(runs, key=lambda r: r.time_to_train_s)
    failed = attrs.evolve(fastest, status="aborted")
    others = [r for r in runs if r is not fastest]
    score = olympic_score([*others, failed])
    assert score.converged == 9 and failed.source in score.dropped
    kept = sorted(r.time_to_train_s for r in others)[1:]  # the fastest converged run is dropped too
    assert score.score_s == pytest.approx(sum(kept) / len(kept))
    second = attrs.evolve(others[0], status="aborted")
    assert olympic_score([*others[1:], failed, second]).score_s is None


def test_not_an_mllog(tmp_path):
    plain = tmp_path / "train.log"
    plain.write_text("iteration 1/10 | loss 3.2\n")
    assert not is_mllog(plain) and is_mllog(FIXTURES / "dell_b200" / "result_3.txt")
    with pytest.raises(MlperfLogError, match="no :::MLLOG line"):
        read_file(plain)
    lines = (FIXTURES / "amd_mi355x" / "result_0.txt").read_text().splitlines()
    with pytest.raises(MlperfLogError, match="no run_start"):
        read_run([line for line in lines if '"run_start"' not in line], "cut.txt")


RUNS = Path(__file__).parents[2] / "fixtures" / "compare" / "torch_cpu_convergence"


@pytest.mark.parametrize("run_dir", sorted(RUNS.glob("*/")), ids=lambda p: p.name)
def test_own_log_agrees_with_the_result(run_dir):
    """The MLPerf log a convergence run wrote reads back to the times and samples of its result."""
    from tprimat.result.schema import load_result

    result = load_result(run_dir / "result.json")
    run = read_file(run_dir / "mlperf.log")
    assert run.converged and run.benchmark == "llama31_8b" and run.division == "open"
    assert run.samples_to_converge == result.convergence.samples_to_target
    # MLPerf logs whole milliseconds; the trainer's clock is finer
    assert run.time_to_train_s == pytest.approx(result.convergence.run_time_s, abs=0.01)
    assert run.init_time_s == pytest.approx(result.convergence.init_time_s, abs=0.05)
    assert [e.value for e in run.evaluations] == [p.eval_loss for p in result.evaluations]
    assert [e.samples for e in run.evaluations] == [p.samples for p in result.evaluations]
    assert run.hyperparameters["global_batch_size"] == result.config.global_batch_size


def test_two_runs_leave_no_olympic_score():
    runs = [read_file(p) for p in sorted(RUNS.glob("*1proc*/mlperf.log"))]
    score = olympic_score(runs)
    assert score.score_s is None and "none after dropping" in score.reason


def test_olympic_mean_of_plain_times():
    from tprimat.convergence.olympic import olympic_mean

    assert olympic_mean([5.0, 1.0, 3.0, 4.0]) == (3.5, [1, 0], None)
    assert olympic_mean([2.0, None, 1.0, 3.0]) == (2.5, [2, 1], None)  # the miss is the slowest
    score, dropped, reason = olympic_mean([1.0, 2.0])
    assert score is None and dropped == [] and "none after dropping" in reason
