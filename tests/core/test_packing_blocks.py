"""An iteration block crosses between processes as its columns and comes back a block, equal."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.blocks import block_of
from tprimat.contract.records import (
    REPEATED_LINE,
    FigureColumns,
    IterationBlock,
    IterationRecord,
    LineSources,
    LogFact,
    ParseIssue,
)
from tprimat.result import packing
from tprimat.result.packing import pack, unpack


class _Figure(float):
    """A float of a subclass: marshal does not write it, pickle does."""


def _records(first: int, scale: float) -> list[IterationRecord]:
    return [
        IterationRecord(
            iteration=i,
            step_time_s=1.0 + i / 8,
            loss=math.nan if i == first else 2.0,
            mem_allocated_gib=scale,
            reported={"loss_scale": scale, "note": None, "kind": "train"},
            source=f"run.log:{10 + i}",
        )
        for i in range(first, first + 5)
    ]


def _events(scale: float) -> list:
    return [
        LogFact(key="seq_length", value=4096, source="run.log:3"),
        block_of(_records(1, scale)),
        REPEATED_LINE,
        IterationRecord(iteration=6, step_time_s=1.25, source="run.log:30"),
        ParseIssue(source="run.log:31", message="unreadable"),
        block_of(_records(7, scale)),
        block_of([]),
    ]


def _comparable(events: list) -> list:
    """Events as values (a block as its records' values; NaN as text, equal to NaN)."""
    shown = []
    for event in events:
        if isinstance(event, IterationBlock):
            shown.append(("block", [repr(attrs.astuple(r, recurse=False)) for r in event.records()]))
        elif event is REPEATED_LINE:
            shown.append(event)
        else:
            shown.append(repr(attrs.astuple(event, recurse=False)))
    return shown


@pytest.mark.parametrize("scale", [65536.5, _Figure(65536.5)], ids=["marshal", "pickle"])
def test_blocks_come_back_blocks_equal_and_in_their_places(scale):
    events = _events(scale)
    back = unpack(pack(events))
    assert [type(e) for e in back] == [type(e) for e in events]
    assert _comparable(back) == _comparable(events)
    assert all(isinstance(column, list) for column in back[1].columns)


def test_a_block_goes_as_its_columns_not_as_records(monkeypatch):
    events = _events(65536.5)
    made = []
    monkeypatch.setattr(packing, "record_from", lambda row: made.append(row))
    back = unpack(pack(events))
    assert len(made) == 1  # the one record, none for the blocks' ten
    assert back[5].column("reported") == [r.reported for r in _records(7, 65536.5)]


def test_a_figure_a_block_s_records_share_stays_one_object():
    back = unpack(pack(_events(65536.5)))[1]
    assert len({id(value) for value in back.column("mem_allocated_gib")}) == 1
    reported = back.column("reported")
    assert len({id(figures) for figures in reported}) == len(reported)  # never one dict for two records


def _sealed_view(events: list) -> list:
    """Events as values, a sealed block as the block it stands for."""
    return _comparable([e.block() if isinstance(e, packing.SealedBlock) else e for e in events])


def test_a_block_a_worker_seals_comes_back_the_same_records_in_pieces_of_the_size_asked():
    events = _events(65536.5)
    back = unpack(pack(events, seal_records=2))
    sealed = [e for e in back if isinstance(e, packing.SealedBlock)]
    assert [(s.first, s.last, len(s)) for s in sealed] == [  # as few as hold them, sizes one apart
        (1, 1, 1),
        (2, 3, 2),
        (4, 5, 2),
        (7, 7, 1),
        (8, 9, 2),
        (10, 11, 2),
    ]
    whole = [events[0], block_of(_records(1, 65536.5)), *events[2:5], block_of(_records(7, 65536.5)), events[6]]
    joined = []
    for event in back:  # the pieces of each block joined again
        if isinstance(event, packing.SealedBlock) and joined and isinstance(joined[-1], IterationBlock):
            columns = zip(joined[-1].columns, event.block().columns, strict=True)
            joined[-1] = IterationBlock(columns=tuple(a + b for a, b in columns))
        else:
            joined.append(event.block() if isinstance(event, packing.SealedBlock) else event)
    assert _comparable(joined) == _comparable(whole)
    assert sealed[0].sources() == ["run.log:11"] and sealed[1].sources() == ["run.log:12", "run.log:13"]


def _lines_block(first: int, count: int, prefix: str = "run.log:", names: tuple[str, ...] = ("a",)) -> IterationBlock:
    """A block of ``count`` records from iteration ``first``, its sources line numbers, its figures by name."""
    block = block_of(_records(first, 2.0)[:count])
    columns = {name: list(block.column(name)) for name in packing.ITERATION_FIELDS}
    columns["source"] = LineSources(prefix, list(range(first, first + count)))
    columns["reported"] = FigureColumns(count, names, [[float(first)] * count for _ in names])
    return IterationBlock(columns=tuple(columns[name] for name in packing.ITERATION_FIELDS))


def test_blocks_that_follow_one_another_are_joined_before_they_are_sealed():
    """A parser's block per chunk read: joined, the records' file holds pieces as large as it takes."""
    first, second, third = _lines_block(1, 3), _lines_block(4, 2), _lines_block(10, 2)
    (joined,) = packing.joined_blocks([first, second, third])
    assert joined.rows() == [*first.rows(), *second.rows(), *third.rows()]
    assert type(joined.column("source")) is LineSources and type(joined.column("reported")) is FigureColumns
    back = unpack(pack([first, second, third], seal_records=4))
    assert [(s.first, s.last, len(s)) for s in back] == [(1, 3, 3), (4, 11, 4)]
    assert [repr(row) for piece in back for row in piece.block().rows()] == list(map(repr, joined.rows()))


@pytest.mark.parametrize(
    "later",
    [
        pytest.param(_lines_block(3, 2), id="iterations not above"),
        pytest.param(_lines_block(4, 2, prefix="other.log:"), id="another file"),
        pytest.param(_lines_block(4, 2, names=("a", "b")), id="other figures"),
    ],
)
def test_blocks_that_do_not_follow_one_another_stay_apart(later):
    first = _lines_block(1, 3)
    assert packing.joined_blocks([first, later]) == [first, later]
    record = IterationRecord(iteration=9, step_time_s=1.0)
    assert packing.joined_blocks([first, record, _lines_block(10, 2)])[1] is record


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param({"iteration": [1, 3, 2, 4, 5]}, id="not ascending"),
        pytest.param({"step_time_s": [1.0, math.inf, 1.0, 1.0, 1.0]}, id="implausible"),
        pytest.param({"source": ["a.log:1", "b.log:2", "a.log:3", "a.log:4", "a.log:5"]}, id="two files"),
        pytest.param({"source": ["a.log:1", "a.log:02", "a.log:3", "a.log:4", "a.log:5"]}, id="a leading zero"),
        pytest.param({"source": ["a.log:1", "a.log:x", "a.log:3", "a.log:4", "a.log:5"]}, id="no number"),
    ],
)
def test_a_block_that_cannot_be_sealed_goes_as_its_columns(spoil):
    block = block_of(_records(1, 2.0))
    columns = {name: list(block.column(name)) for name in packing.ITERATION_FIELDS}
    columns.update(spoil)
    spoilt = IterationBlock(columns=tuple(columns[name] for name in packing.ITERATION_FIELDS))
    assert packing.seal(spoilt, 1024) is None
    (back,) = unpack(pack([spoilt], seal_records=1024))
    assert type(back) is IterationBlock and repr(back.columns) == repr(spoilt.columns)  # NaN as text


