"""The compiled readers of log lines, where they are built: each stands for a Python reader.

A dense training log (``--log-interval 1``) is mostly iteration lines, and three steps of
reading them cost more in Python than all the rest: finding the lines that hold a trigger
(:func:`tprimat.plugins.megatron_core.stream.iter_events`), numbering a run's lines and
reading their figures (:mod:`tprimat.plugins.megatron.fastlane`).  The compiled module
``_lines`` (``_lines.c``) does each in one call:

* :data:`TRIGGER_SPANS` ``(chunk, triggers)``: where the lines of ``chunk`` that hold one of
  ``triggers`` (bytes) start and end, in order, each line once;
* :data:`LINE_NUMBERS` ``(chunk, spans, count, offset, before)``: the stream's number of the
  line of each of a run's spans (:func:`~tprimat.plugins.megatron_core.runs.line_numbers_in_python`);
* :data:`READ_ROWS` ``(chunk, spans, index, size, shapes, width, iteration, previous)``: the
  figures of a run of lines of known shapes (``shapes``: a line's bytes with every digit "0",
  to an object whose ``layout`` places its figures), read into ``width`` columns in line order
  (:mod:`tprimat.plugins.megatron.runrows`, whose :func:`~tprimat.plugins.megatron.runrows.rows_in_python`
  it stands for).  A figure is a ``(start, stop, kind, column)`` item, ``kind`` being
  :data:`KINDS` of its reader: 0 the bytes, 1 ``float``, 2 ``int``, 3 and 4 a timestamp's
  ISO text (:func:`iso_stamp`, :func:`iso_compact_stamp`).  A text of plain number
  characters is read as ``float`` and ``int`` read it (``PyOS_string_to_double``; up to 18
  digits by their digits), any other text by ``float`` or ``int`` itself.

``_lines`` is built at install where a C compiler is found (``setup.py``; optional: an
install without a compiler goes on without it).  Where it is not built, or the environment
sets ``TPRIMAT_PURE_PYTHON`` to anything but empty or ``0``, each is None and the callers
read in Python, to the same values (the tests run the fast lanes both ways and check each
compiled reader against its Python one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tprimat.contract import compiled_module

_SPACE_TO_T = bytes.maketrans(b" ", b"T")


def iso_stamp(text: bytes) -> str:
    """Megatron's timestamp ``2026-05-07 13:47:47.940885`` as ISO text, ``2026-05-07T13:47:47.940885``."""
    return text.translate(_SPACE_TO_T).decode("ascii")


def iso_compact_stamp(text: bytes) -> str:
    """Primus's timestamp ``20251202 06:56:28`` as ISO text, ``2025-12-02T06:56:28``."""
    if len(text) < 9:
        raise ValueError(f"not a timestamp: {text!r}")
    stamp = text.decode("ascii")
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:]}"


#: The kind of item of each reader :data:`READ_ROWS` reads: None (the bytes), float, int, and
#: the timestamps' ISO texts.
KINDS: dict[Any, int] = {None: 0, float: 1, int: 2, iso_stamp: 3, iso_compact_stamp: 4}

#: Reads ``(chunk, spans, index, size, shapes, width, iteration, previous)``: a run's columns.
RowsReader = Callable[[bytes, list[tuple[int, int]], int, int, dict[bytes, Any], int, int, int], list[list[Any]]]
#: Counts ``(chunk, spans, count, offset, before)``: the numbers of the lines of the first spans.
LineCounter = Callable[[bytes, list[tuple[int, int]], int, int, int], list[int]]
#: Finds ``(chunk, triggers)``: the spans of the lines of ``chunk`` that hold a trigger.
SpansFinder = Callable[[bytes, Sequence[bytes]], list[tuple[int, int]]]


_MODULE = compiled_module("tprimat.plugins.megatron_core._lines")
#: The compiled reader of a run of lines of known shapes, or None: the fast lane reads it in Python.
READ_ROWS: RowsReader | None = None if _MODULE is None else _MODULE.read_rows
#: The compiled counter of the lines before a run's lines, or None: they are counted in Python.
LINE_NUMBERS: LineCounter | None = None if _MODULE is None else _MODULE.line_numbers
#: The compiled finder of trigger lines, or None: the stream finds them in Python.
TRIGGER_SPANS: SpansFinder | None = None if _MODULE is None else _MODULE.trigger_spans
