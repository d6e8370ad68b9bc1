"""What the recorded CPU convergence runs (fixtures/compare/torch_cpu_convergence) show about the trainer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.result.schema import load_result

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "compare" / "torch_cpu_convergence"


@pytest.mark.parametrize("repeat", ["r1", "r2"])
def test_evaluation_split_over_two_ranks_equals_one_rank(repeat):
    """Same seed, same data: the held-out loss summed over two ranks' shards is the one-rank loss."""
    one = load_result(RUNS / f"torch-cpu-llama3.1-tiny-convergence-1proc-{repeat}" / "result.json")
    two = load_result(RUNS / f"torch-cpu-llama3.1-tiny-convergence-2proc-{repeat}" / "result.json")
    assert [p.samples for p in one.evaluations] == [p.samples for p in two.evaluations]
    for a, b in zip(one.evaluations, two.evaluations, strict=True):
        assert a.eval_loss == pytest.approx(b.eval_loss, abs=1e-5)
    assert one.convergence.samples_to_target == two.convergence.samples_to_target


def test_every_run_stopped_at_its_first_evaluation_under_the_target():
    for path in sorted(RUNS.glob("*/result.json")):
        result = load_result(path)
        losses = [p.eval_loss for p in result.evaluations]
        target = result.convergence.target_log_perplexity
        assert losses[-1] <= target < min(losses[:-1]), path
        assert result.iterations[-1].iteration == result.evaluations[-1].iteration


def test_parsing_the_log_again_gives_the_runs_own_summary():
    """The core computes the same convergence figures from the log as the live run did."""
    from tprimat.contract.registry import Registry
    from tprimat.parse.logs import parse_logs
    from tprimat.settings.config import load_config

    run = RUNS / "torch-cpu-llama3.1-tiny-convergence-2proc-r1"
    outcome = parse_logs(
        [str(run / "logs" / "launcher.log")],
        registry=Registry.from_environment(),
        backend="torch",
        config=load_config(run / "config.toml"),
        config_label="config.toml",
    )
    live = load_result(run / "result.json")
    assert outcome.result.convergence == live.convergence
    assert [(p.samples, p.time_s, p.eval_loss) for p in outcome.result.evaluations] == [
        (p.samples, p.time_s, p.eval_loss) for p in live.evaluations
    ]


def test_iterations_sit_on_the_run_clock():
    from tprimat.compare.convergence import _training_on_clock

    for path in sorted(RUNS.glob("*/result.json")):
        result = load_result(path)
        points = _training_on_clock(result)
        assert len(points) == len(result.iterations), path
        times = [t for t, _ in points]
        # every iteration ends after run start and before the evaluation that follows it
        assert 0 < times[0] and times == sorted(times)
        last_eval = result.evaluations[-1]
        assert times[-1] <= last_eval.time_s <= result.convergence.run_time_s
