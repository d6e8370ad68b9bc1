"""System profilers (Nsight Systems, rocprofv3) applied to the training worker processes.

Profiling the launcher instead of the workers gives empty output: ``nsys
profile bash run.sh`` or ``rocprofv3 -- torchrun ...`` trace a process that
never touches the GPU (torchrun's children do).  tprimat therefore applies a
system profiler in one of two ways:

* **wrap** (default): rewrite a ``torchrun`` command so that every worker runs
  under the profiler, using torchrun's ``--no-python``::

      torchrun --nproc-per-node 8 --no-python nsys profile ... -- python -u pretrain_gpt.py ...

  Each worker writes its own report, named by its ``RANK``
  (``nsys_rank%q{RANK}``, ``rocprof_rank%env{RANK}%``).
* **attach** (AMD, for launchers that are shell scripts): start the job with
  ``ROCP_TOOL_ATTACH=1``, find the worker PIDs below the launcher
  (:func:`worker_pids`, from ``/proc``), and attach ``rocprofv3 --attach PID``
  to each for a bounded time (``timeout --signal=INT``).

Nsight Systems records only between ``cudaProfilerStart`` and
``cudaProfilerStop`` when ``capture_range`` is set
(``--capture-range=cudaProfilerApi --capture-range-end=stop``): Megatron-LM's
``--profile`` (without ``--use-pytorch-profiler``) and NeMo's ``NsysCallback``
open and close that range around the profiled iterations.

Everything here builds commands; nothing is started.  :func:`describe` gives
the exact shell line of a rewritten plan, for a dry run to print.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from tprimat.errors import TprimatError
from tprimat.contract.plans import LaunchPlan

TOOLS = ("nsys", "rocprofv3")

# torchrun options that take a value (as a separate token when written without "=")
_TORCHRUN_VALUED = frozenset(
    {
        "--nnodes", "--nproc-per-node", "--nproc_per_node", "--rdzv-backend", "--rdzv_backend",
        "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--rdzv-conf", "--rdzv_conf",
        "--max-restarts", "--max_restarts", "--monitor-interval", "--monitor_interval",
        "--start-method", "--start_method", "--role", "--log-dir", "--log_dir", "-r", "--redirects",
        "-t", "--tee", "--local-ranks-filter", "--local_ranks_filter", "--node-rank", "--node_rank",
        "--master-addr", "--master_addr", "--master-port", "--master_port", "--local-addr",
        "--local_addr", "--logs-specs", "--logs_specs", "--rdzv-timeout", "--event-log-handler",
        "--numa-binding", "--signals-to-handle", "--virtual-local-rank",
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
    (wrap the workers through their launcher instead, or use attach mode).
    """
    argv = list(argv)
    start = _torchrun_start(argv)
    if start is None:
        raise TprimatError(
            "cannot wrap the workers: the launch command does not run torchrun; "
            "use attach mode (rocprofv3) or a launcher that exposes torchrun"
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


# -- attach mode (rocprofv3) ---------------------------------------------------------------


def attach_environment() -> dict[str, str]:
    """Environment the job must start with so that rocprofv3 can attach to its workers later."""
    return {"ROCP_TOOL_ATTACH": "1"}


def attach_command(pid: int, profiler: SystemProfiler, duration_s: float, rank: int | str) -> list[str]:
    """``rocprofv3 --attach PID`` for one worker, stopped after ``duration_s`` by SIGINT (detach)."""
    if profiler.tool != "rocprofv3":
        raise TprimatError("attach mode is available for rocprofv3 only (Nsight Systems wraps the workers)")
    if duration_s <= 0:
        raise TprimatError("the attach duration must be positive")
    return [
        "timeout",
        "--signal=INT",
        f"{duration_s:g}",
        "rocprofv3",
        "--attach",
        str(pid),
        "--kernel-trace",
        "--memory-copy-trace",
        "--hip-runtime-trace",
        "--attach-sync-output",
        "--output-format",
        "rocpd",
        "-d",
        str(profiler.output_dir),
        "-o",
        f"rocprof_rank{rank}",
        *profiler.extra_args,
    ]


def _children(pid: int, proc: Path) -> list[int]:
    found: list[int] = []
    task_dir = proc / str(pid) / "task"
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            text = (task / "children").read_text()
        except OSError:
            continue
        found.extend(int(x) for x in text.split())
    return found


def _cmdline(pid: int, proc: Path) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _environ_rank(pid: int, proc: Path) -> str | None:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for part in raw.split(b"\0"):
        if part.startswith(b"RANK="):
            return part[5:].decode(errors="replace")
    return None


def worker_pids(root: int, proc: Path = Path("/proc")) -> list[tuple[int, str | None]]:
    """The training workers below ``root``: python processes that no other python process parents.

    Returns (pid, RANK from its environment or None), ordered by rank then pid.
    Launcher shells and torchrun's own agent are skipped: the agent is a python
    process, but its children (the workers) are python too, and only the
    leaves of the python tree run training.
    """
    workers: list[tuple[int, str | None]] = []
    stack = [root]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        children = _children(pid, proc)
        stack.extend(children)
        argv = _cmdline(pid, proc)
        if not argv or not os.path.basename(argv[0]).startswith("python"):
            continue
        python_below = any(
            (c := _cmdline(child, proc)) and os.path.basename(c[0]).startswith("python")
            for child in _descendants(pid, proc)
        )
        if not python_below:
            workers.append((pid, _environ_rank(pid, proc)))

    def key(item: tuple[int, str | None]) -> tuple[int, int]:
        rank = item[1]
        return (int(rank) if rank is not None and rank.isdigit() else 1 << 30, item[0])

    return sorted(workers, key=key)


def _descendants(pid: int, proc: Path) -> list[int]:
    out: list[int] = []
    stack = _children(pid, proc)
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(_children(child, proc))
    return out


def describe(argv: Sequence[str]) -> str:
    """The exact command as a shell line (what ``--dry-run`` prints)."""
    return shlex.join(list(argv))
