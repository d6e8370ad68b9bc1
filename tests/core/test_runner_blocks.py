"""A live run whose parser yields blocks of iteration records records each iteration as it arrives."""

from __future__ import annotations

import pytest

from tests.core.blocks import block_of, blockified
from tests.core.test_runner import FakeBackend, request
from tprimat.contract.records import IterationBlock, IterationRecord, LogFact
from tprimat.contract.registry import Registry
from tprimat.result.schema import load_result
from tprimat.running import runner
from tprimat.running.prepare import prepare


class _BlockingBackend(FakeBackend):
    """The fake backend, its consecutive step lines yielded two at a time as blocks."""

    def _parse(self, lines, source):
        return blockified(super()._parse(lines, source), [2])


def test_a_block_reaches_the_live_collector_as_its_records():
    fact = LogFact(key="seq_length", value=1024)
    made = [IterationRecord(iteration=i, step_time_s=0.5) for i in (1, 2, 3)]
    assert list(runner._one_by_one([fact, block_of(made[:2]), made[2]])) == [fact, *made]


@pytest.mark.slow
def test_a_live_run_of_blocks_records_every_iteration_as_it_arrives(tmp_path, monkeypatch):
    registry = Registry()
    registry.register(_BlockingBackend(), name="fake")
    taken = []
    add = runner.EventCollector.add

    def counted(self, event):
        assert not isinstance(event, IterationBlock)
        record = add(self, event)
        if record is not None:
            taken.append(record.iteration)
        return record

    monkeypatch.setattr(runner.EventCollector, "add", counted)
    runner.run(prepare(request(tmp_path), registry), registry)
    result = load_result(tmp_path / "runs" / "r1" / "result.json")
    assert [r.iteration for r in result.iterations] == [1, 2, 3, 4, 5, 6]
    assert taken == [1, 2, 3, 4, 5, 6]
