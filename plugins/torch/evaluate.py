"""Convergence runs in the torch trainer: held-out evaluation, the MLPerf clock and the stop rule.

:class:`ConvergenceRun` is created first thing in the trainer (MLPerf ``init_start``),
for convergence runs and for throughput runs that write an MLPerf log (those only
log the clock and one training block, and stop after ``benchmark.iterations``);
it
starts the run clock with :meth:`~ConvergenceRun.start_run` right before any data
is read (``init_stop``/``run_start``), evaluates every ``eval_interval_samples``
training samples on the fixed held-out sequences, and says when to stop: at the
target log-perplexity (``run_stop`` success) or when the sample or time budget is
spent (``run_stop`` aborted).  The clock is never paused; evaluation time counts.
Rank 0 prints one ``TPRIMAT_EVAL`` line per evaluation and writes the MLPerf log.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

from tprimat.contract import BenchmarkConfig
from tprimat.contract.services import iteration_budget
from tprimat.plugins.torch.protocol import format_eval, format_info


class Evaluator:
    """Mean per-token cross-entropy of the model on the fixed evaluation sequences.

    The sequences are divided among the data-parallel ranks; every rank runs the
    same number of forward passes (padding with zero-weight repeats), as FSDP2 needs.
    """

    def __init__(self, sequences: list[Any], *, micro_batch_size: int, rank: int, world_size: int, device: Any) -> None:
        import numpy as np
        import torch

        mine = list(range(rank, len(sequences), world_size))
        per_rank = math.ceil(len(sequences) / world_size)
        per_rank = math.ceil(per_rank / micro_batch_size) * micro_batch_size
        weights = [1.0] * len(mine) + [0.0] * (per_rank - len(mine))
        mine += [0] * (per_rank - len(mine))
        self.tokens = torch.from_numpy(np.stack([sequences[i] for i in mine]).astype(np.int64)).to(device)
        self.weights = torch.tensor(weights, device=device)
        self.mbs = micro_batch_size
        self.count = len(sequences)
        self.distributed = world_size > 1
        self.device = device

    def loss(self, model: Any, autocast: Any) -> float:
        import torch
        import torch.nn.functional as F

        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss sum, token count
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in range(0, self.tokens.shape[0], self.mbs):
                batch = self.tokens[start : start + self.mbs]
                weight = self.weights[start : start + self.mbs]
                with autocast:
                    logits = model(input_ids=batch[:, :-1]).logits
                per_token = F.cross_entropy(logits.float().transpose(1, 2), batch[:, 1:], reduction="none")
                totals[0] += (per_token.sum(dim=1) * weight).sum().double()
                totals[1] += (weight * per_token.shape[1]).sum().double()
        if self.distributed:
            torch.distributed.all_reduce(totals)
        model.train(was_training)
        return float(totals[0] / totals[1])


class ConvergenceRun:
    """One convergence run's clock, evaluation schedule, stop rule and MLPerf log."""

    def __init__(self, config: BenchmarkConfig, *, rank: int, emit: Any, mlperf_path: str | None) -> None:
        self.init_started = time.perf_counter()  # MLPerf init_start: before the model exists
        self.config = config
        self.settings = config.convergence
        self.rank = rank
        self.emit = emit
        t = config.training
        self.evaluates = self.settings.enabled
        self.iterations = iteration_budget(config)
        self.global_batch_size = t.global_batch_size
        self.mlperf = None
        if mlperf_path and rank == 0:
            from tprimat.contract.services import MlperfLog

            self.mlperf = MlperfLog(mlperf_path)
            self.mlperf.init_start()
        self.run_started: float | None = None
        self.init_time_s: float | None = None
        self.run_started_at: str | None = None
        self.next_eval = self.settings.eval_interval_samples
        self.evaluated_at = -1
        self.reached = False
        self.evaluator: Evaluator | None = None

    def describe(self, *, platform: str, hyperparameters: dict[str, Any]) -> None:
        """Submission facts and hyper-parameters (MLPerf logs them during initialisation)."""
        if self.mlperf is None:
            return
        s = self.settings
        self.mlperf.submission(
            benchmark=s.mlperf_benchmark, org=s.mlperf_org, division=s.mlperf_division, platform=platform
        )
        self.mlperf.hyperparameters(hyperparameters)

    def start_run(self) -> None:
        """MLPerf init_stop + run_start: call immediately before any data is read."""
        self.run_started = time.perf_counter()
        self.run_started_at = datetime.now(UTC).isoformat(timespec="microseconds")
        self.init_time_s = self.run_started - self.init_started
        if self.mlperf is not None:
            self.mlperf.init_stop_run_start()
            self.mlperf.block_start(0)

    def since_start(self) -> float:
        assert self.run_started is not None
        return time.perf_counter() - self.run_started

    def _evaluate(self, iteration: int, samples: int, model: Any, autocast: Any) -> float:
        assert self.evaluator is not None
        if self.mlperf is not None:
            self.mlperf.block_stop(samples)
        start_ms = int(time.time() * 1e3)
        eval_loss = self.evaluator.loss(model, autocast)
        stop_ms = int(time.time() * 1e3)
        elapsed = self.since_start()
        self.evaluated_at = samples
        if self.rank == 0:
            self.emit(
                format_eval(
                    {
                        "iteration": iteration,
                        "samples": samples,
                        "time_s": elapsed,
                        "eval_loss": eval_loss,
                        "eval_sequences": self.evaluator.count,
                    }
                )
            )
        if self.mlperf is not None:
            self.mlperf.evaluation(samples, eval_loss, start_ms=start_ms, stop_ms=stop_ms)
        return eval_loss

    def after_iteration(self, iteration: int, model: Any, autocast: Any) -> bool:
        """Evaluate when due; True when training must stop (target reached or budget spent)."""
        if not self.evaluates:
            return False
        samples = iteration * self.global_batch_size
        last = iteration >= self.iterations
        over_time = 0 < self.settings.max_time_s <= self.since_start()
        if self.settings.max_time_s > 0 and self.evaluator is not None and self.evaluator.distributed:
            import torch  # every rank must agree on when the time budget ran out

            flag = torch.tensor([1.0 if over_time else 0.0], device=self.evaluator.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            over_time = bool(flag.item())
        if samples >= self.next_eval or last or over_time:
            while self.next_eval <= samples:
                self.next_eval += self.settings.eval_interval_samples
            eval_loss = self._evaluate(iteration, samples, model, autocast)
            self.reached = eval_loss <= self.settings.target_log_perplexity
            if self.reached or last or over_time:
                return True
            if self.mlperf is not None:
                self.mlperf.block_start(samples)
        return last

    def finish(self, iteration: int) -> None:
        """MLPerf run_stop and the run's clock figures, after the last iteration."""
        run_time_s = self.since_start() if self.run_started is not None else None
        samples = iteration * self.global_batch_size
        if self.mlperf is not None:
            self.mlperf.run_stop(samples, success=self.reached)
            self.mlperf.close()
        if self.rank == 0 and self.evaluates:
            self.emit(
                format_info(
                    {
                        "init_time_s": self.init_time_s,
                        "run_time_s": run_time_s,
                        "run_started_at": self.run_started_at,
                        "convergence_status": "success" if self.reached else "aborted",
                    }
                )
            )


def begin_run(
    run: ConvergenceRun, config: BenchmarkConfig, *, data_prefix: str | None, config_name: str, env: Any
) -> Any:
    """Log initialisation, start the run clock, then open the data.

    Returns the training side of the held-out split for convergence runs (None
    otherwise).  Sizes logged before ``run_start`` come from the dataset's index only.
    """
    import torch

    from tprimat.contract.services import mlperf_hyperparameters as hyperparameters
    from tprimat.contract.services import training_sample_count, training_sequences, validation_sequences

    v, t = config.convergence, config.training
    if v.enabled and not data_prefix:
        raise SystemExit("convergence runs need a prepared dataset (--data-prefix)")
    if v.enabled and data_prefix:
        train_count = training_sample_count(data_prefix, t.seq_length, v.validation_fraction)
    elif data_prefix:
        from tprimat.contract.services import IndexedReader

        train_count = max((IndexedReader(data_prefix).token_count - 1) // t.seq_length, 0)
    else:
        train_count = 0  # mock data: no dataset
    device_name = torch.cuda.get_device_name(env.device) if env.gpu else "cpu"
    run.describe(
        platform=f"{env.world_size}x{device_name}",
        hyperparameters=hyperparameters(
            config, data_parallel=env.world_size, config_filename=config_name, train_samples=train_count
        ),
    )
    run.start_run()  # MLPerf init_stop + run_start: no token was read before this
    if not v.enabled or not data_prefix:
        return None
    samples = training_sequences(data_prefix, t.seq_length, config.benchmark.seed, v.validation_fraction)
    run.evaluator = Evaluator(
        validation_sequences(data_prefix, t.seq_length, v.validation_fraction, v.eval_sequences),
        micro_batch_size=t.micro_batch_size,
        rank=env.rank,
        world_size=env.world_size,
        device=env.device,
    )
    return samples
