"""Supervising a job's processes: one process group, teed output, deadlines, signals, no orphans.

Shared by the runner (a backend's launch plan) and suites (one ``tprimat run``
per run): a child started here dies with its parent (``PR_SET_PDEATHSIG``),
what a launcher leaves outside its process group is found by an environment
marker and killed, and Ctrl-C is forwarded to the whole group with a grace
period before SIGKILL.

A kill never reaches beyond the job: the group signalled is the session the
runner started for it, signalled only while its leader is not yet reaped (so
its id cannot have been reused), and the marker is made fresh for each job
(``TPRIMAT_RUNNER_TOKEN``), never shared with another command or run.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract.plans import LaunchPlan
from tprimat.secrets import redact_text

#: Seconds the workers get after SIGINT/SIGTERM/timeout before the group is killed.
GRACE_S = 40.0
LOG_TAIL_LINES = 30
#: Set in the job's environment: the runner's process id, so that a worker started after
#: its launcher was killed can tell it has been orphaned.
RUNNER_PID_ENV = "TPRIMAT_RUNNER_PID"
#: Set in the job's environment: a marker made for this job alone, to find what it leaves behind.
RUNNER_TOKEN_ENV = "TPRIMAT_RUNNER_TOKEN"
#: The markers of the jobs this process started that have not been waited for.
_STARTED: list[str] = []


def die_with_parent_hook() -> Callable[[], None] | None:
    """A pre-exec function asking Linux to kill the child when the runner dies.

    libc is resolved here, in the parent: the child between fork and exec must
    not import anything (another thread may hold the import lock).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    parent = os.getpid()

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the runner died before the request took effect
            os._exit(137)

    return hook


def kill_leftovers(token: str | None = None) -> list[int]:
    """Kill what a job left behind outside its process group (launchers such as torchrun
    start workers in sessions of their own): the processes carrying the job's marker
    (``token``; None: every job this process started and has not waited for), and nothing else."""
    from tprimat.running.orphans import kill_marked

    killed: list[int] = []
    for marker in [token] if token is not None else list(_STARTED):
        killed += kill_marked(RUNNER_TOKEN_ENV, marker)
    return killed


class ProcessExecution:
    """One launch plan's process: started, teed, its lines handed out, stopped on request."""

    def __init__(self, plan: LaunchPlan, log_path: Path, *, timeout_s: float = 0, grace_s: float = GRACE_S) -> None:
        self.plan = plan
        self.log_path = log_path
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.lines_queue: queue.Queue[tuple[str, float] | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        self.last_arrival = 0.0
        self.interrupted = False
        self.timed_out = False
        self.closed = False  # the process closed its output
        self.proc: subprocess.Popen[str] | None = None
        self._kill_at: float | None = None
        self._reader: threading.Thread | None = None
        self.token = ""  # the job's marker, made when it starts

    def start(self) -> None:
        env = os.environ.copy()
        env.update(self.plan.env)
        env[RUNNER_PID_ENV] = str(os.getpid())  # workers check they still descend from it
        from tprimat.running.orphans import new_marker

        self.token = new_marker("job")
        env[RUNNER_TOKEN_ENV] = self.token
        _STARTED.append(self.token)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            list(self.plan.argv),
            cwd=self.plan.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
            preexec_fn=die_with_parent_hook(),
        )
        self.started = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="tprimat-log-tee", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log_path.open("w", encoding="utf-8") as log:
            for line in self.proc.stdout:
                line = redact_text(line)
                log.write(line)
                log.flush()
                self.tail.append(line.rstrip("\n"))
                self.lines_queue.put((line, time.time()))
        self.lines_queue.put(None)

    def signal_group(self, sig: int) -> None:
        """Signal the job's process group, only while its leader is unreaped (its id still ours)."""
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def interrupt(self) -> None:
        """Forward an interruption to the whole group; a second one kills at once."""
        if self.interrupted:
            self.signal_group(signal.SIGKILL)
            return
        self.interrupted = True
        self.signal_group(signal.SIGINT)
        self._kill_at = time.monotonic() + self.grace_s

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        if self.timeout_s and not self.timed_out and now - self.started > self.timeout_s:
            self.timed_out = True
            self.signal_group(signal.SIGTERM)
            self._kill_at = now + min(self.grace_s, 10.0)
        if self._kill_at is not None and now > self._kill_at:
            self.signal_group(signal.SIGKILL)
            self._kill_at = None

    def lines(self) -> Iterator[str]:
        """The process's output lines as they arrive, until it closes its output."""
        while not self.closed:
            try:
                item = self.lines_queue.get(timeout=0.2)
            except queue.Empty:
                self._check_deadlines()
                continue
            if item is None:
                self.closed = True
                return
            line, self.last_arrival = item
            self._check_deadlines()
            yield line

    def drain(self) -> None:
        for _ in self.lines():
            pass

    def wait(self) -> int:
        assert self.proc is not None
        while not _has_exited(self.proc):
            time.sleep(0.05)
            self._check_deadlines()
        if self._reader is not None:
            self._reader.join(timeout=5)
        # The leader has exited but is not reaped yet, so the group's id cannot belong to
        # anyone else: nothing of the group outlives the run.
        self.signal_group(signal.SIGKILL)
        code = self.proc.wait()
        kill_leftovers(self.token)
        if self.token in _STARTED:
            _STARTED.remove(self.token)
        return code


def _has_exited(proc: subprocess.Popen[str]) -> bool:
    """Whether ``proc`` has exited, leaving it unreaped (its pid stays reserved) where possible."""
    if proc.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # no waitid: reap it (the group is then signalled by marker only)
        return proc.poll() is not None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped elsewhere
        return proc.poll() is not None


@attrs.define
class SignalForwarding:
    """Route SIGINT/SIGTERM to the execution while it runs (main thread only)."""

    execution: ProcessExecution
    previous: dict[int, Any] = attrs.Factory(dict)

    def __enter__(self) -> SignalForwarding:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda *_: self.execution.interrupt())
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
