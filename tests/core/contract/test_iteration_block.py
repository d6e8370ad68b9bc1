"""IterationBlock: a run of iteration records as columns means exactly the records it makes."""

from __future__ import annotations

import pytest

from tprimat.contract import FigureColumns, IterationBlock, IterationRecord, LineSources
from tprimat.contract.records import ITERATION_FIELDS, iteration_values


def _block(records: list[IterationRecord]) -> IterationBlock:
    return IterationBlock(columns=tuple(map(list, zip(*map(iteration_values, records), strict=True))))


def test_a_block_gives_back_its_records_in_order():
    records = [
        IterationRecord(iteration=3, step_time_s=0.5, loss=2.5, source="log:7", reported={"tflops_per_gpu": 410.2}),
        IterationRecord(iteration=4, step_time_s=0.25, loss=float("nan"), source="log:9"),
    ]
    block = _block(records)
    assert len(block) == 2
    assert block.column("iteration") == [3, 4]
    assert block.rows() == [iteration_values(r) for r in records]
    back = block.records()
    assert [r.source for r in back] == ["log:7", "log:9"]
    assert back[0] == records[0] and back[1].step_time_s == 0.25


def test_columns_must_be_every_field_and_of_one_length():
    with pytest.raises(ValueError, match="columns"):
        IterationBlock(columns=([1], [0.5]))
    columns = [[None, None] for _ in ITERATION_FIELDS]
    columns[0] = [1]
    with pytest.raises(ValueError, match="differ in length"):
        IterationBlock(columns=tuple(columns))


def test_a_row_a_record_would_refuse_is_refused_when_made_into_records():
    columns = [[None] for _ in ITERATION_FIELDS]
    columns[ITERATION_FIELDS.index("iteration")] = [5]
    columns[ITERATION_FIELDS.index("step_time_s")] = [-1.0]
    columns[ITERATION_FIELDS.index("skipped")] = [0]
    columns[ITERATION_FIELDS.index("covers_iterations")] = [1]
    columns[ITERATION_FIELDS.index("profiled")] = [False]
    columns[ITERATION_FIELDS.index("reported")] = [{}]
    with pytest.raises(ValueError):
        IterationBlock(columns=tuple(columns)).records()


def test_a_block_s_figures_may_be_one_list_per_name():
    figures = FigureColumns(3, ["loss_scale", "tflops_per_gpu"], [[1.0, 1.0, None], [410.2, None, 9.5]])
    records = [IterationRecord(iteration=i, step_time_s=0.5) for i in (1, 2, 3)]
    columns = list(map(list, zip(*map(iteration_values, records), strict=True)))
    columns[ITERATION_FIELDS.index("reported")] = figures
    block = IterationBlock(columns=tuple(columns))
    assert [r.reported for r in block.records()] == [
        {"loss_scale": 1.0, "tflops_per_gpu": 410.2},
        {"loss_scale": 1.0},
        {"tflops_per_gpu": 9.5},
    ]
    assert figures[-1] == {"tflops_per_gpu": 9.5} and figures[0] is not figures[0]  # a dict of its own each time
    assert type(figures[1:]) is FigureColumns and figures[1:] == [{"loss_scale": 1.0}, {"tflops_per_gpu": 9.5}]
    assert figures[::2] == [figures[0], figures[2]] and figures == list(figures)
    columns[ITERATION_FIELDS.index("reported")] = FigureColumns(2, ["a"], [[1.0, 2.0]])
    with pytest.raises(ValueError, match="length"):
        IterationBlock(columns=tuple(columns))


def test_a_block_s_sources_may_be_one_file_s_line_numbers():
    sources = LineSources("rank 0/out%d.log:", [5, 7, 12])
    records = [IterationRecord(iteration=i, step_time_s=0.5) for i in (1, 2, 3)]
    columns = list(map(list, zip(*map(iteration_values, records), strict=True)))
    columns[ITERATION_FIELDS.index("source")] = sources
    block = IterationBlock(columns=tuple(columns))
    assert [r.source for r in block.records()] == ["rank 0/out%d.log:5", "rank 0/out%d.log:7", "rank 0/out%d.log:12"]
    assert sources[-1] == "rank 0/out%d.log:12" and len(sources) == 3
    assert type(sources[1:]) is LineSources and sources[1:] == ["rank 0/out%d.log:7", "rank 0/out%d.log:12"]
    assert sources == list(sources) and sources != ["rank 0/out%d.log:5"]
    columns[ITERATION_FIELDS.index("source")] = LineSources("a:", [1])
    with pytest.raises(ValueError, match="length"):
        IterationBlock(columns=tuple(columns))
