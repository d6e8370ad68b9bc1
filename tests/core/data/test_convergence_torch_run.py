"""A convergence run end to end on CPU: prepare-data, train to a loose target, MLPerf log."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from tiny_corpus import write_jsonl

from tprimat.cli import cli
from tprimat.data.pipeline import PrepareOptions, prepare
from tprimat.result.schema import load_result

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

RULESET = "6.1.0"  # the newest training ruleset of mlperf-logging 4.1.68
TARGET = 4.6  # ln(4096) = 8.3 at initialisation; a loose target the tiny model passes in seconds


def convergence_run(tmp_path, documents, tokenizer, run_id, *extra):
    """One ``tprimat run`` of the torch backend in convergence mode on a freshly prepared dataset."""
    source = write_jsonl(tmp_path / "in" / "books.jsonl", documents)
    if not (tmp_path / "data").exists():
        prepare(
            PrepareOptions(
                model="llama3.1-tiny", input=source, tokenizer=str(tokenizer), output=tmp_path / "data", workers=1
            )
        )
    dataset_dir = next((tmp_path / "data").rglob("dataset.json")).parent
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--backend",
            "torch",
            "--model",
            "llama3.1-tiny",
            "--output",
            str(tmp_path / "runs"),
            "--run-id",
            run_id,
            "--set",
            f'data.dataset="{dataset_dir}"',
            "--set",
            "training.seq_length=32",
            "--set",
            "training.global_batch_size=8",
            "--set",
            "training.lr=3e-3",
            "--set",
            "training.min_lr=3e-4",
            "--set",
            "precision.dtype=fp32",
            "--set",
            "convergence.enabled=true",
            "--set",
            "convergence.eval_interval_samples=32",
            "--set",
            "convergence.eval_sequences=16",
            "--set",
            "convergence.validation_fraction=0.1",
            "--set",
            f"convergence.target_log_perplexity={TARGET}",
            "--set",
            "convergence.max_samples=4000",
            *extra,
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "runs" / run_id


@pytest.fixture(scope="module")
def converged(tmp_path_factory, documents, llama_like_tokenizer):
    return convergence_run(tmp_path_factory.mktemp("conv"), documents, llama_like_tokenizer, "conv")


def test_convergence_run_reaches_the_target(converged):
    run = load_result(converged / "result.json")
    summary = run.convergence
    assert run.run.status == "completed", run.provenance.notes
    assert summary is not None and summary.reached, run.evaluations
    assert summary.target_log_perplexity == TARGET
    evals = run.evaluations
    assert len(evals) == summary.evaluations >= 2
    # Every 32 samples = 4 iterations of 8; the last evaluation is the first at the target.
    assert [e.samples for e in evals] == [32 * (i + 1) for i in range(len(evals))]
    assert [e.iteration for e in evals] == [4 * (i + 1) for i in range(len(evals))]
    assert all(e.tokens == e.samples * 32 for e in evals)
    assert evals[-1].eval_loss <= TARGET < min(e.eval_loss for e in evals[:-1])
    assert evals[0].eval_loss > evals[-1].eval_loss
    assert summary.samples_to_target == evals[-1].samples == len(run.iterations) * 8
    assert summary.time_to_target_s == evals[-1].time_s
    times = [e.time_s for e in evals]
    assert times == sorted(times) and times[0] > 0
    # The clock runs from run start: it covers the training steps (evaluations included).
    assert summary.time_to_target_s >= sum(r.step_time_s for r in run.iterations) * 0.99
    assert summary.init_time_s > 0 and summary.run_time_s >= summary.time_to_target_s
    assert all(e.eval_sequences == 16 for e in evals)


def compliance_failures(log, tmp_path, division: str) -> set[str]:
    """The rules MLPerf's own compliance checker reports as failed for ``log``."""
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            RULESET,
            "--log_output",
            str(tmp_path / "checker.log"),
            str(log),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    output = checked.stdout + checked.stderr
    # The benchmark's own rules were applied, not only the common ones.
    assert f"Compliance checks: training_{RULESET}/{division}_llama31_8b.yaml" in output, output
    failed = set(re.findall(r"CHECK for '(\w+)' failed", output))
    failed |= {f"{key}: {rule.strip()}" for key, rule in re.findall(r"Failed checks for (\w+) : (.*)", output)}
    failed |= {f"missing {key}" for key in re.findall(r"Required \w+ occurrence of '(\w+)'", output)}
    for trouble in ("Failed executing", "No log lines detected", "parsing errors", "Could not find config file"):
        if trouble in output:
            failed.add(trouble)
    assert (checked.returncode == 0) == (not failed), output
    return failed


def test_mlperf_log_passes_the_checker_except_the_target(converged, tmp_path):
    """Open division, llama31_8b, ruleset 6.1.0: every rule passes but the open target (< 1.0)."""
    pytest.importorskip("mlperf_logging")
    failed = compliance_failures(converged / "mlperf.log", tmp_path, "open")
    assert failed == {"eval_accuracy: v['value'] < 1.0"}


def test_budget_stops_a_run_that_misses_its_target(tmp_path, documents, llama_like_tokenizer):
    """Closed division: only the reference's fixed hyper-parameters and target fail the checker."""
    pytest.importorskip("mlperf_logging")
    run_dir = convergence_run(
        tmp_path,
        documents,
        llama_like_tokenizer,
        "short",
        "--set",
        "convergence.max_samples=40",
        "--set",
        "convergence.target_log_perplexity=0.5",
        "--set",
        'convergence.mlperf_division="closed"',
    )
    run = load_result(run_dir / "result.json")
    assert not run.convergence.reached and run.convergence.time_to_target_s is None
    assert len(run.iterations) == 5  # ceil(40 / 8)
    assert [e.samples for e in run.evaluations] == [32, 40]  # the budget's end is evaluated too
    lines = (run_dir / "mlperf.log").read_text().splitlines()
    stop = json.loads(next(line for line in lines if '"run_stop"' in line).split(":::MLLOG", 1)[1])
    assert stop["metadata"]["status"] == "aborted"
    failed = compliance_failures(run_dir / "mlperf.log", tmp_path, "closed")
    assert failed == {
        "max_sequence_length",
        "max_steps",
        "eval_samples",
        "opt_learning_rate_decay_steps",
        "opt_adamw_epsilon",
        "eval_accuracy: (v['value'] <= 3.3) and v['value'] > 0.0",
    }
