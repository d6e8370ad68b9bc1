"""The torch backend's trainer: one process per device, started by torchrun.

    python -m torch.distributed.run ... -m tprimat.plugins.torch.train --config <run>/config.toml

Every setting comes from the benchmark config the runner wrote.  Each
iteration trains on ``global_batch_size`` sequences (micro-batches with
gradient accumulation), then synchronises the device once and stops the
clock; nothing inside the step waits on the device.  Rank 0 prints one
``TPRIMAT_ITER`` line per iteration with what was measured (see
:mod:`tprimat.plugins.torch.protocol`); throughput is computed by the core
from those lines, like for every other backend.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import attrs

from tprimat.contract import BenchmarkConfig, ModelSpec, get_model, load_config
from tprimat.plugins.torch.protocol import format_info, format_iteration
from tprimat.plugins.torch.schedule import lr_at, profiled_iterations

GIB = 2**30


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tprimat.plugins.torch.train",
        description="Train a registered model for the iterations of a tprimat benchmark config.",
    )
    parser.add_argument("--config", required=True, help="the run's config.toml")
    parser.add_argument("--data-prefix", help="a prepared dataset's <prefix> (.bin/.idx)")
    parser.add_argument("--profile-dir", help="write torch.profiler traces here")
    parser.add_argument("--mlperf-log", help="write the run's MLPerf log here")
    parser.add_argument(
        "--memory-snapshot", help="record the CUDA allocator's history and dump each rank's snapshot into this folder"
    )
    parser.add_argument(
        "--fixed-batch",
        action="store_true",
        help="train on the same mock batches every iteration (checks that the model learns)",
    )
    return parser.parse_args(argv)


# -- data -------------------------------------------------------------------------------


class MockBatches:
    """Seeded, uniformly random token ids in ``[0, vocab)``, generated on the device.

    Never zeros or a constant: a constant input makes some kernels (and some
    hardware) look faster than they are on text.  Each data-parallel rank
    draws its own stream.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        micro_batch_size: int,
        seq_length: int,
        seed: int,
        rank: int,
        device: Any,
        fixed: bool = False,
        micro_batches: int = 1,
    ) -> None:
        import torch

        self.shape = (micro_batch_size, seq_length + 1)
        self.vocab_size = vocab_size
        self.device = device
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed * 1_000_003 + rank)
        self.fixed = [self._draw() for _ in range(micro_batches)] if fixed else None
        self.count = 0

    def _draw(self) -> Any:
        import torch

        return torch.randint(0, self.vocab_size, self.shape, device=self.device, generator=self.generator)

    def next(self) -> Any:
        self.count += 1
        if self.fixed is not None:
            return self.fixed[(self.count - 1) % len(self.fixed)]
        return self._draw()


class DatasetBatches:
    """Micro-batches read from a prepared dataset, each rank its own slice of every global batch."""

    def __init__(
        self,
        *,
        path_prefix: str,
        micro_batch_size: int,
        seq_length: int,
        seed: int,
        dp_rank: int,
        micro_batches: int,
        global_batch_size: int,
        device: Any,
        samples: Any = None,
    ) -> None:
        from tprimat.contract.services import PackedSequences

        # ``samples``: the training side of a held-out split (convergence runs)
        self.samples = samples if samples is not None else PackedSequences(path_prefix, seq_length, seed)
        if len(self.samples) == 0:
            raise SystemExit(f"dataset {path_prefix} has no sequence of {seq_length + 1} tokens")
        self.mbs = micro_batch_size
        self.offset = dp_rank * micro_batches * micro_batch_size
        self.global_batch_size = global_batch_size
        self.per_iteration = micro_batches
        self.device = device
        self.count = 0

    def next(self) -> Any:
        import numpy as np
        import torch

        iteration, micro = divmod(self.count, self.per_iteration)
        self.count += 1
        start = iteration * self.global_batch_size + self.offset + micro * self.mbs
        rows = [self.samples[(start + j) % len(self.samples)] for j in range(self.mbs)]
        batch = torch.from_numpy(np.stack(rows).astype(np.int64))
        return batch.to(self.device, non_blocking=True)


# -- distributed setup -------------------------------------------------------------------


