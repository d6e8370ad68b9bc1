"""Find and kill what is left of a job, by a marker in its processes' environment.

A launcher such as torchrun starts its workers in sessions of their own, so
killing the launcher's process group does not reach them, and a framework's
workers (Megatron-LM, Primus, NeMo) ask for no death signal.  Every process
of a job inherits the environment it was started with, though: ``tprimat run``
puts its pid there (``TPRIMAT_RUNNER_PID``) and a suite puts the run
directory there (``TPRIMAT_SUITE_RUN``), so whatever survives its parent can
still be found and killed.  Linux only (``/proc``); processes of other users
cannot be read and are left alone.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def marked_processes(name: str, value: str, proc: Path = Path("/proc")) -> list[int]:
    """Pids of live processes (not this one) whose initial environment has ``name=value``."""
    if not sys.platform.startswith("linux") or not proc.is_dir():
        return []
    wanted = f"{name}={value}".encode()
    own = os.getpid()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :][:1] != "Z":  # a zombie is already dead
            found.append(int(entry.name))
    return sorted(found)


def kill_marked(name: str, value: str) -> list[int]:
    """SIGKILL every process :func:`marked_processes` finds; return their pids."""
    pids = marked_processes(name, value)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids
