"""``tprimat tune``'s command line: the plan it prints, bad input, budgets, a reused directory."""

from __future__ import annotations

import itertools

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.tune import Budget, TuneError, open_directory, prepare
from tprimat.tune.search import tune

TINY = ["--backend", "torch", "--model", "llama3.1-tiny", "--set", "training.seq_length=32"]


def invoke(*args: str):
    return CliRunner().invoke(cli, ["tune", *TINY, *args])


def test_dry_run_prints_the_space_and_candidates_simplest_first_and_writes_nothing(tmp_path):
    out = invoke("--dry-run", "--output", str(tmp_path / "t"))
    assert out.exit_code == 0, out.output
    assert "training.micro_batch_size" in out.output and "training.recompute" in out.output
    assert out.output.index("as configured") < out.output.index("micro_batch_size=1")
    assert "6 candidate(s)" in out.output and "at most 15 trial run(s)" in out.output
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--space", "training.seq_length=16,32"], "never tuned"),
        (["--space", "training.nope=1,2"], "unknown config key training.nope"),
        (["--budget", "soon"], "--budget 'soon'"),
        (["--budget", "2"], "too small"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args, words):
    out = invoke(*args, "--dry-run")
    assert out.exit_code == 2, out.output
    assert words in out.output and "Traceback" not in out.output


def test_a_budget_too_small_to_compare_two_candidates_is_refused_with_the_minimum(tmp_path):
    # 6 candidates; 5 trials fit only the config as written (3 repeats): nothing would be compared
    out = invoke("--budget", "5", "--output", str(tmp_path / "t"))
    assert out.exit_code == 2, out.output
    assert "too small to compare two candidates" in out.output and "give --budget 6 or more" in out.output
    assert not (tmp_path / "t").exists()  # refused before anything ran
    out = invoke("--budget", "6", "--dry-run")
    assert out.exit_code == 0 and "2 candidate(s)" in out.output and "4 beyond the budget" in out.output
    # the minimum follows the repeats the last round needs
    out = invoke("--budget", "7", "--repeats", "4", "--dry-run")
    assert out.exit_code == 2 and "give --budget 8 or more" in out.output


def test_a_space_with_a_single_candidate_is_refused():
    out = invoke("--space", "training.micro_batch_size=1", "--space", "training.recompute=none", "--dry-run")
    assert out.exit_code == 2, out.output
    assert "only one candidate is left" in out.output and "Traceback" not in out.output


def test_a_directory_holding_another_search_is_refused(tmp_path):
    registry = Registry.from_environment()
    first = prepare(registry, backend="torch", model="llama3.1-tiny", budget=Budget(trials=24), estimator=None)
    open_directory(first, tmp_path)
    again, _ = open_directory(first, tmp_path)  # the same search reopens
    assert again.spec == first.spec
    other = prepare(
        registry,
        backend="torch",
        model="llama3.1-tiny",
        budget=Budget(trials=24),
        estimator=None,
        space_items=("training.micro_batch_size=1,2",),
    )
    with pytest.raises(TuneError, match="different search"):
        open_directory(other, tmp_path)


def test_a_time_budget_stops_starting_trials_and_says_so(tmp_path):
    registry = Registry.from_environment()
    plan = prepare(registry, backend="torch", model="llama3.1-tiny", budget=Budget(seconds=250), estimator=None)
    plan, _ = open_directory(plan, tmp_path)
    started = []
    ticks = itertools.count(step=100)  # every trial takes 100 s of this clock

    def launcher(argv):
        started.append(argv)
        return 1  # the run failed without a result: recorded, not retried

    outcome = tune(plan.spec, tmp_path, launcher=launcher, clock=lambda: next(ticks))
    assert len(started) == 3  # 0, 100, 200 s spent before each; 300 s >= 250 s stops the fourth
    assert outcome.budget_spent and "ran out" in outcome.decision
    statuses = [outcome.status[c.id] for c in plan.spec.candidates]
    assert statuses.count("failed in round 0") == 3
    assert statuses.count("not run (budget spent)") == 3
    assert outcome.winner is None
    # the time spent is kept: a resumed tune starts no trial either
    again = tune(plan.spec, tmp_path, launcher=launcher, clock=lambda: next(ticks))
    assert len(started) == 3 and again.budget_spent


def test_the_memory_estimator_prunes_before_anything_runs():
    pytest.importorskip("tprimat.memory.estimate")
    registry = Registry.from_environment()
    options = dict(
        backend="nvd_megatron",
        model="llama3.1-8b",
        budget=Budget(trials=500),
        overrides=("launch.nproc_per_node=8", "training.seq_length=8192", "training.global_batch_size=128"),
        space_items=("training.micro_batch_size=1,8", "parallel.tensor=1", "parallel.pipeline=1", "parallel.context=1"),
    )
    roomy = prepare(registry, capacity_gib=1000, **options)
    tight = prepare(registry, capacity_gib=192, **options)
    assert not roomy.pruned and tight.pruned
    assert len(tight.spec.candidates) + len(tight.pruned) == len(roomy.spec.candidates)
    # Llama 3.1 8B at micro-batch 8 x 8192 tokens without recompute cannot fit in 192 GiB
    big = {"training.micro_batch_size": 8, "training.recompute": "none"}
    assert any(big.items() <= c.as_dict().items() for c in roomy.spec.candidates)
    assert not any(big.items() <= c.as_dict().items() for c in tight.spec.candidates)
    assert all(p.total_gib > 192 and "does not fit" in p.reason for p in tight.pruned)
    out = CliRunner().invoke(
        cli,
        [
            "tune",
            "--backend",
            "nvd_megatron",
            "--model",
            "llama3.1-8b",
            *(f"--set={o}" for o in options["overrides"]),
            *(f"--space={o}" for o in options["space_items"]),
            "--budget",
            "500",
            "--device-capacity",
            "192",
            "--dry-run",
        ],
    )
    assert out.exit_code == 0, out.output
    assert f"{len(tight.pruned)} pruned" in out.output
