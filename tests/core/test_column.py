"""A summary column written to a file in sorted runs gives the figures of sorting it in memory."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprimat.result import column as column_module
from tprimat.result.column import Column, SortedRuns
from tprimat.result.metrics import describe, describe_column


@pytest.fixture
def small_runs(monkeypatch):
    """Runs of seven values in blocks of three, nothing counted: every path of the search is taken
    on short columns."""
    monkeypatch.setattr(column_module, "COUNTED_VALUES", 0)
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
        patch.setattr(column_module, "COUNTED_VALUES", 3)  # a few distinct values counted, then runs
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
    assert column.counts() == {1.0: 1, 2.0: 1, 3.0: 1}
    assert list(column.ordered()) == [1.0, 2.0, 3.0]
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


def _reference(values):
    """The statistics by their plain definitions: a stable sort of the finite values, linear
    interpolation between closest ranks, ``statistics`` for the mean, median and sample deviation."""
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    if not finite:
        return None
    count = len(finite)

    def rank(q):
        position = (count - 1) * q / 100
        low = math.floor(position)
        high = min(low + 1, count - 1)
        return finite[low] + (finite[high] - finite[low]) * (position - low)

    mean = statistics.fmean(finite)
    cv = statistics.stdev(finite) / mean if count > 1 and mean != 0 else None
    median = statistics.median(finite)
    return (count, mean, median, rank(5), rank(95), finite[0], finite[-1], cv)


def _figures(stats):
    if stats is None:
        return None
    return (stats.count, stats.mean, stats.median, stats.p5, stats.p95, stats.min, stats.max, stats.cv)


_LOGGED = st.one_of(
    st.sampled_from([0.5, 1.25, 2.0, 3.75, 0.0, -0.0, 1e-5, 7.0, 1234.5]),
    st.floats(-1e6, 1e6),
    st.sampled_from([math.nan, math.inf, -math.inf, None]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.lists(_LOGGED, max_size=120), st.lists(st.integers(-(2**60), 2**60) | st.none(), max_size=60)),
    st.integers(1, 13),
    st.sampled_from([0, 2, 5, 1000]),
)
def test_the_statistics_of_a_column_are_those_of_their_plain_definitions(values, batch, counted):
    """Counted, or sorted in runs (``counted``: the distinct values a column counts), a column's
    figures are those of sorting its finite values and taking each figure by its definition."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(column_module, "COUNTED_VALUES", counted)
        patch.setattr(column_module, "RUN_VALUES", 7)
        patch.setattr(column_module, "BLOCK_VALUES", 3)
        column = _column(values, batch)
        assert repr(_figures(describe_column(column))) == repr(_reference(values))


def test_a_column_counts_while_equal_values_are_written_alike():
    steps = [1.0 + (i * 7919 % 1000) / 1e4 for i in range(200_000)]
    column = _column(steps, batch=1024)
    assert column.counts() is not None and len(column.counts()) == 1000
    assert not column._runs and not column._held  # nothing stored but the counts
    assert describe_column(column) == describe(steps)

    for mixed in ([1.0, 2.0, 0.0, -0.0], [0.0, 1.0, -0.0], [3.0, 1.0, 3], [1, 2, True], [1, 2**60]):
        column = _column(mixed, batch=2)
        assert column.counts() is None  # written otherwise, or too large for the mean: not counted
        assert repr(describe_column(_column(mixed, batch=2))) == repr(describe(mixed))