class Environment:
    """Rank, world and device of this process (torchrun's variables; one process without them)."""

    def __init__(self) -> None:
        import torch

        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
            self.dist_backend = "nccl"  # RCCL on ROCm builds
        else:
            self.device = torch.device("cpu")
            self.dist_backend = "gloo"
        self.gpu = self.device.type == "cuda"
        self.distributed = self.world_size > 1
        if self.distributed:
            import torch.distributed as dist

            if self.gpu:
                dist.init_process_group(self.dist_backend, device_id=self.device)
            else:
                dist.init_process_group(self.dist_backend)

    def close(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()  # every rank finishes its outstanding collectives first
            dist.destroy_process_group()


def _collectives_version(env: Environment) -> str | None:
    import torch

    if not env.gpu:
        return "gloo" if env.distributed else None
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    text = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    return ("RCCL " if torch.version.hip else "NCCL ") + text


def _wrap(model: Any, config: BenchmarkConfig, env: Environment) -> Any:
    import torch

    if config.training.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if env.distributed:
        if config.parallel.strategy == "fsdp2":
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            policy = MixedPrecisionPolicy()
            if config.precision.dtype == "bf16" and env.gpu:
                policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for layer in model.model.layers:
                fully_shard(layer, mp_policy=policy)
            fully_shard(model, mp_policy=policy)
        else:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(
                model,
                device_ids=[env.local_rank] if env.gpu else None,
                gradient_as_bucket_view=True,
            )
    if config.kernels.compile:
        model = torch.compile(model)
    return model


def _optimizer(model: Any, config: BenchmarkConfig, env: Environment) -> Any:
    import torch

    t = config.training
    decay: list[Any] = []
    no_decay: list[Any] = []
    for parameter in model.parameters():
        if parameter.requires_grad:
            # Norm weights and biases are not decayed (as Megatron does).
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps, fused=env.gpu)


def _attention_context(config: BenchmarkConfig, env: Environment) -> Any:
    """Restrict SDPA to the configured kernel family on GPUs (CPU picks its own)."""
    if not env.gpu or config.kernels.attention_backend in ("auto", "unfused"):
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if config.kernels.attention_backend == "flash":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])


def _rss_gib() -> float | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / GIB
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB


def _memory(env: Environment) -> dict[str, float | None]:
    import torch

    if not env.gpu:
        return {"mem_rss_gib": _rss_gib()}
    free, total = torch.cuda.mem_get_info(env.device)
    return {
        "mem_allocated_gib": torch.cuda.memory_allocated(env.device) / GIB,
        "mem_max_allocated_gib": torch.cuda.max_memory_allocated(env.device) / GIB,
        "mem_reserved_gib": torch.cuda.memory_reserved(env.device) / GIB,
        "mem_max_reserved_gib": torch.cuda.max_memory_reserved(env.device) / GIB,
        "mem_device_used_gib": (total - free) / GIB,
        "mem_device_total_gib": total / GIB,
    }


def _profiler(config: BenchmarkConfig, env: Environment, directory: str | None) -> Any:
    if directory is None or env.rank not in config.profile.ranks:
        return contextlib.nullcontext()
    import torch

    Path(directory).mkdir(parents=True, exist_ok=True)
    p = config.profile
    activities = [torch.profiler.ProfilerActivity.CPU]
    if env.gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    def write_trace(prof: Any) -> None:
        prof.export_chrome_trace(str(Path(directory) / f"rank{env.rank}.step{prof.step_num}.pt.trace.json"))

    return torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=p.wait, warmup=p.warmup, active=p.active, repeat=p.repeat),
        on_trace_ready=write_trace,
    )


