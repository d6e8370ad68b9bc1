"""Open a profiler's SQLite database read-only: Nsight Systems exports and rocprofv3's rocpd files.

A gzip-compressed database is inflated (within :func:`~tprimat.trace.limits.inflation_limit`)
to a temporary file first, because SQLite reads only plain files; the temporary file is
removed when the connection is closed.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tprimat.trace.reader import Inflated, TraceFormatError, open_binary

#: The first bytes of every SQLite 3 database.
SQLITE_MAGIC = b"SQLite format 3\x00"


@contextlib.contextmanager
def open_database(path: Path) -> Iterator[sqlite3.Connection]:
    """The database opened read-only (a gzip one inflated to a temporary file first)."""
    with open_binary(path) as fh:
        compressed = isinstance(fh, Inflated)
        head = fh.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise TraceFormatError(f"{path}: not an SQLite database")
    plain, tmp = path, None
    try:
        if compressed:
            with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as tmp, open_binary(path) as fh:
                shutil.copyfileobj(fh, tmp)
            plain = Path(tmp.name)
        try:
            con = sqlite3.connect(f"{plain.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise TraceFormatError(f"{path}: cannot open the SQLite export: {exc}") from None
        try:
            yield con
        finally:
            con.close()
    finally:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)
