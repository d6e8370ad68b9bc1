"""The compiled reader of figures at fixed offsets (``_offsets.c``; see ``offsets.py``)."""

from collections.abc import Sequence
from typing import Any

def read_items(data: bytes, size: int, items: Sequence[tuple[int, int, int]]) -> list[list[Any]]: ...
