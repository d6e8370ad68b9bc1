"""A summary column written to a file in sorted runs gives the figures of sorting it in memory."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.result import column as column_module
from tprimat.result.column import Column, SortedRuns
from tprimat.result.metrics import describe, describe_column


@pytest.fixture
def small_runs(monkeypatch):
    """Runs of seven values in blocks of three: every path of the search is taken on short columns."""
    monkeypatch.setattr(column_module, "RUN_VALUES", 7)
    monkeypatch.setattr(column_module, "BLOCK_VALUES", 3)
    monkeypatch.setattr(column_module, "BLOCKS_CACHED", 2)


def _column(values, batch=5) -> Column:
    column = Column()
    for start in range(0, len(values), batch):
        column.extend(list(values[start : start + batch]))
    return column


def _typed(values):
    """Values with their types: 3 and 3.0 (and True and 1) are equal but are written differently."""
    return [(type(v), v) for v in values]


# Figures as logs give them: few distinct values (ties across runs), ints beside floats, and junk.
_VALUE = st.one_of(
    st.sampled_from([1.0, 1.5, 2.0, 3, 3.0, True, 1, 0, -0.0, 0.0, 2.5, 1e308, -1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.none(),
    st.just("text"),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUE, max_size=80), st.integers(1, 9))
def test_ranks_and_statistics_are_those_of_one_sort_in_memory(values, batch):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(column_module, "RUN_VALUES", 7)
        patch.setattr(column_module, "BLOCK_VALUES", 3)
        patch.setattr(column_module, "BLOCKS_CACHED", 2)
        column = _column(values, batch)
        ordered = column.ordered()
        numbers = [v for v in values if isinstance(v, int | float) and v is not None and math.isfinite(v)]
        expected = sorted(numbers)
        assert len(ordered) == len(expected)
        assert _typed(ordered[:]) == _typed(expected)  # every rank, ties in the order they came
        if expected:
            assert _typed([ordered[-1], ordered[0]]) == _typed([expected[-1], expected[0]])
        assert sorted(column.values()) == expected
        try:
            wanted = describe(values[i] for i in range(len(values)) if not isinstance(values[i], str))
        except OverflowError:
            with pytest.raises(OverflowError):
                describe_column(column)
            return
        got = describe_column(_column(values, batch))
        assert repr(got) == repr(wanted)  # the same floats and ints, -0.0 and all


def test_a_long_column_is_written_in_runs_and_read_by_rank(small_runs):
    values = [float(v % 11) + (v % 3) / 4 for v in range(200)]
    column = _column(values)
    ordered = column.ordered()
    assert isinstance(ordered, SortedRuns)
    assert len(column._runs) >= 20
    assert list(ordered) == sorted(values)
    assert ordered[100] == sorted(values)[100]
    assert ordered[-1] == max(values)
    with pytest.raises(IndexError):
        ordered[200]


def test_ints_among_floats_keep_their_type_at_every_rank(small_runs):
    values = [3.0, 3, 3.0, 1, 3, True, 2.0, 1.0] * 5
    ordered = _column(values, batch=3).ordered()
    assert isinstance(ordered, SortedRuns)
    assert _typed(list(ordered)) == _typed(sorted(values))


def test_a_short_column_stays_in_memory():
    column = _column([2.0, 1.0, math.nan, 3.0])
    assert not column._runs
    assert column.ordered() == [1.0, 2.0, 3.0]
    assert describe_column(column) == describe([2.0, 1.0, 3.0])
    assert describe_column(None) is None


def test_a_column_of_a_million_values_holds_one_run_in_memory():
    """The figures of 1 000 000 step times, against the standard sort: the column holds at most
    one run of values in memory, the rest as two values per block."""
    values = [1.0 + ((i * 7919) % 100_003) / 1e5 for i in range(1_000_000)]
    column = _column(values, batch=4096)
    held = len(column._held)
    assert held < column_module.RUN_VALUES
    assert sum(len(run.blocks) for run in column._runs) * column_module.BLOCK_VALUES >= len(values) - held
    assert describe_column(column) == describe(values)
