"""A result with per-iteration booleans survives writing and reading."""

from __future__ import annotations

import pytest

from tprimat.result.resultjson import write_result
from tprimat.result.schema import (
    IterationRecord,
    Result,
    ResultConfig,
    ResultError,
    RunInfo,
    Summary,
    load_result,
)


def test_profiled_flag_round_trips_and_a_non_bool_is_rejected(tmp_path):
    result = Result(
        run=RunInfo(
            id="r",
            backend="b",
            platform=None,
            framework=None,
            model="m",
            dataset="mock",
            status="completed",
            started_at=None,
            finished_at=None,
            tprimat_version="0",
        ),
        config=ResultConfig(
            model="m",
            seq_length=None,
            global_batch_size=None,
            micro_batch_size=None,
            world_size=None,
            precision=None,
            methodology="iso",
        ),
        iterations=[IterationRecord(iteration=1, profiled=True), IterationRecord(iteration=2)],
        summary=Summary(warmup_iterations=0, measured_iterations=0),
    )
    path = write_result(result, tmp_path / "r.json")
    assert load_result(path) == result
    path.write_text(path.read_text().replace('"profiled": [true,false]', '"profiled": [1,false]'))
    with pytest.raises(ResultError, match=r"\$\.iterations\.profiled\[0\]"):
        load_result(path)
