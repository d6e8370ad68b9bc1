"""A run that exits 0 but measures nothing is ``failed``, never ``completed``.

The config refuses a warm-up that covers every iteration before anything starts; a job can
still leave nothing to measure, when its lines after warm-up carry no step time or one no
run can have.  The job is the fake backend's real process (see ``test_runner.py``).
"""

from __future__ import annotations

import attrs
import pytest

from tests.core.test_runner import FakeBackend, request
from tprimat.contract.registry import Registry
from tprimat.result.schema import IterationRecord, load_result
from tprimat.running.prepare import prepare
from tprimat.running.runner import run


class AfterWarmup(FakeBackend):
    """The fake backend, its records after iteration 1 changed: no step time, or 1.9e37 s."""

    def __init__(self, step_time_s: float | None) -> None:
        super().__init__()
        self.step_time_s = step_time_s

    def _parse(self, lines, source):
        for event in super()._parse(lines, source):
            if isinstance(event, IterationRecord) and event.iteration > 1:
                event = attrs.evolve(event, step_time_s=self.step_time_s)
            yield event


@pytest.mark.slow
@pytest.mark.parametrize("step_time_s", [None, 1.9e37])
def test_a_run_that_measured_nothing_is_failed(tmp_path, step_time_s):
    registry = Registry()
    registry.register(AfterWarmup(step_time_s), name="fake")
    outcome = run(prepare(request(tmp_path, iterations=4), registry), registry)  # warm-up 1
    result = load_result(outcome.result_path)
    assert outcome.return_code == 0
    assert result.summary.measured_iterations == 0
    assert result.run.status == "failed"
    assert any(note.startswith("nothing measured") for note in result.provenance.notes)
