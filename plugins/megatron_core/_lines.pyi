"""Compiled readers of training log lines (``_lines.c``; see ``compiled.py``)."""

from collections.abc import Sequence
from typing import Any

def read_items(data: bytes, size: int, items: Sequence[tuple[int, int, int]]) -> list[list[Any]]: ...
def trigger_spans(chunk: bytes, triggers: Sequence[bytes]) -> list[tuple[int, int]]: ...
