"""Time to train in comparison reports, from real CPU convergence runs (fixtures/compare/torch_cpu_convergence)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tprimat.compare.convergence import convergence_blocks, convergence_of
from tprimat.compare.model import MismatchError, build_comparison
from tprimat.compare.report import write_report
from tprimat.settings.config import load_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "compare"
CONVERGENCE = FIXTURES / "torch_cpu_convergence"
COST = load_config().cost


def test_time_to_target_per_system_with_intervals():
    comparison = build_comparison([CONVERGENCE], cost=COST)
    found = {s.label: s for s in convergence_of(comparison)}
    assert len(found) == 2
    for system in comparison.systems:
        runs = [r.result for r in comparison.runs_of(system.label)]
        times = [r.convergence.time_to_target_s for r in runs]
        entry = found[system.label]
        assert (entry.runs, entry.reached, entry.targets) == (2, 2, [4.6])
        assert entry.time_to_target_s.median == pytest.approx(statistics.median(times))
        assert entry.time_to_target_s.ci_low <= entry.time_to_target_s.median <= entry.time_to_target_s.ci_high
        assert sorted(entry.samples_to_target.values) == sorted(r.convergence.samples_to_target for r in runs)


def test_report_has_the_section_the_curves_and_the_json(tmp_path):
    pytest.importorskip("matplotlib")
    comparison = build_comparison([CONVERGENCE], cost=COST)
    written = write_report(comparison, tmp_path)
    assert {"loss_vs_tokens.png", "eval_vs_time.png"} <= set(written)
    markdown = (tmp_path / "report.md").read_text()
    assert "## Time to train" in markdown and "| 2/2 | 4.6 |" in markdown
    data = json.loads((tmp_path / "report.json").read_text())
    assert {entry["reached"] for entry in data["convergence"]} == {2}


def test_throughput_runs_get_no_section_and_do_not_group_with_convergence_runs():
    throughput = build_comparison([FIXTURES / "torch_cpu"], cost=COST)
    assert convergence_of(throughput) == [] and convergence_blocks(throughput, {}) == []
    with pytest.raises(MismatchError, match="measured_iterations|dataset"):
        build_comparison([FIXTURES / "torch_cpu", CONVERGENCE], cost=COST)


def test_validation_lines_without_a_target_give_no_time_to_train(tmp_path):
    """Megatron-LM's 4xA800 log has validation lines but sets no target: no runs 'missing' it."""
    from click.testing import CliRunner

    from tprimat.cli import cli

    log = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "megatron"
    log = log / "mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    out = tmp_path / "runs"
    out.mkdir()
    done = CliRunner().invoke(cli, ["parse", str(log), "-o", str(out / "result.json")])
    assert done.exit_code == 0, done.output
    comparison = build_comparison([out], cost=COST)
    assert any(run.result.evaluations for run in comparison.runs)
    assert convergence_of(comparison) == [] and convergence_blocks(comparison, {}) == []


def test_training_curve_counts_the_tokens_the_log_says_were_trained():
    """Batch-size ramp-up (8, 16, then 32 sequences): iteration × the final batch would overstate."""
    import attrs

    from tests.core.test_schema import make_result
    from tprimat.compare.convergence import training_loss_by_tokens
    from tprimat.result.schema import IterationRecord

    consumed = [8, 24, 56, 88]
    records = [
        IterationRecord(iteration=i, tokens=32 * 1024, loss=10.0 - i, consumed_samples=samples)
        for i, samples in enumerate(consumed, 1)
    ]
    records.append(IterationRecord(iteration=5, tokens=32 * 1024, loss=float("nan"), consumed_samples=120))
    records.append(IterationRecord(iteration=6, tokens=32 * 1024, loss=4.0))  # no consumed samples logged
    base = make_result()
    result = attrs.evolve(base, config=attrs.evolve(base.config, seq_length=1024), iterations=records)
    assert training_loss_by_tokens(result) == [
        (8 * 1024, 9.0),
        (24 * 1024, 8.0),
        (56 * 1024, 7.0),
        (88 * 1024, 6.0),
        (6 * 32 * 1024, 4.0),
    ]
