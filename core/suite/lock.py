"""One command at a time per suite directory: a lock that names its holder and cannot go stale.

``tprimat suite run`` and ``resume`` hold ``<suite directory>/suite.lock`` for as
long as they run.  The lock itself is the kernel's (``flock`` on that file): it
is released when its holder exits, however it exits (kill -9 included), and of
two commands asking for it at the same moment exactly one gets it, so taking
over a lock left by a killed suite needs no check-then-act that could race.
The file's content names the holder (pid, host, start time, command, and the
marker its processes carry) for the message a second command prints; the
holder empties it on release.  Content found by the next holder therefore means
the previous one died holding the lock: a stale lock, which the next holder
takes over after checking that the process it names is gone (when it ran on
this host), and whose leftover processes it then stops by their marker.

The lock needs a file system that supports ``flock`` (local ones, NFSv4, Lustre
mounted with ``flock``); on one that does not, the suite refuses to start.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs

from tprimat.errors import TprimatError
from tprimat.running.orphans import kill_marked, new_marker

LOCK_FILE = "suite.lock"
#: In every process a suite command starts: the marker of that command (its lock's token),
#: to find what outlived it.  Never shared by two commands, even on the same run.
SUITE_TOKEN_ENV = "TPRIMAT_SUITE_TOKEN"
#: How long a command that finds the lock held waits for its holder to have written its name.
_NAME_WAIT_S = 2.0


class SuiteLockedError(TprimatError):
    """Another command holds the suite directory (exit code 2), or it cannot be locked at all."""


@attrs.frozen(kw_only=True)
class Holder:
    """Who holds (or held) a suite directory's lock."""

    pid: int
    host: str
    started_at: str  # ISO 8601, UTC
    command: str
    #: In the environment of every process the holder starts (``TPRIMAT_SUITE_TOKEN``).
    token: str
    #: Identifies the process beyond its pid, which the kernel reuses: boot id and start tick.
    process_start: str = ""

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started_at}: {self.command}"

    def alive_on_this_host(self) -> bool:
        """Whether the process this names still runs here (False when it ran on another host)."""
        if self.host != socket.gethostname():
            return False
        if self.process_start:
            return _process_start(self.pid) == self.process_start
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _process_start(pid: int) -> str:
    """``<boot id>:<start tick>`` of a live process, or "" (gone, or not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has ended
        return ""
    return f"{boot}:{fields[19]}"  # field 22 of stat: start time in clock ticks since boot


def _this_process(command: str | None) -> Holder:
    return Holder(
        pid=os.getpid(),
        host=socket.gethostname(),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        command=command or shlex.join(["tprimat", *sys.argv[1:]]),
        token=new_marker("suite"),
        process_start=_process_start(os.getpid()),
    )


def _read_holder(fd: int) -> Holder | None:
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8"))
        return Holder(**{field.name: data[field.name] for field in attrs.fields(Holder) if field.name in data})
    except (OSError, ValueError, TypeError, UnicodeDecodeError):
        return None  # empty (free, or its holder is writing its name) or unreadable


def _write_holder(fd: int, holder: Holder) -> None:
    data = json.dumps(attrs.asdict(holder), indent=2).encode("utf-8") + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


@attrs.define
class SuiteLock:
    """A held suite lock: who holds it (this process) and whom it was taken over from."""

    path: Path
    holder: Holder
    #: The holder that died holding the lock, when it was taken over (None: it was free).
    previous: Holder | None
    _fd: int | None

    def release(self) -> None:
        """Empty the file (nobody holds it) and let go; safe to call twice."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # a stale name is taken for a dead holder's; the lock itself goes with the close
        finally:
            os.close(fd)

    def __enter__(self) -> SuiteLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_now(fd: int, path: Path, *, block: bool) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError as exc:
        raise SuiteLockedError(
            f"cannot lock {path}: {exc.strerror or exc} (the file system does not support file locks); "
            "put the suite directory on one that does"
        ) from None
    return True


def _holder_of(fd: int) -> Holder | None:
    """The name a holder has written, waiting a moment for one that has just taken the lock."""
    deadline = time.monotonic() + _NAME_WAIT_S
    holder = _read_holder(fd)
    while holder is None and time.monotonic() < deadline:
        time.sleep(0.05)
        holder = _read_holder(fd)
    return holder


def acquire(
    directory: Path,
    *,
    wait: bool = False,
    on_wait: Callable[[Holder | None], None] | None = None,
    command: str | None = None,
) -> SuiteLock:
    """Take the lock of ``directory`` (which must exist).

    Held by another command: :class:`SuiteLockedError` naming it, or with ``wait``
    block until it is released (``on_wait`` is told whom it waits for first).  A
    stale lock is taken over, and what its holder left running is stopped.
    """
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise SuiteLockedError(f"cannot open the suite lock {path}: {exc.strerror or exc}") from None
    try:
        told = False
        while True:
            if not _lock_now(fd, path, block=False):
                holder = _holder_of(fd)
                if not wait:
                    who = holder.describe() if holder else "a command that has not written its name"
                    raise SuiteLockedError(
                        f"{directory} is in use by another tprimat command ({who}); "
                        "wait for it to end, or pass --wait to start when it does"
                    )
                if on_wait is not None and not told:
                    on_wait(holder)
                told = True
                _lock_now(fd, path, block=True)
            previous = _read_holder(fd)
            if previous is None or not previous.alive_on_this_host():
                break
            # Locked by us, yet named by a live process: this file system does not share
            # locks between the processes using it.  Never take a live suite's place.
            fcntl.flock(fd, fcntl.LOCK_UN)
            if not wait:
                raise SuiteLockedError(
                    f"{directory} is in use by another tprimat command ({previous.describe()}), "
                    "and its file system does not share file locks; wait for it to end"
                )
            if on_wait is not None and not told:
                on_wait(previous)
            told = True
            time.sleep(1.0)
        holder = _this_process(command)
        _write_holder(fd, holder)
    except BaseException:
        os.close(fd)
        raise
    if previous is not None:
        # A stale lock: its holder died, maybe leaving a framework's workers (they ask for no
        # death signal) that must not write into a run about to be retried.  Its marker is its
        # own, so nothing of any other command is touched.
        kill_marked(SUITE_TOKEN_ENV, previous.token)
    return SuiteLock(path=path, holder=holder, previous=previous, fd=fd)


__all__ = ["LOCK_FILE", "SUITE_TOKEN_ENV", "Holder", "SuiteLock", "SuiteLockedError", "acquire"]
