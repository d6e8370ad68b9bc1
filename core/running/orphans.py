"""Find and kill what is left of a job, by a marker in its processes' environment.

A launcher such as torchrun starts its workers in sessions of their own, so
killing the launcher's process group does not reach them, and a framework's
workers (Megatron-LM, Primus, NeMo) ask for no death signal.  Every process
of a job inherits the environment it was started with, though, so whatever
survives its parent can still be found by a marker put there.

A marker is made fresh by the command that starts the job (:func:`new_marker`)
and names nothing shared: ``tprimat run`` marks each job it starts
(``TPRIMAT_RUNNER_TOKEN``) and a suite marks the runs it starts
(``TPRIMAT_SUITE_TOKEN``), so a kill by marker reaches the processes that one
command started and never those of another command, even one working on the
same run.  Linux only (``/proc``); processes of other users cannot be read and
are left alone.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import uuid
from pathlib import Path


def new_marker(kind: str) -> str:
    """A marker no other command has: ``<kind>-<host>-<pid>-<random>``."""
    return f"{kind}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:16]}"


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
