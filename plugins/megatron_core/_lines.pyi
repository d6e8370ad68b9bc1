"""Compiled readers of training log lines (``_lines.c``; see ``compiled.py``)."""

from collections.abc import Sequence
from typing import Any

def read_rows(
    chunk: bytes,
    spans: list[tuple[int, int]],
    index: int,
    size: int,
    shapes: dict[bytes, Any],
    width: int,
    iteration: int,
    previous: int,
) -> list[list[Any]]: ...
def line_numbers(chunk: bytes, spans: list[tuple[int, int]], count: int, offset: int, before: int) -> list[int]: ...
def trigger_spans(chunk: bytes, triggers: Sequence[bytes]) -> list[tuple[int, int]]: ...