@contextlib.contextmanager
def _memory_history(env: Any, folder: str | None) -> Iterator[None]:
    """Record the CUDA caching allocator's history and dump this rank's snapshot at the end.

    The snapshot is PyTorch's own (``torch.cuda.memory._dump_snapshot``): ``tprimat memory
    summarize`` and https://pytorch.org/memory_viz read it.  Without CUDA there is no
    allocator history to record; the run says so and trains as usual.
    """
    if not folder:
        yield
        return
    import torch

    if env.device.type != "cuda":
        print(f"tprimat: no CUDA device on rank {env.rank}: no allocator snapshot recorded", file=sys.stderr)
        yield
        return
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        yield
    finally:
        os.makedirs(folder, exist_ok=True)
        torch.cuda.memory._dump_snapshot(os.path.join(folder, f"snapshot-rank{env.rank}.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)


# -- the loop -----------------------------------------------------------------------------


def _batches(
    config: BenchmarkConfig,
    args: argparse.Namespace,
    spec: ModelSpec,
    env: Environment,
    micro_batches: int,
    train_samples: Any,
) -> Any:
    """This rank's micro-batches: from the prepared dataset when one is given, else mock tokens."""
    t = config.training
    if args.data_prefix:
        return DatasetBatches(
            path_prefix=args.data_prefix,
            micro_batch_size=t.micro_batch_size,
            seq_length=t.seq_length,
            seed=config.benchmark.seed,
            dp_rank=env.rank,
            micro_batches=micro_batches,
            global_batch_size=t.global_batch_size,
            device=env.device,
            samples=train_samples,
        )
    return MockBatches(
        vocab_size=spec.vocab_size,
        micro_batch_size=t.micro_batch_size,
        seq_length=t.seq_length,
        seed=config.benchmark.seed,
        rank=env.rank,
        device=env.device,
        fixed=args.fixed_batch,
        micro_batches=micro_batches,
    )


def _run_info(
    config: BenchmarkConfig, args: argparse.Namespace, env: Environment, micro_batches: int, use_bf16: bool
) -> dict[str, Any]:
    """What rank 0 states before the first iteration (read back by the parser as facts)."""
    import torch

    return {
        "torch_version": torch.__version__,
        "transformers_version": metadata.version("transformers"),
        "world_size": env.world_size,
        "device_name": torch.cuda.get_device_name(env.device) if env.gpu else "cpu",
        "collectives": _collectives_version(env),
        "strategy": config.parallel.strategy if env.distributed else "single process",
        "dtype": "bf16 autocast" if use_bf16 else "fp32",
        "attention": model_attention(config, env),
        "dataset": args.data_prefix or "mock",
        "micro_batches_per_rank": micro_batches,
    }


@attrs.define(kw_only=True)
class _Step:
    """What one optimizer step needs, built once before the loop."""

    model: Any
    optimizer: Any
    params: list[Any]
    batches: Any
    autocast: Any
    micro_batches: int
    clip: float
    loss_sum: Any


def _step(step: _Step, env: Environment, lr: float) -> tuple[float, float]:
    """One optimizer step over ``micro_batches`` micro-batches; the summed loss and the gradient norm."""
    import torch
    import torch.nn.functional as F

    no_sync = getattr(step.model, "no_sync", None)
    set_sync = getattr(step.model, "set_requires_gradient_sync", None)
    step.loss_sum.zero_()
    for micro in range(step.micro_batches):
        last = micro == step.micro_batches - 1
        sync: Any = contextlib.nullcontext()
        if no_sync is not None and not last:
            sync = no_sync()
        elif set_sync is not None:
            set_sync(last)
        tokens = step.batches.next()
        with sync:
            with step.autocast:
                logits = step.model(input_ids=tokens[:, :-1]).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            (loss / step.micro_batches).backward()
        step.loss_sum += loss.detach()
    grad_norm = torch.nn.utils.clip_grad_norm_(step.params, step.clip)
    for group in step.optimizer.param_groups:
        group["lr"] = lr
    step.optimizer.step()
    step.optimizer.zero_grad(set_to_none=True)
    if env.distributed:
        torch.distributed.all_reduce(step.loss_sum)
    if env.gpu:
        torch.cuda.synchronize(env.device)  # the one sync, at the boundary
    if hasattr(grad_norm, "full_tensor"):
        grad_norm = grad_norm.full_tensor()
    return step.loss_sum.item(), float(grad_norm.item())


def _profiled(config: BenchmarkConfig, args: argparse.Namespace, iterations: int) -> set[int]:
    """The iterations the torch profiler records (none without a profile directory)."""
    if not args.profile_dir:
        return set()
    p = config.profile
    return set(
        profiled_iterations(wait=p.wait, warmup=p.warmup, active=p.active, repeat=p.repeat, iterations=iterations)
    )


def _start_convergence(config: BenchmarkConfig, args: argparse.Namespace, emit: Any) -> Any:
    """The convergence/MLPerf bookkeeping of the run, or None (MLPerf init_start: the init clock starts)."""
    if not (config.convergence.enabled or args.mlperf_log):
        return None
    from tprimat.plugins.torch.evaluate import ConvergenceRun

    return ConvergenceRun(config, rank=int(os.environ.get("RANK", "0")), emit=emit, mlperf_path=args.mlperf_log)


def train(config: BenchmarkConfig, args: argparse.Namespace, emit: Any = None) -> Iterator[dict[str, Any]]:
    """Run the configured iterations; yield each iteration's measurements (on every rank)."""
    import torch

    from tprimat.plugins.torch.model import build_model

    emit = emit or (lambda line: print(line, flush=True))
    convergence = _start_convergence(config, args, emit)
    env = Environment()
    history = contextlib.ExitStack()
    try:
        if env.world_size != config.world_size:
            raise SystemExit(
                f"this job has {env.world_size} processes but the config says "
                f"launch.nnodes x launch.nproc_per_node = {config.world_size}"
            )
        spec = get_model(config.benchmark.model)
        t = config.training
        micro_batches = t.global_batch_size // (t.micro_batch_size * env.world_size)  # data parallel only
        # Recorded from before the model is built: the snapshot then knows the parameters (and
        # the optimizer's states) by the stacks that allocated them, not as blocks of unknown origin.
        history.enter_context(_memory_history(env, args.memory_snapshot))
        model = build_model(spec, config, env.device)
        model.train()
        model = _wrap(model, config, env)
        optimizer = _optimizer(model, config, env)
        iterations = config.benchmark.iterations
        train_samples = None
        if convergence is not None:
            from tprimat.plugins.torch.evaluate import begin_run

            iterations = convergence.iterations
            train_samples = begin_run(
                convergence, config, data_prefix=args.data_prefix, config_name=Path(args.config).name, env=env
            )
        use_bf16 = config.precision.dtype == "bf16"
        step = _Step(
            model=model,
            optimizer=optimizer,
            params=[p for p in model.parameters() if p.requires_grad],
            batches=_batches(config, args, spec, env, micro_batches, train_samples),
            autocast=torch.autocast(env.device.type, dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext(),
            micro_batches=micro_batches,
            clip=t.clip_grad if t.clip_grad > 0 else math.inf,
            loss_sum=torch.zeros((), device=env.device),
        )
        profiled = _profiled(config, args, iterations)
        if env.rank == 0:
            emit(format_info(_run_info(config, args, env, micro_batches, use_bf16)))
        decay_iterations = t.lr_decay_iterations or iterations
        with (
            _profiler(config, env, args.profile_dir) as prof,
            _attention_context(config, env),
        ):
            for iteration in range(1, iterations + 1):
                lr = lr_at(
                    iteration,
                    lr=t.lr,
                    min_lr=t.min_lr,
                    warmup=t.lr_warmup_iterations,
                    decay_iterations=decay_iterations,
                    style=t.lr_decay_style,
                )
                if env.gpu:
                    torch.cuda.reset_peak_memory_stats(env.device)
                start = time.perf_counter()
                loss_sum, grad_norm = _step(step, env, lr)
                step_time = time.perf_counter() - start
                values = {
                    "iteration": iteration,
                    "step_time_s": step_time,
                    "loss": loss_sum / (micro_batches * env.world_size),
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "global_batch_size": t.global_batch_size,
                    "consumed_samples": iteration * t.global_batch_size,
                    "profiled": iteration in profiled,
                    "timestamp": datetime.now(UTC).isoformat(timespec="microseconds"),
                    **_memory(env),
                }
                if env.rank == 0:
                    emit(format_iteration(values))
                if prof is not None and hasattr(prof, "step"):
                    prof.step()
                stop = convergence is not None and convergence.after_iteration(iteration, model, step.autocast)
                yield values
                if stop:
                    break
        if convergence is not None:
            convergence.finish(iteration)
    finally:
        history.close()  # the snapshot is written here, before the process group goes
        env.close()


def model_attention(config: BenchmarkConfig, env: Environment) -> str:
    from tprimat.plugins.torch.model import ATTENTION_IMPLEMENTATION

    implementation = ATTENTION_IMPLEMENTATION[config.kernels.attention_backend]
    if implementation == "sdpa" and env.gpu and config.kernels.attention_backend != "auto":
        return f"sdpa ({config.kernels.attention_backend} kernels only)"
    return implementation


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _runner_is_ancestor(runner: int) -> bool:
    """Whether ``runner`` is still among this process's ancestors (True when unreadable)."""
    pid: int | None = os.getppid()
    for _ in range(16):
        if pid == runner:
            return True
        if pid is None:
            return True  # cannot tell: keep running
        if pid <= 1:
            return False
        pid = _parent_of(pid)
    return True


def _die_with_parent() -> None:
    """Ask Linux to kill this worker if its launcher dies, so no worker outlives a run.

    The request only covers the launcher alive at the time it is made: if
    torchrun was killed while this worker was starting, the worker has already
    been adopted by another process.  ``tprimat run`` passes its own process
    id; a worker no longer descending from it exits at once.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    runner = os.environ.get("TPRIMAT_RUNNER_PID", "")
    if runner.isdigit() and not _runner_is_ancestor(int(runner)):
        os._exit(137)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    config = load_config(args.config)
    done = 0
    try:
        for values in train(config, args):
            done = values["iteration"]
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"tprimat: training interrupted after iteration {done}", file=sys.stderr, flush=True)
        os._exit(130)
    # Every measurement has been printed.  Leave without the interpreter's teardown: with
    # FSDP2 on gloo, destroying the C++ process-group threads at exit can abort the process
    # (SIGABRT, "terminate called without an active exception") after a complete run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
