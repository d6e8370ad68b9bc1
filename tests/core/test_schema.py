import json
import math
from pathlib import Path

import attrs
import pytest

from tprimat.result.resultjson import write_result
from tprimat.result.schema import (
    SCHEMA_VERSION,
    IterationRecord,
    Result,
    ResultConfig,
    ResultError,
    RunInfo,
    Summary,
    dumps_result,
    load_result,
    result_from_dict,
)


def make_result(loss: float = 2.5) -> Result:
    return Result(
        run=RunInfo(
            id="r1",
            backend="toy",
            platform="cpu",
            framework="toy",
            model="llama3.1-tiny",
            dataset="mock",
            status="completed",
            started_at="2026-11-22T10:00:00+00:00",
            finished_at="2026-11-22T10:01:00+00:00",
            tprimat_version="0.1.0",
        ),
        config=ResultConfig(
            model="llama3.1-tiny",
            seq_length=128,
            global_batch_size=4,
            micro_batch_size=1,
            world_size=1,
            precision="fp32",
            methodology="iso",
            settings={"training": {"lr": 1e-3}},
        ),
        iterations=[
            IterationRecord(
                iteration=1, step_time_s=0.5, loss=math.nan, lr=0.0, reported={"tflops": math.inf, "label": "GB"}
            ),
            IterationRecord(iteration=2, step_time_s=0.25, loss=loss, mem_reserved_gib=1.5),
        ],
        summary=Summary(warmup_iterations=0, measured_iterations=2),
    )


def test_round_trip_keeps_nan_inf_and_zero_lr(tmp_path):
    result = make_result()
    path = write_result(result, tmp_path / "result.json")
    loaded = load_result(path)
    assert math.isnan(loaded.iterations[0].loss) and loaded.iterations[0].lr == 0.0
    assert loaded.iterations[0].reported == {"tflops": math.inf, "label": "GB"}
    assert loaded.iterations[1] == result.iterations[1]
    assert dumps_result(loaded) == dumps_result(result)


def test_document_is_strict_json(tmp_path):
    text = dumps_result(make_result())
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["iterations"]["loss"][0] == "NaN"
    assert set(data) == {
        "schema_version",
        "run",
        "hardware",
        "software",
        "config",
        "iterations",
        "summary",
        "provenance",
        "memory",
        "evaluations",
        "convergence",
    }


def test_null_hardware_by_default():
    data = json.loads(dumps_result(make_result()))
    assert all(value is None for value in data["hardware"].values())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["iterations"]["step_time_s"].__setitem__(1, "fast"), "$.iterations.step_time_s[1]"),
        (lambda d: d["iterations"]["step_time_s"].__setitem__(1, -1.0), "$.iterations.step_time_s[1]"),
        (lambda d: d["run"].update(status="great"), "$.run.status"),
        (lambda d: d["run"].pop("id"), "$.run.id"),
        (lambda d: d["summary"].update(typo_field=1), "typo_field"),
        (lambda d: d.update(schema_version=99), "schema_version 99"),
        (lambda d: d.pop("schema_version"), "no schema_version"),
    ],
)
def test_invalid_documents_name_the_field(mutate, message):
    data = json.loads(dumps_result(make_result()))
    mutate(data)
    with pytest.raises(ResultError) as info:
        result_from_dict(data, origin="r.json")
    assert message in str(info.value) and "r.json" in str(info.value)


def test_corrupted_file_is_rejected_with_position(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(dumps_result(make_result())[:200])
    with pytest.raises(ResultError, match=r"corrupt JSON at line \d+ column \d+"):
        load_result(path)


def test_binary_and_bare_nan_are_rejected(tmp_path):
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ResultError, match="not UTF-8"):
        load_result(binary)
    bare = tmp_path / "bare.json"
    bare.write_text(dumps_result(make_result()).replace('"NaN"', "NaN"))
    with pytest.raises(ResultError, match="NaN"):
        load_result(bare)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    write_result(make_result(), path)
    before = path.read_text()

    import tprimat.atomic as atomic

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", explode)
    with pytest.raises(OSError):
        write_result(make_result(loss=9.0), path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_result_files_get_the_usual_permissions(tmp_path):
    import os

    path = write_result(make_result(), tmp_path / "result.json")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_version_2_result_reads_as_one_that_did_not_know_its_framework_settings(tmp_path):
    # a real H200 run written by schema version 2 (tests/fixtures/h200/PROVENANCE.md)
    path = Path(__file__).parents[1] / "fixtures" / "h200" / "llama3.1-8b_seq2048_gbs1" / "result.json"
    assert json.loads(path.read_text())["schema_version"] == 2
    result = load_result(path)
    assert result.schema_version == SCHEMA_VERSION == 6
    assert result.config.framework is None
    assert result.summary.tokens_per_s_per_gpu is not None  # nothing else lost
    written = write_result(result, tmp_path / "result.json")
    assert json.loads(written.read_text())["config"]["framework"] is None


def test_framework_settings_round_trip(tmp_path):
    from tprimat.result.schema import FrameworkRecord, SettingDisagreement

    framework = FrameworkRecord(
        framework="Megatron-LM (core 0.15)",
        rendered={"micro_batch_size": 1, "norm_epsilon": 1e-05, "data_path": None},
        kept={"gradient_accumulation_fusion": True},
        kept_from="Megatron-LM 0.15 argument defaults",
        shared={"loss.eod_mask": False, "norm.epsilon": 1e-05},
        stated={"micro_batch_size": "2"},
        stated_from="Megatron-LM argument dump at train.log:12",
        disagreements=[SettingDisagreement(setting="micro_batch_size", planned=1, stated="2", source="train.log:40")],
    )
    result = attrs.evolve(make_result(), config=attrs.evolve(make_result().config, framework=framework))
    path = write_result(result, tmp_path / "result.json")
    assert load_result(path).config.framework == framework
