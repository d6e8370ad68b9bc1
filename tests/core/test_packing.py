"""Events packed for another process come back the same, in order, sharing what they shared."""

from __future__ import annotations

import attrs

from tprimat.contract.records import REPEATED_LINE, IterationRecord, LogFact, ParseIssue, RankPeak
from tprimat.result.packing import pack, unpack


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
