"""Events packed for another process come back the same, in order, sharing what they shared."""

from __future__ import annotations

import attrs
import pytest

from tprimat.contract.records import REPEATED_LINE, FigureColumns, IterationRecord, LogFact, ParseIssue, RankPeak
from tprimat.result.packing import decode_column, encode_column, figure_columns, pack, unpack


class _Figure(float):
    """A float of a subclass: marshal does not write it, pickle does."""


def _events(scale: float) -> list:
    return [
        LogFact(key="seq_length", value=4096, source="run.log:3"),
        IterationRecord(iteration=1, step_time_s=1.5, loss=9.1, reported={"loss_scale": scale}, source="run.log:10"),
        REPEATED_LINE,
        IterationRecord(iteration=2, step_time_s=1.25, mem_allocated_gib=scale, source="run.log:12"),
        ParseIssue(source="run.log:13", message="unreadable"),
        RankPeak(rank=3, max_allocated_gib=scale),
        IterationRecord(iteration=3, step_time_s=1.0, reported={"loss_scale": scale, "note": None}),
    ]


def test_events_come_back_equal_and_in_order():
    for scale in (65536.5, _Figure(65536.5)):  # by marshal; all by pickle
        events = _events(scale)
        back = unpack(pack(events))
        assert [type(e) for e in back] == [type(e) for e in events]
        assert back[2] is REPEATED_LINE
        assert [attrs.asdict(e) for e in back if e is not REPEATED_LINE] == [
            attrs.asdict(e) for e in events if e is not REPEATED_LINE
        ]


def test_a_figure_records_share_stays_one_object():
    back = [e for e in unpack(pack(_events(65536.5))) if type(e) is IterationRecord]
    first, second, third = back
    assert first.reported["loss_scale"] is second.mem_allocated_gib is third.reported["loss_scale"]


def test_records_alone_and_no_events():
    records = [IterationRecord(iteration=i, step_time_s=1.0 + i) for i in range(5)]
    assert unpack(pack(records)) == records
    assert unpack(pack([])) == []


def _figures(draw, count: int) -> list[dict]:
    names = ["tflops_per_gpu", "loss_scale", "label", "b"]
    return [
        {name: draw.choice([1.5, 2.0, 0.0, "GB"]) for name in draw.sample(names, draw.randint(0, len(names)))}
        for _ in range(count)
    ]


def test_a_column_of_figures_comes_back_as_one_list_per_name_reading_as_its_dicts():
    import random

    draw = random.Random(8)
    for count in (1, 2, 7, 40):
        figures = _figures(draw, count)
        data = encode_column(tuple(figures))
        assert data[:1] == b"F"
        back = decode_column(memoryview(data))
        assert type(back) is FigureColumns and len(back) == count
        assert list(back) == figures and back == figures  # the dicts, whatever the order of their names
        assert [back[row] for row in range(-count, count)] == figures + figures
        assert back[1:5] == figures[1:5] and list(back.names) == sorted(set().union(*figures))
        assert figure_columns(back) == figure_columns(figures)
        assert decode_column(memoryview(encode_column(back))) == figures  # written again as it came
        with pytest.raises(IndexError):
            back[count]


def test_figures_that_would_not_come_back_exactly_stay_dicts():
    empty = decode_column(memoryview(encode_column(({}, {}))))
    assert list(empty) == [{}, {}] and len(empty) == 2
    for column in (({"a": None}, {"a": 1.0}), ({"a": _Figure(1.0)},), ({"a": 1.0}, 3)):
        data = encode_column(column)
        assert data[:1] != b"F"  # a None (no figure reads back alike), a float subclass, not all dicts
        assert list(decode_column(memoryview(data))) == list(column)


def test_figure_columns_leave_out_names_without_a_value():
    assert figure_columns([{"a": None, "b": 1.0}, {"a": None}]) == {"b": [1.0, None]}
