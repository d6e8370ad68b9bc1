"""Records kept in a temporary file: the same records, the same result document, bounded memory."""

from __future__ import annotations

import math

import attrs
import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.logfile import LogFile
from tprimat.contract.registry import Registry
from tprimat.parse import logs
from tprimat.result import spill
from tprimat.result.collect import EventCollector
from tprimat.result.metrics import summarize
from tprimat.result.schema import IterationRecord, dumps_result
from tprimat.result.spill import ColdRecords, RecordSequence, record_field_blocks, record_fields

#: Real logs with restarts, memory lines, evaluations, rotated files and replaced iterations.
REAL_LOGS = [
    "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log",
    "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
    "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
    "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
    "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell46_preemption_sigterm_step4.log",
]


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of three records: every path through the file is taken on small logs."""
    monkeypatch.setattr(spill, "BLOCK_RECORDS", 3)


def _record(iteration: int, **values) -> IterationRecord:
    return IterationRecord(iteration=iteration, step_time_s=1.0 + iteration / 1000, **values)


def _values(records) -> list[tuple]:
    return [attrs.astuple(r, recurse=False) for r in records]


def test_a_sequence_reads_back_every_record_by_index_slice_and_pass(tiny_blocks):
    cold = ColdRecords()
    originals = [_record(i, loss=float(i), reported={"tflops": i * 1.5, "note": "x"}) for i in range(1, 11)]
    cold.put(originals[:4])
    records = cold.finish(originals[4:])
    assert isinstance(records, RecordSequence)
    assert len(records) == 10
    assert _values(records) == _values(originals)
    assert records[0].iteration == 1 and records[-1].iteration == 10 and records[4].iteration == 5
    assert _values(records[2:8]) == _values(originals[2:8])
    assert _values(records[::3]) == _values(originals[::3])
    assert [r.iteration for r in reversed(records)] == list(range(10, 0, -1))
    with pytest.raises(IndexError):
        records[10]
    assert _values(records) == _values(originals)  # a second pass reads the same


def _mark_even(row: tuple) -> tuple:
    values = list(row)
    values[spill.FIELD_INDEX["profiled"]] = row[spill.FIELD_INDEX["iteration"]] % 2 == 0
    return tuple(values)


class _Figure(float):
    """A float of a subclass: marshal does not write it (its column is pickled)."""


def test_a_column_marshal_does_not_write_is_stored_all_the_same(tiny_blocks):
    originals = [_record(i, loss=_Figure(i / 2), reported={"x": _Figure(i)}) for i in range(1, 6)]
    records = ColdRecords().finish(originals)
    assert _values(records) == _values(originals)
    assert list(record_fields(records, "loss")) == [(i / 2,) for i in range(1, 6)]


def test_a_block_of_floats_is_stored_as_8_byte_floats_and_read_back_the_same():
    file = spill.RecordFile()
    floats = [0.0, -0.0, 5e-324, 1.7976931348623157e308, -2.5, 0.1 + 0.2]
    where = file.write_floats(floats)
    assert where[1] == 1 + 8 * len(floats)
    back = file.read(*where)
    assert list(map(repr, back)) == list(map(repr, floats)) and {type(value) for value in back} == {float}
    mixed = file.write([1, 2.5, None])
    assert file.read(*mixed) == [1, 2.5, None] and type(file.read(*mixed)[0]) is int


def test_map_rows_applies_a_function_to_each_row_as_it_is_read(tiny_blocks):
    cold = ColdRecords()
    records = cold.finish([_record(i) for i in range(1, 8)])
    marked = records.map_rows(_mark_even, changes=["profiled"])
    assert [r.profiled for r in marked] == [i % 2 == 0 for i in range(1, 8)]
    assert [r.profiled for r in marked[2:5]] == [False, True, False]  # iterations 3, 4, 5
    assert not any(r.profiled for r in records)  # the records underneath are unchanged
    assert marked.row_slice(1, 6) == [attrs.astuple(r, recurse=False) for r in marked[1:6]]
    # Fields read from the rows, the changed field through the function.
    assert list(record_fields(marked, "iteration", "profiled")) == [(i, i % 2 == 0) for i in range(1, 8)]
    assert list(record_fields(marked, "step_time_s")) == [(r.step_time_s,) for r in records]
    assert list(record_fields(list(marked), "iteration", "profiled")) == list(
        record_fields(marked, "iteration", "profiled")
    )


def test_fields_of_records_in_a_file_are_read_without_making_records(tiny_blocks, monkeypatch):
    from tprimat.result.collect import timed_records
    from tprimat.result.metrics import with_throughput

    memory_line = IterationRecord(iteration=9, mem_allocated_gib=3.0)
    records = ColdRecords().finish([_record(i, loss=float(i)) for i in range(1, 8)] + [memory_line])
    filled = with_throughput(records, global_batch_size=4, seq_length=8, world_size=2)
    expected = [(r.iteration, r.tokens_per_s_per_gpu) for r in filled]
    assert expected[0][1] == 32 / records[0].step_time_s / 2
    timed = timed_records(records)  # without the memory line
    made = []
    monkeypatch.setattr(spill, "record_from", lambda row: made.append(row))
    assert list(record_fields(filled, "iteration", "tokens_per_s_per_gpu")) == expected
    assert list(record_fields(timed, "iteration", "loss")) == [(i, float(i)) for i in range(1, 8)]
    assert made == []
    # By blocks of columns: the same values, in the same order, still without a record made.
    blocks = list(record_field_blocks(filled, "iteration", "tokens_per_s_per_gpu"))
    assert [pair for block in blocks for pair in zip(*block, strict=True)] == expected
    blocks = list(record_field_blocks(timed, "iteration", "loss"))
    assert [pair for block in blocks for pair in zip(*block, strict=True)] == [(i, float(i)) for i in range(1, 8)]
    assert made == []
    monkeypatch.undo()
    assert list(record_field_blocks(list(filled), "iteration", "loss")) == [
        [tuple(r.iteration for r in filled), tuple(r.loss for r in filled)]
    ]


def test_a_collector_moves_whole_blocks_to_the_file(monkeypatch):
    from tprimat.result import collect

    monkeypatch.setattr(collect, "HOT_RECORDS", collect.BLOCK_RECORDS)
    collector = EventCollector(spill_after=2 * collect.BLOCK_RECORDS + 10)
    collector.consume([_record(i) for i in range(1, 3 * collect.BLOCK_RECORDS)])
    assert collector._cold is not None
    assert all(block.count == collect.BLOCK_RECORDS for block in collector._cold.blocks)
    assert [r.iteration for r in collector.records] == list(range(1, 3 * collect.BLOCK_RECORDS))


def test_records_taken_back_and_interleaved_blocks_come_out_once_in_order(tiny_blocks):
    cold = ColdRecords()
    cold.put([_record(i) for i in (10, 20, 30, 40)])
    cold.put([_record(i) for i in (15, 25, 35)])
    where = cold.find(20)
    assert where is not None and cold.record(where).iteration == 20
    cold.drop(where)
    assert cold.find(20) is None and cold.find(21) is None and cold.find(99) is None
    records = cold.finish([_record(20, loss=2.0), _record(5)])
    assert [r.iteration for r in records] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert records[3].loss == 2.0


def _events(registry, path):
    backend = "amd_primus" if path.startswith("primus") else "nemo" if path.startswith("nemo") else "megatron"
    backend = {"nemo": "nvd_nemo", "megatron": "nvd_megatron"}.get(backend, backend)
    return list(registry.parse_metrics(backend, lines=LogFile(LOGS / path), source=path))


@pytest.mark.parametrize("path", REAL_LOGS)
def test_a_collector_that_spills_keeps_what_one_in_memory_keeps(registry, tiny_blocks, path):
    events = _events(registry, path)
    kept = EventCollector().consume(events)
    spilled = EventCollector(spill_after=2).consume(events)
    assert isinstance(spilled.records, RecordSequence)
    assert _values(spilled.records) == _values(kept.records)
    assert spilled.duplicates == kept.duplicates
    assert sorted(spilled.replaced) == sorted(kept.replaced)
    assert spilled.notes() == kept.notes()


def test_a_collector_takes_no_records_once_they_were_read(tiny_blocks):
    collector = EventCollector(spill_after=2).consume([_record(i) for i in range(1, 6)])
    assert len(collector.records) == 5
    with pytest.raises(RuntimeError):
        collector.add(_record(9))


def test_the_summary_of_records_in_a_file_is_the_summary_of_the_same_records_in_memory(tiny_blocks):
    originals = [
        _record(
            i,
            tokens=4096,
            tokens_per_s_per_gpu=4096 / (1.0 + i / 1000),
            loss=10.0 - i / 10,
            mem_max_allocated_gib=20.0 + (i % 7),
            energy_j=100.0 + i,
            skipped=int(i == 9),
            reported={"tflops": 300.0 + i, "count": i, "name": "x", "nan": math.nan},
        )
        for i in range(1, 40)
    ]
    records = ColdRecords().finish(list(originals))
    options = dict(model=None, seq_length=4096, world_size=8, precision="bf16", device_name=None, warmup_iterations=3)
    assert summarize(records, **options) == summarize(originals, **options)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("path", REAL_LOGS)
def test_parsing_with_records_in_a_file_writes_the_same_result(
    registry, tiny_blocks, tiny_ranges, monkeypatch, path, workers
):
    in_memory = logs.parse_logs([LOGS / path], registry=registry, allow_mismatch=True, workers=workers)
    monkeypatch.setattr(logs, "SPILL_AFTER_RECORDS", 2)
    spilled = logs.parse_logs([LOGS / path], registry=registry, allow_mismatch=True, workers=workers)
    assert isinstance(spilled.result.iterations, RecordSequence)
    assert dumps_result(spilled.result) == dumps_result(in_memory.result)


@pytest.mark.parametrize("seed", range(20))
def test_restarted_runs_merge_blocks_of_any_overlap_into_one_ordered_sequence(tiny_blocks, seed):
    """Iterations moved out, taken back (logged again) and moved out again, in any pattern: the
    sequence holds each iteration once, the latest record of it, in order."""
    import random

    chance = random.Random(seed)
    cold = ColdRecords()
    latest: dict[int, float] = {}
    for attempt in range(chance.randint(1, 6)):
        start = chance.randint(1, 30)
        batch = []
        for iteration in range(start, start + chance.randint(1, 12)):
            where = cold.find(iteration)
            if where is not None:
                assert cold.record(where).loss == latest[iteration]
                cold.drop(where)
            elif iteration in latest:
                continue  # in this batch already
            latest[iteration] = float(attempt * 100 + iteration)
            batch.append(_record(iteration, loss=latest[iteration]))
        cold.put(batch)
    records = cold.finish([])
    assert [(r.iteration, r.loss) for r in records] == sorted(latest.items())


def test_blocks_in_order_are_found_by_bisection_and_overlapping_ones_by_their_spans(tiny_blocks):
    cold = ColdRecords()
    cold.put([_record(i) for i in (1, 3, 5, 10, 11, 12, 20)])
    assert cold._in_order
    assert cold.find(4) is None and cold.find(13) is None and cold.find(0) is None
    assert [cold.record(cold.find(i)).iteration for i in (1, 5, 10, 12, 20)] == [1, 5, 10, 12, 20]
    cold.put([_record(i) for i in (7, 8, 9)])  # below the highest, but within no block's span
    assert cold._in_order
    cold.put([_record(i) for i in (4, 6)])  # a restart logged an iteration within a block's span
    assert not cold._in_order
    assert [cold.record(cold.find(i)).iteration for i in (1, 4, 5, 6, 8, 11, 20)] == [1, 4, 5, 6, 8, 11, 20]
    assert cold.find(2) is None and cold.find(13) is None


def test_records_put_between_blocks_make_blocks_that_span_none_of_theirs(tiny_blocks):
    cold = ColdRecords()
    cold.put([_record(i) for i in (10, 11, 12)])
    cold.put([_record(i) for i in (8, 13, 14)])  # cut before 10, the first of a block here
    cold.put_columns([list(column) for column in zip(*map(attrs.astuple, [_record(30)]), strict=True)])
    records = [_record(i) for i in (25, 29, 31)]  # as columns: cut before 30 likewise
    cold.put_columns([list(column) for column in zip(*map(attrs.astuple, records), strict=True)])
    assert cold._in_order
    assert [(b.first, b.last) for b in cold.blocks] == [(10, 12), (8, 8), (13, 14), (30, 30), (25, 29), (31, 31)]
    assert [r.iteration for r in cold.finish([])] == [8, 10, 11, 12, 13, 14, 25, 29, 30, 31]
