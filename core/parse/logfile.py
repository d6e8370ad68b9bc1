"""A log file as parsers read it: its lines, streamed, and the same lines in large byte chunks.

Iterating a :class:`LogFile` gives its lines as text (UTF-8, undecodable bytes
replaced, any line ending), like iterating an open file; nothing is read
until asked for and memory stays flat.  Parsers that only want a few lines
of a large log can instead call :meth:`LogFile.byte_chunks` and search the
bytes for their trigger substrings at C speed, which is how ``tprimat parse``
reads gigabyte logs faster than line-by-line Python can.  Both views hold the
same lines with the same numbers; a last line that has no newline (the
writer stopped mid-line) can be left out of both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

#: Bytes read at a time by :meth:`LogFile.byte_chunks` (extended to the next newline).
CHUNK_BYTES = 1 << 22


class LogFile:
    """The lines of one file on disk, readable twice: as text lines or as byte chunks."""

    def __init__(self, path: str | Path, *, drop_last_line: bool = False,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        self.path = Path(path)
        self.drop_last_line = drop_last_line
        self.chunk_bytes = chunk_bytes

    def __iter__(self) -> Iterator[str]:
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
            while True:
                chunk = handle.read(self.chunk_bytes)
                if not chunk:
                    return
                if not chunk.endswith(b"\n"):
                    chunk += handle.readline()
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
