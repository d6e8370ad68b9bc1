"""The compiled readers of log lines give what the Python readers they stand for give.

``read_rows`` reads each figure's text as ``float``, ``int``, its bytes or a timestamp's ISO
text, up to a line of no
known shape or an iteration not above the one before; ``line_numbers`` counts lines as
``runs.line_numbers_in_python`` does; ``trigger_spans`` finds the lines the stream's Python
finder finds.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compiled import compiled_or_skip
from tprimat.plugins.megatron_core.compiled import iso_compact_stamp, iso_stamp
from tprimat.plugins.megatron_core.runs import line_numbers_in_python
from tprimat.plugins.megatron_core.stream import trigger_lines_in_python

READERS = {0: bytes, 1: float, 2: int, 3: iso_stamp, 4: iso_compact_stamp}

#: Texts of every kind a figure's place can hold: plain numbers, and what only float() or int() reads.
_TEXTS = st.one_of(
    st.from_regex(r"[-+]?[0-9]{0,20}(\.[0-9]{0,6})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(["1_0", " 7", "8 ", "nan", "-inf", "Infinity", "1e999", "-0", "0x1", "\u0663", "", ".", "-", "+"]),
    st.text(alphabet="0123456789.eE+-_ x", max_size=8),
    # Figures as frameworks print them: repr, fixed decimals, scientific with a precision.
    st.tuples(
        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["r", ".1f", ".6E", ".15e", ".17g"])
    ).map(lambda pair: repr(pair[0]) if pair[1] == "r" else format(pair[0], pair[1])),
    st.integers(0, 2**60).map(lambda digits: f"{digits}e-{digits % 30}"),
)


_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")


def _rows(lines: list[bytes], items: list[tuple[int, int, int]], previous: int = -1) -> list[list[Any]]:
    """``read_rows`` over ``lines`` (each ``NNNN|`` then figures at ``items``), every line's shape
    known with one layout: the iteration in column 0, the items in columns 1 on."""
    layout = SimpleNamespace(
        layout=((0, 4, 2, 0), *((start, stop, kind, column + 1) for column, (start, stop, kind) in enumerate(items)))
    )
    chunk = b"".join(lines)
    starts = [sum(map(len, lines[:row])) for row in range(len(lines))]
    spans = [(start, start + len(line)) for start, line in zip(starts, lines, strict=True)]
    shapes = {line.translate(_DIGITS): layout for line in lines}
    return compiled_or_skip().read_rows(chunk, spans, 0, len(lines), shapes, len(items) + 1, 0, previous)


def _expected(lines: list[bytes], items: list[tuple[int, int, int]]) -> list[list[Any]] | type:
    """What the Python readers read: each line's iteration, and each item's text by its reader; or
    the error raised."""
    try:
        return [
            [int(line[:4]) for line in lines],
            *([READERS[kind](line[start:stop]) for line in lines] for start, stop, kind in items),
        ]
    except ValueError:
        return ValueError


def _same(value: Any, expected: Any) -> bool:
    both_nan = isinstance(value, float) and math.isnan(value) and math.isnan(expected)
    return type(value) is type(expected) and (value == expected or both_nan)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_TEXTS, min_size=3, max_size=3), min_size=1, max_size=12), st.data())
def test_each_item_reads_as_float_int_or_its_bytes(rows, data):
    """Lines of one size, three items each padded to a common width, read by every kind."""
    widths = [max(len(row[column].encode()) for row in rows) for column in range(3)]
    lines = [
        b"%04d|" % number + b"|".join(text.encode().rjust(width, b"0") for text, width in zip(row, widths, strict=True))
        for number, row in enumerate(rows)
    ]
    starts = [5 + sum(widths[:column]) + column for column in range(3)]
    items = [
        (start, start + width, data.draw(st.sampled_from(sorted(READERS))))
        for start, width in zip(starts, widths, strict=True)
    ]
    expected = _expected(lines, items)
    if expected is ValueError:
        with pytest.raises(ValueError):
            _rows(lines, items)
        return
    found = _rows(lines, items)
    assert len(found) == len(expected)
    for column, wanted in zip(found, expected, strict=True):
        assert all(map(_same, column, wanted)), (column, wanted)


def test_a_text_repeated_from_the_line_before_is_one_object():
    lines = [b"0001|1.5|7\n", b"0002|1.5|7\n", b"0003|2.5|7\n", b"0004|1.5|7\n"]
    (_, floats, ints) = _rows(lines, [(5, 8, 1), (9, 10, 2)])
    assert floats == [1.5, 1.5, 2.5, 1.5] and floats[0] is floats[1] and floats[1] is not floats[3]
    assert ints == [7, 7, 7, 7] and len({id(value) for value in ints}) == 1


def test_timestamps_are_read_into_their_iso_text():
    lines = [b"0001|2026-05-07 13:47:47.940885|20251202 06:56:28\n"]
    (_, megatron, primus) = _rows(lines, [(5, 31, 3), (32, 49, 4)])
    assert megatron == ["2026-05-07T13:47:47.940885"] and primus == ["2025-12-02T06:56:28"]
    assert type(megatron[0]) is str and megatron[0].isascii()


def test_ints_up_to_and_beyond_eighteen_digits_are_those_of_int():
    for text in (b"999999999999999999", b"-999999999999999999", b"1000000000000000000", b"+000000000000000000042"):
        assert _rows([b"0001|" + text], [(5, 5 + len(text), 2)])[1] == [int(text)]


def test_a_run_ends_before_a_line_of_no_known_shape_or_an_iteration_not_above():
    lines = [b"0001|1.5\n", b"0002|2.5\n", b"0002|2.5\n", b"0003|3.5\n"]
    assert _rows(lines, [(5, 8, 1)]) == [[1, 2], [1.5, 2.5]]
    assert _rows(lines, [(5, 8, 1)], previous=1) == [[], []]
    read_rows = compiled_or_skip().read_rows
    shapes = {b"0000|0.0\n": SimpleNamespace(layout=((0, 4, 2, 0), (5, 8, 1, 1)))}
    chunk = b"0001|1.5\n0002|x.5\n"
    assert read_rows(chunk, [(0, 9), (9, 18)], 0, 2, shapes, 2, 0, -1) == [[1], [1.5]]


@pytest.mark.parametrize(
    ("layout", "width", "error"),
    [
        (((0, 4, 2, 0), (5, 10, 1, 1)), 2, ValueError),  # past the line's end
        (((0, 4, 2, 0), (6, 5, 1, 1)), 2, ValueError),
        (((0, 4, 2, 0), (5, 8, 5, 1)), 2, ValueError),  # no such kind
        (((0, 4, 2, 0), (5, 8, 1, 2)), 2, ValueError),  # no such column
        (((0, 4, 1, 0),), 2, ValueError),  # the iteration read as a float
        (((5, 8, 1, 1),), 2, ValueError),  # no iteration
        (((0, 4, 2),), 2, TypeError),
        (5, 2, TypeError),
    ],
)
def test_layouts_that_do_not_describe_the_line_are_refused(layout, width, error):
    shapes = {b"0000|0.0\n": SimpleNamespace(layout=layout)}
    with pytest.raises(error):
        compiled_or_skip().read_rows(b"0001|1.5\n", [(0, 9)], 0, 1, shapes, width, 0, -1)


@pytest.mark.parametrize(
    ("chunk", "spans", "shapes", "error"),
    [
        (b"0001|1.5\n", [(0, 10)], {}, ValueError),  # past the chunk's end
        (b"0001|1.5\n", [(0,)], {}, TypeError),
        (b"0001|1.5\n", ((0, 9),), {}, TypeError),
        (b"0001|1.5\n", [(0, 9)], [], TypeError),
        (b"0001|1.5\n", [(0, 9)], {b"0000|0.0\n": object()}, AttributeError),
        ("0001|1.5\n", [(0, 9)], {}, TypeError),
    ],
)
def test_arguments_that_do_not_describe_a_run_are_refused(chunk, spans, shapes, error):
    with pytest.raises(error):
        compiled_or_skip().read_rows(chunk, spans, 0, 1, shapes, 2, 0, -1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\n", max_size=12), min_size=1, max_size=12), st.integers(0, 10**6), st.data())
def test_line_numbers_are_those_counted_in_python(texts, before, data):
    """Any chunk of lines, the spans of some of them, from any offset before the first."""
    chunk = "\n".join(texts).encode()
    starts = sorted({0, *(index + 1 for index, byte in enumerate(chunk) if byte == ord("\n"))})
    chosen = sorted(data.draw(st.sets(st.sampled_from(starts), min_size=1)))
    offset = data.draw(st.integers(0, chosen[0]))
    spans = [(start, chunk.find(b"\n", start) + 1 or len(chunk)) for start in chosen]
    count = data.draw(st.integers(0, len(spans)))
    expected = line_numbers_in_python(chunk, spans, count, offset, before)
    assert compiled_or_skip().line_numbers(chunk, spans, count, offset, before) == expected


@pytest.mark.parametrize(
    ("spans", "count", "offset", "error"),
    [([(0, 2)], 2, 0, ValueError), ([(0, 2)], 1, 1, ValueError), ([(0, 9)], 1, 0, ValueError), ([0], 1, 0, TypeError)],
)
def test_spans_that_do_not_ascend_within_the_chunk_are_refused(spans, count, offset, error):
    with pytest.raises(error):
        compiled_or_skip().line_numbers(b"a\nb\n", spans, count, offset, 0)


_CHUNK_TEXT = st.text(alphabet="ab\n|it", max_size=200)
_TRIGGERS = st.lists(st.text(alphabet="ab\n|it", min_size=1, max_size=3), min_size=1, max_size=4)


@settings(max_examples=500, deadline=None)
@given(_CHUNK_TEXT, _TRIGGERS)
def test_trigger_lines_are_those_the_python_finder_finds(text, triggers):
    """Any chunk (lines with several triggers, a last line without its newline, triggers that
    hold a newline or repeat) and any triggers."""
    trigger_spans = compiled_or_skip().trigger_spans
    chunk = text.encode()
    expected = trigger_lines_in_python(chunk, tuple(triggers))
    assert trigger_spans(chunk, [trigger.encode() for trigger in triggers]) == expected


@pytest.mark.parametrize(("chunk", "triggers", "error"), [("text", [b"t"], TypeError), (b"t", [b""], ValueError)])
def test_a_chunk_or_trigger_not_of_bytes_is_refused(chunk, triggers, error):
    with pytest.raises(error):
        compiled_or_skip().trigger_spans(chunk, triggers)
