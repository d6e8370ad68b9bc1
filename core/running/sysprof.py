"""System profilers (Nsight Systems, rocprofv3) applied to the training worker processes.

Profiling the launcher instead of the workers gives empty output: ``nsys
profile bash run.sh`` or ``rocprofv3 -- torchrun ...`` trace a process that
never touches the GPU (torchrun's children do).  tprimat therefore applies a
system profiler by rewriting a ``torchrun`` command so that every worker runs
under the profiler, using torchrun's ``--no-python``::

    torchrun --nproc-per-node 8 --no-python nsys profile ... -- python -u pretrain_gpt.py ...

Each worker writes its own report, named by its ``RANK``
(``nsys_rank%q{RANK}``, ``rocprof_rank%env{RANK}%``).  A launch plan that does
not run torchrun itself (a launcher script) cannot be wrapped and is refused.

Nsight Systems records only between ``cudaProfilerStart`` and
``cudaProfilerStop`` when ``capture_range`` is set
(``--capture-range=cudaProfilerApi --capture-range-end=stop``): Megatron-LM's
``--profile`` (without ``--use-pytorch-profiler``) and NeMo's ``NsysCallback``
open and close that range around the profiled iterations.

Everything here builds commands; nothing is started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from tprimat.contract.plans import LaunchPlan
from tprimat.errors import TprimatError

TOOLS = ("nsys", "rocprofv3")

# torchrun options that take a value (as a separate token when written without "=")
_TORCHRUN_VALUED = frozenset(
    {
        "--nnodes",
        "--nproc-per-node",
        "--nproc_per_node",
        "--rdzv-backend",
        "--rdzv_backend",
        "--rdzv-endpoint",
        "--rdzv_endpoint",
        "--rdzv-id",
        "--rdzv_id",
        "--rdzv-conf",
        "--rdzv_conf",
        "--max-restarts",
        "--max_restarts",
        "--monitor-interval",
        "--monitor_interval",
        "--start-method",
        "--start_method",
        "--role",
        "--log-dir",
        "--log_dir",
        "-r",
        "--redirects",
        "-t",
        "--tee",
        "--local-ranks-filter",
        "--local_ranks_filter",
        "--node-rank",
        "--node_rank",
        "--master-addr",
        "--master_addr",
        "--master-port",
        "--master_port",
        "--local-addr",
        "--local_addr",
        "--logs-specs",
        "--logs_specs",
        "--rdzv-timeout",
        "--event-log-handler",
        "--numa-binding",
        "--signals-to-handle",
        "--virtual-local-rank",
    }
)
_TORCHRUN_MODULE = frozenset({"-m", "--module"})
_TORCHRUN_NO_PYTHON = frozenset({"--no-python", "--no_python"})


@attrs.frozen(kw_only=True)
class SystemProfiler:
    """Which system profiler to apply and where its reports go."""

    tool: str  # "nsys" | "rocprofv3"
    output_dir: Path
    capture_range: bool = False  # nsys: record only between cudaProfilerStart/Stop
    extra_args: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.tool not in TOOLS:
            raise TprimatError(f"unknown system profiler {self.tool!r}; choose one of {', '.join(TOOLS)}")
        if self.capture_range and self.tool != "nsys":
            raise TprimatError("a cudaProfilerApi capture range is an Nsight Systems option (nsys)")


def nsys_prefix(profiler: SystemProfiler) -> list[str]:
    """``nsys profile ...`` for one worker; the report is named by the worker's RANK."""
    argv = [
        "nsys",
        "profile",
        "--trace=cuda,nvtx,osrt,cublas,cudnn",
        "--sample=none",
        "--cpuctxsw=none",
        "--force-overwrite=true",
        f"--output={profiler.output_dir}/nsys_rank%q{{RANK}}",
    ]
    if profiler.capture_range:
        argv += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    return argv + list(profiler.extra_args)


def rocprof_prefix(profiler: SystemProfiler) -> list[str]:
    """``rocprofv3 ... --`` for one worker; the output is named by the worker's RANK."""
    return [
        "rocprofv3",
        "--kernel-trace",
        "--memory-copy-trace",
        "--hip-runtime-trace",
        "--output-format",
        "rocpd",
        "-d",
        str(profiler.output_dir),
        "-o",
        "rocprof_rank%env{RANK}%",
        *profiler.extra_args,
        "--",
    ]


def worker_prefix(profiler: SystemProfiler) -> list[str]:
    return nsys_prefix(profiler) if profiler.tool == "nsys" else rocprof_prefix(profiler)


def _torchrun_start(argv: Sequence[str]) -> int | None:
    """Index of the torchrun executable (or of ``-m torch.distributed.run``'s python) in argv."""
    for i, token in enumerate(argv):
        name = os.path.basename(token)
        if name == "torchrun":
            return i
        if name.startswith("python") and argv[i + 1 : i + 3] == ["-m", "torch.distributed.run"]:
            return i
    return None


def wrap_torchrun(argv: Sequence[str], prefix: Sequence[str], python: str | None = None) -> list[str]:
    """Rewrite a torchrun command so that each worker runs as ``prefix python script args``.

    ``argv`` may start with environment-setting wrappers (``env A=B``) before
    ``torchrun``.  A command without torchrun raises :class:`TprimatError`
    (the workers cannot be reached through a launcher script).
    """
    argv = list(argv)
    start = _torchrun_start(argv)
    if start is None:
        raise TprimatError(
            "cannot wrap the workers: the launch command does not run torchrun; "
            "use a backend whose launch plan runs torchrun itself"
        )
    via_python = os.path.basename(argv[start]).startswith("python")
    head = start + (3 if via_python else 1)
    i = head
    options: list[str] = []
    module = False
    while i < len(argv):
        token = argv[i]
        if token in _TORCHRUN_NO_PYTHON:
            raise TprimatError("the launch command already uses torchrun --no-python; cannot wrap it twice")
        if token in _TORCHRUN_MODULE:
            module = True
            i += 1
            continue
        if token == "--":
            i += 1
            break
        if not token.startswith("-"):
            break
        options.append(token)
        if "=" not in token and token in _TORCHRUN_VALUED:
            if i + 1 >= len(argv):
                raise TprimatError(f"torchrun option {token} has no value")
            options.append(argv[i + 1])
            i += 2
        else:
            i += 1
    if i >= len(argv):
        raise TprimatError("cannot wrap the workers: no training script after the torchrun options")
    script, rest = argv[i], argv[i + 1 :]
    interpreter = python or (argv[start] if via_python else sys.executable)
    worker = [interpreter, "-u", *(["-m"] if module else []), script, *rest]
    return [*argv[:head], *options, "--no-python", *prefix, *worker]


def apply_system_profiler(plan: LaunchPlan, profiler: SystemProfiler, python: str | None = None) -> LaunchPlan:
    """The launch plan with every torchrun worker running under the system profiler."""
    argv = wrap_torchrun(plan.argv, worker_prefix(profiler), python=python)
    env = dict(plan.env)
    description = f"{plan.description} [workers under {profiler.tool}]".strip()
    return attrs.evolve(plan, argv=tuple(argv), env=env, description=description)
