"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Results, manifests and suite state are written to a temporary file in the
same directory, flushed to disk, then renamed over the target; the directory
entry is synced too, so a power cut right after the call keeps the new file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write_text(path: str | Path, text: str | Iterable[str]) -> Path:
    """Write ``text`` (or its pieces, in order) to ``path`` atomically, in UTF-8 (see :func:`atomic_write_bytes`)."""
    pieces = [text] if isinstance(text, str) else text
    return atomic_write_bytes(path, (piece.encode("utf-8") for piece in pieces))


def atomic_write_bytes(path: str | Path, pieces: Iterable[bytes]) -> Path:
    """Write ``pieces``, in order, to ``path`` atomically (temp file + fsync + rename + dir fsync)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())  # mkstemp creates 0600; use the usual mode
        with os.fdopen(fd, "wb") as handle:
            for piece in pieces:
                handle.write(piece)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not allow opening directories; the rename still happened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
