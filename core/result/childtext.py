"""Text made by a forked child process while this one goes on.

Writing a long run's result, the second half of its records is encoded by a
child (see :mod:`tprimat.result.resultjson`): the end of ``tprimat parse``
otherwise runs on one core while the others wait.
"""

from __future__ import annotations

import gc
import io
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any


class TextInChild:
    """Text made by a forked child process while this one goes on, read back when needed.

    The child inherits the records as they are in memory (nothing is copied or
    pickled), writes its text to an unnamed temporary file and exits without running
    any of this process's exit handlers.  Only forked from a process with one thread:
    forking one whose other threads may hold locks is unsafe.  When the child fails,
    :meth:`pieces` makes the text in this process instead: the text is the same either
    way.
    """

    def __init__(self, pid: int, file: Any, make: Callable[[], Iterable[str]]) -> None:
        self._pid: int | None = pid
        self._file = file
        self._make = make

    @classmethod
    def start(cls, make: Callable[[], Iterable[str]]) -> TextInChild | None:
        """A child making ``make()``'s pieces, or None where no child can be forked."""
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        try:
            file = tempfile.TemporaryFile()
        except OSError:  # no temporary directory to write to: this process makes it all
            return None
        try:
            pid = os.fork()
        except OSError:
            file.close()
            return None
        if pid == 0:  # the child: its text into the file, then out, whatever happens
            code = 1
            try:
                gc.disable()  # nothing it makes is a cycle; a collection would touch every shared page
                with open(file.fileno(), "w", encoding="utf-8", closefd=False) as out:
                    out.writelines(make())
                code = 0
            finally:
                os._exit(code)
        return cls(pid, file, make)

    def pieces(self) -> Iterator[str]:
        """The child's text, once it has exited (made here if it failed)."""
        if not self._wait():
            yield from self._make()
            return
        self._file.seek(0)
        text = io.TextIOWrapper(self._file, encoding="utf-8")
        while piece := text.read(_READ_CHARS):
            yield piece

    def close(self) -> None:
        """End the child if it still runs, and drop its file."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._wait()
        self._file.close()

    def _wait(self) -> bool:
        """Wait for the child; whether it made its text."""
        pid, self._pid = self._pid, None
        if pid is None:
            return False
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0


_READ_CHARS = 1 << 20
