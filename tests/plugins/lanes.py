"""Reading a log two ways, for the tests of the parsers' fast lanes.

A parser read from a log's bytes yields runs of lines as :class:`IterationBlock`s; read from
its text lines, every line goes through the line reader, which defines the records.  The two
must give the same events, blocks made into their records, and leave the parser in the same
state.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tprimat.contract import IterationBlock, LogFile
from tprimat.plugins.megatron_core.stream import iter_events

ROOT = Path(__file__).resolve().parents[2]


def denselogs() -> Any:
    """``bench/denselogs.py``, which builds dense logs from the fixtures (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("denselogs", ROOT / "bench" / "denselogs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_both(parser: Callable[[str], Any], path: Path, chunk_bytes: int | None = None) -> tuple[list, list, int]:
    """The events read from the bytes of ``path`` (blocks made into records) and from its text
    lines, each followed by the parser's state when it has one, and how many records came in blocks."""
    kwargs = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
    by_bytes, from_bytes, in_blocks = parser(path.name), [], 0
    for event in iter_events(by_bytes, LogFile(path, **kwargs)):
        if isinstance(event, IterationBlock):
            in_blocks += len(event)
            from_bytes.extend(event.records())
        else:
            from_bytes.append(event)
    by_text = parser(path.name)
    from_text = list(iter_events(by_text, path.read_text(encoding="utf-8", errors="replace").splitlines(True)))
    if hasattr(by_bytes, "state"):
        from_bytes.append(by_bytes.state())
        from_text.append(by_text.state())
    return from_bytes, from_text, in_blocks


def assert_same(a: list, b: list) -> None:
    """The same events in the same order (compared as text: a NaN loss equals itself so)."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert repr(x) == repr(y)


def with_one_line_edited(path: Path, target: Path, marker: bytes, pattern: bytes, replacement: Any) -> Path:
    """A copy of ``path`` at ``target`` whose line holding ``marker`` has ``pattern`` replaced once
    (``re.sub``): a line well inside a log, where runs are read at once."""
    data = path.read_bytes()
    start = data.index(marker)
    start, end = data.rindex(b"\n", 0, start) + 1, data.index(b"\n", start) + 1
    line = re.sub(pattern, replacement, data[start:end], count=1)
    assert line != data[start:end]
    target.write_bytes(data[:start] + line + data[end:])
    return target
