"""Figures at fixed byte offsets of lines of one length, read as columns: in C where built.

The lines of one shape of a dense training log hold each figure at the same byte offsets
(see :mod:`~tprimat.plugins.megatron_core.runs`), so a run of them is read by slicing each
figure out of every line and reading it as ``float`` or ``int`` reads it, or keeping its
bytes.  :data:`READ_ITEMS` does that for a run at once::

    READ_ITEMS(b"".join(lines), size, [(start, stop, kind), ...])  # one list per item

``kind`` is :data:`KINDS` of the reader: 0 bytes, 1 ``float``, 2 ``int``.  It is the
compiled module ``_offsets`` (``_offsets.c``), built at install where a C compiler is found
(``setup.py``; optional: an install without a compiler goes on without it). Where it is not
built, or the environment sets ``TPRIMAT_PURE_PYTHON`` to anything but empty or ``0``, it is
None and the fast lane reads its items in Python (``Shape.texts`` and ``_read`` in
:mod:`tprimat.plugins.megatron.fastlane`), value for value the same: ``_offsets`` reads a text
of plain number characters as ``float`` and ``int`` read it (``PyOS_string_to_double``; up to
18 digits by their digits) and hands any other text to ``float`` or ``int`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

#: The kind of item of each reader the compiled reader reads: None (the bytes), float, int.
KINDS: dict[Any, int] = {None: 0, float: 1, int: 2}

#: Reads ``(data, size, items)``: the columns of ``items`` in the lines of ``size`` bytes of ``data``.
ItemsReader = Callable[[bytes, int, Sequence[tuple[int, int, int]]], list[list[Any]]]


def compiled_reader() -> ItemsReader | None:
    """The compiled reader, or None where it is not built or ``TPRIMAT_PURE_PYTHON`` asks for Python."""
    if os.environ.get("TPRIMAT_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from tprimat.plugins.megatron_core._offsets import read_items
    except ImportError:
        return None
    return read_items


#: The compiled reader in use (see :func:`compiled_reader`), or None: the fast lane reads in Python.
READ_ITEMS: ItemsReader | None = compiled_reader()
