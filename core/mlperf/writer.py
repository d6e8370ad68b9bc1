"""An MLPerf Training log for one run, written with the ``mlperf-logging`` package.

The trainer calls the methods in the order the MLPerf rules require:
``init_start`` (before the model is built), ``hyperparameters``,
``init_stop_run_start`` (immediately before any training or evaluation data is
read), ``block``/``evaluation`` pairs, and ``run_stop`` with ``success`` when
the target was reached or ``aborted`` when a budget ran out.  Only rank 0
writes.  The log goes to its own file, never to the trainer's output, so the
runner's parser does not see it twice.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tprimat.convergence import iteration_budget
from tprimat.settings.config import BenchmarkConfig

LOG_NAME = "mlperf.log"

#: MLPerf's names for the precisions a config may ask for.
PRECISION_NAMES = {"bf16": "bfloat16", "fp32": "fp32", "fp8": "fp8"}


def available() -> bool:
    """Whether the ``mlperf-logging`` package is installed (the ``mlperf`` extra)."""
    from importlib.util import find_spec

    return find_spec("mlperf_logging") is not None


def hyperparameters(
    config: BenchmarkConfig,
    *,
    data_parallel: int,
    train_samples: int,
    config_filename: str,
    comm_precision: str = "fp32",
    attention_precision: str | None = None,
) -> dict[str, Any]:
    """The hyper-parameter and disclosure keys of an MLPerf LLM log, from the benchmark config.

    ``max_steps`` is the iteration budget; ``opt_learning_rate_decay_steps`` the
    iterations of decay after warm-up, as tprimat's schedule applies them.
    """
    t, p, v = config.training, config.parallel, config.convergence
    max_steps = iteration_budget(config)
    decay = t.lr_decay_iterations or max_steps
    schedule = {
        "cosine": "cosine with linear warmup",
        "linear": "linear with linear warmup",
        "constant": "constant with linear warmup",
    }[t.lr_decay_style]
    precision = PRECISION_NAMES[config.precision.dtype]
    return {
        "seed": config.benchmark.seed,
        "global_batch_size": t.global_batch_size,
        "micro_batch_size": t.micro_batch_size,
        "gradient_accumulation_steps": t.global_batch_size // (t.micro_batch_size * data_parallel),
        "max_sequence_length": t.seq_length,
        "max_steps": max_steps,
        "train_samples": train_samples,
        "eval_samples": v.eval_sequences,
        "opt_name": "adamw",
        "opt_base_learning_rate": t.lr,
        "opt_end_learning_rate": t.min_lr,
        "opt_learning_rate_warmup_steps": t.lr_warmup_iterations,
        "opt_learning_rate_decay_steps": max(decay - t.lr_warmup_iterations, 0),
        "opt_learning_rate_decay_schedule": schedule,
        "opt_adamw_beta_1": t.adam_beta1,
        "opt_adamw_beta_2": t.adam_beta2,
        "opt_adamw_epsilon": t.adam_eps,
        "opt_adamw_weight_decay": t.weight_decay,
        "opt_gradient_clip_norm": t.clip_grad,
        "lowest_numerical_precision_in_linear": precision,
        "lowest_numerical_precision_in_attn": attention_precision or precision,
        "lowest_numerical_precision_in_comm": comm_precision,
        "tensor_parallelism": p.tensor,
        "pipeline_parallelism": p.pipeline,
        "context_parallelism": p.context,
        "expert_parallelism": 1,
        "config_filename": config_filename,
    }


class MlperfLog:
    """The ``:::MLLOG`` lines of one run, appended to ``path``."""

    def __init__(self, path: str | Path, *, namespace: str = "") -> None:
        from mlperf_logging.mllog.mllog import MLLogger

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        logger = logging.getLogger(f"tprimat.mlperf.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(self.path, encoding="utf-8")
        logger.addHandler(self._handler)
        self._logger = logger
        self._log = MLLogger(logger=logger, default_namespace=namespace, default_stack_offset=2)
        self._blocks_open = False

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()

    def init_start(self) -> None:
        self._log.event("cache_clear", value=False)  # tprimat does not drop the OS page cache
        self._log.start("init_start")

    def submission(self, *, benchmark: str, org: str, division: str, platform: str) -> None:
        self._log.event("submission_benchmark", value=benchmark)
        self._log.event("submission_org", value=org)
        self._log.event("submission_division", value=division)
        self._log.event("submission_status", value="research")
        self._log.event("submission_platform", value=platform)

    def hyperparameters(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            self._log.event(key, value=value)

    def init_stop_run_start(self) -> None:
        self._log.end("init_stop")
        self._log.start("run_start")

    def block_start(self, samples: int) -> None:
        self._log.start("block_start", metadata={"samples_count": samples})
        self._blocks_open = True

    def block_stop(self, samples: int) -> None:
        self._log.end("block_stop", metadata={"samples_count": samples})
        self._blocks_open = False

    def evaluation(self, samples: int, eval_loss: float, *, start_ms: int, stop_ms: int) -> None:
        self._log.start("eval_start", metadata={"samples_count": samples}, time_ms=start_ms)
        self._log.end("eval_stop", metadata={"samples_count": samples}, time_ms=stop_ms)
        self._log.event("eval_accuracy", value=eval_loss, metadata={"samples_count": samples}, time_ms=stop_ms)

    def run_stop(self, samples: int, *, success: bool) -> None:
        if self._blocks_open:
            self.block_stop(samples)
        self._log.end("run_stop", metadata={"status": "success" if success else "aborted", "samples_count": samples})
