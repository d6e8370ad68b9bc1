"""The suite lock: one command per suite directory, its holder named, a stale lock taken over safely.

The holders are real processes (a lock is the kernel's, released when its holder
dies): a helper process takes the lock and waits, and the test kills it with
SIGKILL or lets it go.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tprimat.suite.lock import LOCK_FILE, SuiteLockedError, acquire

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

#: Takes the lock of argv[1] once argv[2] exists (or at once), says so, holds it until stdin closes.
HOLDER = """
import sys, time
from pathlib import Path
from tprimat.suite.lock import SuiteLockedError, acquire
go = Path(sys.argv[2]) if len(sys.argv) > 2 else None
while go is not None and not go.exists():
    time.sleep(0.001)
try:
    lock = acquire(Path(sys.argv[1]), command="holder " + sys.argv[1])
except SuiteLockedError as exc:
    print("refused", exc, flush=True)
    sys.exit(2)
print("holding", lock.previous.pid if lock.previous else "-", flush=True)
sys.stdin.read()
lock.release()
"""


def start_holder(directory: Path, go: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", HOLDER, str(directory), *([str(go)] if go else [])]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_second_command_is_refused_and_told_who_holds_the_lock(tmp_path):
    holder = start_holder(tmp_path)
    try:
        assert holder.stdout.readline().split() == ["holding", "-"]
        with pytest.raises(SuiteLockedError) as info:
            acquire(tmp_path)
        message = str(info.value)
        assert f"pid {holder.pid} on {socket.gethostname()}, started 20" in message
        assert f"holder {tmp_path}" in message  # the command
        assert "--wait" in message and info.value.exit_code == 2
    finally:
        holder.stdin.close()
        holder.wait()
    with acquire(tmp_path) as lock:  # released: free again, and nothing was taken over
        assert lock.previous is None
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_wait_starts_once_the_holder_is_done(tmp_path):
    holder = start_holder(tmp_path)
    assert holder.stdout.readline().startswith("holding")
    told = []

    def waiting(who):
        told.append(who)
        holder.stdin.close()  # the holder ends while we wait

    with acquire(tmp_path, wait=True, on_wait=waiting) as lock:
        assert [who.pid for who in told] == [holder.pid]
        assert lock.previous is None  # released properly: not a stale lock
    holder.wait()


def test_a_lock_left_by_a_killed_holder_is_taken_over_by_exactly_one_of_two_takers(tmp_path):
    for _ in range(3):
        dead = start_holder(tmp_path)
        assert dead.stdout.readline().startswith("holding")
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == dead.pid  # its name is left behind
        go = tmp_path / "go"
        takers = [start_holder(tmp_path, go) for _ in range(2)]
        time.sleep(0.3)  # both started and polling for the signal
        go.touch()
        answers = {taker.stdout.readline().split()[0]: taker for taker in takers}
        assert sorted(answers) == ["holding", "refused"]
        winner, loser = answers["holding"], answers["refused"]
        assert loser.wait() == 2
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == winner.pid
        winner.stdin.close()
        winner.wait()
        go.unlink()


def test_the_taker_is_told_whose_stale_lock_it_took_over(tmp_path):
    dead = start_holder(tmp_path)
    assert dead.stdout.readline().startswith("holding")
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    with acquire(tmp_path) as lock:
        assert lock.previous is not None and lock.previous.pid == dead.pid
        assert lock.previous.token != lock.holder.token


def test_a_live_holder_named_in_the_file_is_never_taken_over(tmp_path):
    """On a file system whose locks are not shared, the name of a live process still protects it."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stat = Path(f"/proc/{live.pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        name = {
            "pid": live.pid,
            "host": socket.gethostname(),
            "started_at": "2025-01-01T00:00:00+00:00",
            "command": "tprimat suite resume x",
            "token": "suite-x",
            "process_start": f"{boot}:{stat[stat.rindex(')') + 2 :].split()[19]}",
        }
        (tmp_path / LOCK_FILE).write_text(json.dumps(name))  # named, but nobody holds the kernel lock
        with pytest.raises(SuiteLockedError, match=f"pid {live.pid} on"):
            acquire(tmp_path)
    finally:
        live.kill()
        live.wait()
    with acquire(tmp_path) as lock:  # now gone: a stale name, taken over
        assert lock.previous is not None and lock.previous.pid == live.pid
