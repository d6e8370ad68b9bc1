"""The compiled readers of log lines give what the Python readers they stand for give.

``read_items`` reads each figure's text as ``float``, ``int`` or its bytes; ``trigger_spans``
finds the lines the stream's Python finder finds.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compiled import compiled_or_skip
from tprimat.plugins.megatron_core.stream import trigger_lines_in_python

READERS = {0: bytes, 1: float, 2: int}

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


def _expected(data: bytes, size: int, items: list[tuple[int, int, int]]) -> list[list[Any]] | type:
    """What the Python reader reads: each item's text of each line, by its reader; or the error raised."""
    lines = [data[start : start + size] for start in range(0, len(data), size)]
    try:
        return [[READERS[kind](line[start:stop]) for line in lines] for start, stop, kind in items]
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
        b"|".join(text.encode().rjust(width, b"0") for text, width in zip(row, widths, strict=True)) for row in rows
    ]
    size = len(lines[0])
    starts = [sum(widths[:column]) + column for column in range(3)]
    items = [
        (start, start + width, data.draw(st.sampled_from([0, 1, 2])))
        for start, width in zip(starts, widths, strict=True)
    ]
    expected = _expected(b"".join(lines), size, items)
    read_items = compiled_or_skip().read_items
    if expected is ValueError:
        with pytest.raises(ValueError):
            read_items(b"".join(lines), size, items)
        return
    found = read_items(b"".join(lines), size, items)
    assert len(found) == len(expected)
    for column, wanted in zip(found, expected, strict=True):
        assert all(map(_same, column, wanted)), (column, wanted)


def test_a_text_repeated_from_the_line_before_is_one_object():
    read_items = compiled_or_skip().read_items
    data = b"1.5|7\n1.5|7\n2.5|7\n1.5|7\n"
    (floats, ints) = read_items(data, 6, [(0, 3, 1), (4, 5, 2)])
    assert floats == [1.5, 1.5, 2.5, 1.5] and floats[0] is floats[1] and floats[1] is not floats[3]
    assert ints == [7, 7, 7, 7] and len({id(value) for value in ints}) == 1


def test_ints_up_to_and_beyond_eighteen_digits_are_those_of_int():
    read_items = compiled_or_skip().read_items
    for text in (b"999999999999999999", b"-999999999999999999", b"1000000000000000000", b"+000000000000000000042"):
        assert read_items(text, len(text), [(0, len(text), 2)]) == [[int(text)]]


@pytest.mark.parametrize(
    ("size", "items", "error"),
    [
        (0, [], ValueError),
        (4, [], ValueError),  # 6 bytes are not lines of 4
        (3, [(2, 4, 1)], ValueError),
        (3, [(2, 1, 1)], ValueError),
        (3, [(0, 1, 3)], ValueError),
        (3, [(0, 1)], TypeError),
        (3, 5, TypeError),
    ],
)
def test_arguments_that_do_not_describe_lines_are_refused(size, items, error):
    read_items = compiled_or_skip().read_items
    with pytest.raises(error):
        read_items(b"12\n34\n", size, items)


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
