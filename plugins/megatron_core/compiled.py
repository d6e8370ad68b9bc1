"""The compiled readers of log lines, where they are built: each stands for a Python reader.

A dense training log (``--log-interval 1``) is mostly iteration lines, and two steps of
reading one cost more in Python than all the rest: finding the lines that hold a trigger
(:func:`tprimat.plugins.megatron_core.stream.iter_events`) and reading the figures of a run
of lines of one shape (:mod:`tprimat.plugins.megatron.fastlane`).  The compiled module
``_lines`` (``_lines.c``) does each in one call:

* :data:`TRIGGER_SPANS` ``(chunk, triggers)``: where the lines of ``chunk`` that hold one of
  ``triggers`` (bytes) start and end, in order, each line once;
* :data:`READ_ITEMS` ``(data, size, items)``: the figures at fixed byte offsets of lines of
  ``size`` bytes (``data`` is the lines joined), one list per ``(start, stop, kind)`` item,
  ``kind`` being :data:`KINDS` of its reader: 0 the bytes, 1 ``float``, 2 ``int``.  A text of
  plain number characters is read as ``float`` and ``int`` read it (``PyOS_string_to_double``;
  up to 18 digits by their digits), any other text by ``float`` or ``int`` itself.

``_lines`` is built at install where a C compiler is found (``setup.py``; optional: an
install without a compiler goes on without it).  Where it is not built, or the environment
sets ``TPRIMAT_PURE_PYTHON`` to anything but empty or ``0``, both are None and the callers
read in Python, to the same values (the tests run the fast lanes both ways and check each
compiled reader against its Python one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tprimat.contract import compiled_module

#: The kind of item of each reader :data:`READ_ITEMS` reads: None (the bytes), float, int.
KINDS: dict[Any, int] = {None: 0, float: 1, int: 2}

#: Reads ``(data, size, items)``: the columns of ``items`` in the lines of ``size`` bytes of ``data``.
ItemsReader = Callable[[bytes, int, Sequence[tuple[int, int, int]]], list[list[Any]]]
#: Finds ``(chunk, triggers)``: the spans of the lines of ``chunk`` that hold a trigger.
SpansFinder = Callable[[bytes, Sequence[bytes]], list[tuple[int, int]]]


_MODULE = compiled_module("tprimat.plugins.megatron_core._lines")
#: The compiled reader of figures at fixed offsets, or None: the fast lane reads them in Python.
READ_ITEMS: ItemsReader | None = None if _MODULE is None else _MODULE.read_items
#: The compiled finder of trigger lines, or None: the stream finds them in Python.
TRIGGER_SPANS: SpansFinder | None = None if _MODULE is None else _MODULE.trigger_spans
