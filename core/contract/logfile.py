"""A log file as parsers read it: its lines, streamed, and the same lines in large byte chunks.

Iterating a :class:`LogFile` gives its lines as text (UTF-8, undecodable bytes
replaced, any line ending), like iterating an open file; nothing is read
until asked for and memory stays flat.  Parsers that only want a few lines
of a large log can instead call :meth:`LogFile.byte_chunks` and search the
bytes for their trigger substrings at C speed, which is how ``tprimat parse``
reads gigabyte logs faster than line-by-line Python can.  Both views hold the
same lines with the same numbers; a last line that has no newline (the
writer stopped mid-line) can be left out of both.

A :class:`LogFile` can also stand for a byte range of its file (``start`` to
``end``, both at the start of a line), so that the ranges of one large file
are read on several cores (see :mod:`tprimat.parse.parallel`).  A range
carries the number of its first line, the reader's state at its start
(``resume_state``) and, once read, the state at its end (``final_state``)
and the number of its lines (``line_count``).  A file that a rotated log
continues in the next file is ``continued``: the reader carries its state
over instead of ending the stream at the file's end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Bytes read at a time by :meth:`LogFile.byte_chunks` (extended to the next newline).
CHUNK_BYTES = 1 << 20  # small enough for a core's cache: each chunk is scanned several times


class LogFile:
    """The lines of one file on disk, readable twice: as text lines or as byte chunks."""

    def __init__(
        self,
        path: str | Path,
        *,
        drop_last_line: bool = False,
        chunk_bytes: int = CHUNK_BYTES,
        start: int = 0,
        end: int | None = None,
        first_lineno: int = 1,
        resume_state: Any = None,
        continued: bool = False,
    ) -> None:
        self.path = Path(path)
        self.drop_last_line = drop_last_line
        self.chunk_bytes = chunk_bytes
        #: Byte range read by :meth:`byte_chunks` (``end`` None: to the end of the file).
        self.start = start
        self.end = end
        #: Number of the first line of the range (1 for a whole file).
        self.first_lineno = first_lineno
        #: Reader state to start from (None: a fresh reader), and the state at the end of the range.
        self.resume_state = resume_state
        #: Whether the stream goes on in the next file (a rotated log): its end is not the stream's.
        self.continued = continued
        self.final_state: Any = None
        #: Whether the reader was past the start-up lines at the end of the range (with final_state):
        #: training had started, or it looks for no more of them from there on.
        self.started = False
        #: The lines of the range, set by a reader that counts them as it reads (None: not counted).
        self.line_count: int | None = None

    @property
    def whole(self) -> bool:
        """Whether this is the whole file (not a range of it)."""
        return self.start == 0 and self.end is None

    @property
    def at_end(self) -> bool:
        """Whether the range ends the stream (where an unfinished line is reported)."""
        return self.end is None and not self.continued

    def __iter__(self) -> Iterator[str]:
        if not self.whole:
            raise ValueError("a range of a log file is read as byte chunks only")
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            if not self.drop_last_line:
                yield from handle
                return
            held = None
            for line in handle:
                if held is not None:
                    yield held
                held = line

    def byte_chunks(self) -> Iterator[bytes]:
        """Whole lines as bytes, about ``chunk_bytes`` at a time, each chunk ending in b"\\n".

        A final line without a newline is yielded as its own chunk unless
        ``drop_last_line`` is set.  Lines may end in ``\\r\\n`` or a lone
        ``\\r`` as well; readers that split on ``\\n`` must check for the latter.
        """
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            position = self.start
            while True:
                if self.end is not None and position >= self.end:
                    return
                chunk = handle.read(self.chunk_bytes)
                if not chunk:
                    return
                if not chunk.endswith(b"\n"):
                    chunk += handle.readline()
                position += len(chunk)
                if chunk.endswith(b"\n"):
                    yield chunk
                    continue
                # End of file inside a line: the whole lines, then the unfinished one.
                cut = chunk.rfind(b"\n") + 1
                if cut:
                    yield chunk[:cut]
                if not self.drop_last_line:
                    yield chunk[cut:]
                return


def chunk_starts(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> list[int]:
    """Where each of :meth:`LogFile.byte_chunks`'s chunks of the whole file starts.

    Found by seeking (a few bytes read per chunk), so a file can be cut into
    ranges that hold exactly the chunks a whole-file read would see.
    """
    starts = [0]
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        position = 0
        while position + chunk_bytes < size:
            handle.seek(position + chunk_bytes - 1)
            if handle.read(1) != b"\n":
                if not handle.readline().endswith(b"\n"):
                    break  # the chunk runs into an unfinished last line
            position = handle.tell()
            if position >= size:
                break
            starts.append(position)
    return starts


_LONE_CR = re.compile(rb"\r(?!\n)")


def newline_count(data: bytes, start: int = 0, end: int | None = None) -> int:
    """``data.count(b"\\n", start, end)``, about twice as fast.

    ``bytes.count`` tests every byte in turn; ``bytes.replace`` jumps from one newline to
    the next with ``memchr`` and copies the text between them in blocks.  Counting newlines
    is one full pass over every byte a reader reads.
    """
    piece = data[start:end] if start or end is not None else data
    return len(piece) - len(piece.replace(b"\n", b""))


def count_lines(path: str | Path, end: int, start: int = 0, block_bytes: int = CHUNK_BYTES) -> int:
    """Lines between bytes ``start`` and ``end`` (both at the start of a line), as the readers count.

    A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r``.
    """
    lines = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        position = start
        while position < end:
            block = handle.read(min(block_bytes, end - position))
            if not block:
                break
            if block.endswith(b"\r") and position + len(block) < end:
                block += handle.read(1)  # keep a "\r\n" in one block
            position += len(block)
            lines += newline_count(block)
            if b"\r" in block:
                lines += len(_LONE_CR.findall(block))
    return lines
