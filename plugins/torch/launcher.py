"""The torch backend's launch plan: torchrun on :mod:`tprimat.plugins.torch.train`.

The plan is an exact command line; the core runner executes it.  torchrun
(``python -m torch.distributed.run``) writes each local rank's output to
``logs/ranks/`` in the run directory (``--log-dir``/``--tee``) and forwards
it to its own output, which the runner tees and parses.  Single node uses a
standalone rendezvous on a free port; several nodes use the static
``--master-addr``/``--master-port`` rendezvous, one ``tprimat run`` per node.
"""

from __future__ import annotations

import sys
from typing import Any

from tprimat.contract import BenchmarkConfig
from tprimat.contract.plans import (
    DataArguments,
    FrameworkSettings,
    LaunchContext,
    LaunchPlan,
    PreparedDataset,
    ProfilePlan,
)
from tprimat.errors import TprimatError
from tprimat.plugins.torch.schedule import profiled_iterations

TRAIN_MODULE = "tprimat.plugins.torch.train"
TRACE_DIR = "torch_profile"  # the runner collects traces into traces/
RANK_LOG_DIR = "logs/ranks"
SNAPSHOT_DIR = "memory"  # each CUDA rank's allocator snapshot (tprimat run --memory-snapshot)


class UnsupportedSetting(TprimatError):
    """A benchmark setting the torch backend cannot honour (it refuses rather than ignores)."""


def check_supported(config: BenchmarkConfig) -> list[str]:
    """Raise for settings the torch backend cannot run; return notes on settings it ignores."""
    p = config.parallel
    if p.tensor > 1 or p.pipeline > 1 or p.context > 1:
        raise UnsupportedSetting(
            "the torch backend is data-parallel only (DDP or FSDP2): set parallel.tensor, "
            "parallel.pipeline and parallel.context to 1, or use a Megatron-family backend"
        )
    if config.precision.dtype == "fp8":
        raise UnsupportedSetting(
            "the torch backend trains in bf16 or fp32; precision.dtype = fp8 needs a "
            "Transformer Engine backend (amd_primus, nvd_megatron, nvd_nemo)"
        )
    if config.training.recompute == "selective":
        raise UnsupportedSetting(
            "the torch backend recomputes whole decoder layers only: use training.recompute = none or full"
        )
    notes = []
    if p.sequence_parallel:
        notes.append("parallel.sequence_parallel has no effect without tensor parallelism")
    return notes


def profile_plan(context: LaunchContext) -> ProfilePlan:
    prof = context.config.profile
    return ProfilePlan(
        args=("--profile-dir", str(context.run_dir / TRACE_DIR)),
        trace_globs=(f"{TRACE_DIR}/*.pt.trace.json", f"{TRACE_DIR}/*.pt.trace.json.gz"),
        profiled_iterations=profiled_iterations(
            wait=prof.wait,
            warmup=prof.warmup,
            active=prof.active,
            repeat=prof.repeat,
            iterations=context.config.benchmark.iterations,
        ),
    )


def data_arguments(dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    return DataArguments(args=("--data-prefix", str(dataset.path_prefix)))


def torchrun_argv(context: LaunchContext, python: str | None = None) -> list[str]:
    """The torchrun part of the command line, for this node."""
    launch = context.config.launch
    argv = [python or sys.executable, "-m", "torch.distributed.run"]
    if launch.nnodes == 1:
        argv += ["--standalone", "--nnodes", "1"]
    else:
        argv += [
            "--nnodes",
            str(launch.nnodes),
            "--node-rank",
            str(context.node_rank),
            "--master-addr",
            launch.master_addr,
            "--master-port",
            str(launch.master_port),
        ]
    argv += [
        "--nproc-per-node",
        str(launch.nproc_per_node),
        "--log-dir",
        str(context.run_dir / RANK_LOG_DIR),
        "--tee",
        "3",
    ]
    return argv


def plan(context: LaunchContext) -> LaunchPlan:
    """torchrun on the trainer, which reads the run's ``config.toml``: the final config, as recorded."""
    config = context.config
    notes = check_supported(config)
    argv = torchrun_argv(context)
    config_path = context.run_dir / "config.toml"
    argv += ["-m", TRAIN_MODULE, "--config", str(config_path)]
    env = {"PYTHONUNBUFFERED": "1", **context.methodology.env}
    if context.data is not None:
        argv += list(context.data.args)
        env.update(context.data.env)
    # A tuned preset's environment and arguments (decided by the core, recorded as deviations).
    env.update(context.methodology.env)
    argv += list(context.methodology.args)
    missing: tuple[str, ...] = ()
    convergence = context.config.convergence
    if convergence.mlperf_log == "always" or (convergence.enabled and convergence.mlperf_log == "convergence"):
        from tprimat.contract.services import MLPERF_LOG_NAME as LOG_NAME
        from tprimat.contract.services import mlperf_available as available

        if available():
            argv += ["--mlperf-log", str(context.run_dir / LOG_NAME)]
        else:
            missing = ("no MLPerf log: the mlperf-logging package is not installed (pip install 'tprimat[mlperf]')",)
    if context.profile is not None:
        argv += list(context.profile.args)
        env.update(context.profile.env)
    description = (
        f"torchrun: {config.launch.nnodes} node(s) x "
        f"{config.launch.nproc_per_node} process(es), "
        f"{config.parallel.strategy}, {context.model.hf_architecture}"
    )
    if notes:
        description += "; " + "; ".join(notes)
    snapshots: tuple[str, ...] = ()
    if context.memory_snapshot:
        argv += ["--memory-snapshot", str(context.run_dir / SNAPSHOT_DIR)]
        snapshots = (f"{SNAPSHOT_DIR}/snapshot-rank*.pickle",)
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        description=description,
        notes=missing,
        snapshot_globs=snapshots,
        framework=framework_settings(context),
    )


def framework_settings(context: LaunchContext) -> FrameworkSettings:
    """The trainer's settings: it reads the whole config (``config.toml``) and decides nothing else.

    PyTorch's own choices that shape a step are fixed by the trainer's code: the loss on
    every token, no fused kernels beyond PyTorch's scaled-dot-product attention, gradients
    reduced by DDP's buckets or FSDP2's reduce-scatter, which overlap the backward pass.
    """
    config, model = context.config, context.model
    sharded = config.parallel.strategy == "fsdp2"
    return FrameworkSettings(
        framework="tprimat torch trainer (PyTorch, transformers)",
        rendered={"config.toml": "the final config, every field", "attn_implementation": attention_name(config)},
        shared={
            "loss.eod_mask": False,
            "norm.epsilon": model.rms_norm_eps,
            "init.std": config.training.init_method_std,
            "dropout.hidden": 0.0,
            "dropout.attention": 0.0,
            "precision.dtype": config.precision.dtype,
            "precision.fp8_format": None,
            "precision.fp8_recipe": None,
            "precision.fp8_amax_history_len": None,
            "precision.fp8_amax_compute_algo": None,
            "attention.kernel": f"sdpa:{config.kernels.attention_backend}",
            "loss.fused_cross_entropy": False,
            "grad.accumulation_fusion": False,
            "kernels.fused_rope": False,
            "kernels.fused_swiglu": False,
            "recompute": config.training.recompute,
            "optimizer.distributed": sharded,
            "overlap.grad_reduce": True,
            "overlap.param_gather": sharded,
        },
    )


def attention_name(config: Any) -> str:
    from tprimat.plugins.torch.model import ATTENTION_IMPLEMENTATION

    return ATTENTION_IMPLEMENTATION[config.kernels.attention_backend]
