"""The MLPerf hyper-parameter keys a run logs, from its benchmark config."""

from __future__ import annotations

from tprimat.convergence import iteration_budget
from tprimat.mlperf.writer import hyperparameters
from tprimat.settings.config import load_config


def test_keys_follow_the_config():
    config = load_config(
        overrides=[
            "training.global_batch_size=32",
            "training.micro_batch_size=2",
            "launch.nproc_per_node=8",
            'precision.dtype="bf16"',
            "training.lr_warmup_iterations=128",
            "benchmark.iterations=1000",
        ]
    )
    keys = hyperparameters(config, data_parallel=8, train_samples=99, config_filename="config.toml")
    assert keys["gradient_accumulation_steps"] == 2  # 32 / (2 x 8)
    assert keys["max_steps"] == 1000 and keys["opt_learning_rate_decay_steps"] == 1000 - 128
    assert keys["opt_learning_rate_decay_schedule"] == "cosine with linear warmup"
    assert keys["lowest_numerical_precision_in_linear"] == "bfloat16"
    assert keys["lowest_numerical_precision_in_comm"] == "fp32"
    assert (keys["train_samples"], keys["eval_samples"]) == (99, config.convergence.eval_sequences)
    assert keys["opt_adamw_epsilon"] == config.training.adam_eps


def test_sample_budget_only_for_convergence_runs():
    base = ["training.global_batch_size=8", "benchmark.iterations=10", "convergence.max_samples=100"]
    assert iteration_budget(load_config(overrides=base)) == 10
    converge = load_config(overrides=[*base, "convergence.enabled=true"])
    assert iteration_budget(converge) == 13  # ceil(100 / 8)
    assert hyperparameters(converge, data_parallel=1, train_samples=0, config_filename="c")["max_steps"] == 13