def test_a_block_of_few_records_is_not_sealed():
    """The records' file would keep it as a small block, read on its own by every later pass."""
    block = block_of(_records(1, 2.0))  # five records
    assert packing.seal(block, 20) is not None
    assert packing.seal(block, 24) is None


def _lines_one_by_one(sources: list) -> tuple[str, list[int]] | None:
    """``_source_lines`` as its docstring says, source by source."""
    if not all(type(source) is str for source in sources):
        return None
    name, colon, _ = sources[0].rpartition(":")
    texts = [source[len(name) + 1 :] if source.startswith(name + colon) else "" for source in sources]
    if not colon or not all(text.isascii() and text.isdigit() and str(int(text)) == text for text in texts):
        return None
    return name + colon, [int(text) for text in texts]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="p:10\n\u00b2-", max_size=7),
            st.builds("p:{}{}".format, st.integers(0, 40), st.sampled_from(["", "", "\n", "p:1", "x"])),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_sources_are_read_as_lines_of_one_file_as_one_by_one(sources):
    assert packing._source_lines(sources) == _lines_one_by_one(sources)


@pytest.mark.parametrize("prefix", ["run.log:", "rank 0/out%d.log:", "a:b:"])
def test_sources_stored_as_lines_read_back_as_their_texts(prefix):
    from tprimat.result.packing import decode_column, encode_sources

    lines = [1, 7, 10**12]
    assert list(decode_column(memoryview(encode_sources(prefix, lines)))) == [f"{prefix}{line}" for line in lines]
    assert list(decode_column(memoryview(encode_sources(prefix, [])))) == []
    # a block's sources given as line numbers are stored so, and taken as they are when sealed
    given = LineSources(prefix, lines)
    assert packing.encode_column(given) == encode_sources(prefix, lines)
    assert packing._source_lines(given) == (prefix, lines)
