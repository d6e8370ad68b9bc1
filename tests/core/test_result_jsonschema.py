"""The JSON Schema of result.json: generated from the classes, shipped, and true for every result."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from tests.core.test_schema import make_result
from tprimat.cli import cli
from tprimat.hardware.partitions import DevicePartition
from tprimat.result.jsonschema import (
    result_json_schema,
    result_json_schema_text,
    shipped_result_json_schema_text,
)
from tprimat.result.schema import (
    Caveats,
    ConvergenceSummary,
    EvalPoint,
    FrameworkRecord,
    Hardware,
    MemoryReport,
    ResultError,
    SettingDisagreement,
    Software,
    Stats,
    load_result,
    migrate,
    result_from_dict,
    result_to_dict,
)

jsonschema = pytest.importorskip("jsonschema")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STATS = Stats(count=2, mean=1.0, median=1.0, p5=1.0, p95=1.0, min=1.0, max=1.0, cv=None)


def _result_documents() -> list[Path]:
    """Every tprimat result under tests/fixtures (a JSON object with a schema_version and a run)."""
    found = []
    for path in sorted(FIXTURES.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "schema_version" in data and isinstance(data.get("run"), dict):
            found.append(path)
    return found


def _validator():
    schema = result_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_what_the_classes_give():
    # Regenerate with: tprimat schema result > core/result/result.schema.json
    assert shipped_result_json_schema_text() == result_json_schema_text()


def test_tprimat_schema_result_prints_the_schema():
    done = CliRunner().invoke(cli, ["schema", "result"], catch_exceptions=False)
    assert done.exit_code == 0
    assert json.loads(done.output) == result_json_schema()


def test_every_field_of_every_class_is_in_the_schema():
    defs = result_json_schema()["$defs"]
    for cls in (Software, Hardware, Stats, MemoryReport, Caveats, EvalPoint, ConvergenceSummary, FrameworkRecord):
        assert set(defs[cls.__name__]["properties"]) == {f.name for f in attrs.fields(cls)}


@pytest.mark.parametrize("path", _result_documents(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_result_fixture_validates(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    load_result(path)  # the loader accepts it, so the schema must too
    _validator().validate(migrate(data, origin=str(path)))


def test_the_fixtures_hold_results_of_every_schema_version():
    versions = {json.loads(p.read_text())["schema_version"] for p in _result_documents()}
    assert {1, 2, 3} <= versions


def test_a_result_with_every_section_validates():
    full = attrs.evolve(
        make_result(),
        hardware=Hardware(device_name="MI300X", partition=DevicePartition(mode="CPX", per_gpu=8)),
        software=Software(container_image="tprimat:amd", framework_commits={"/workspace/Primus": "a" * 40}),
        memory=MemoryReport(per_rank_max_allocated_gib={"0": 12.5}, fits=True),
        caveats=Caveats(ambiguous="global batch", figures={"a": math.inf}),
        evaluations=[EvalPoint(iteration=10, eval_loss=math.nan)],
        convergence=ConvergenceSummary(target_log_perplexity=3.3, reached=False, evaluations=1),
    )
    full = attrs.evolve(
        full,
        config=attrs.evolve(
            full.config,
            framework=FrameworkRecord(
                framework="megatron", disagreements=[SettingDisagreement(setting="mbs", planned=1, stated=2)]
            ),
        ),
        summary=attrs.evolve(full.summary, step_time_s=STATS),
    )
    _validator().validate(json.loads(json.dumps(result_to_dict(full))))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["run"].update(unknown=1),  # a key the classes do not have
        lambda d: d["run"].update(status="done"),  # not one of the statuses
        lambda d: d["iterations"]["iteration"].__setitem__(0, -1),  # below the validator's bound
        lambda d: d["iterations"]["loss"].__setitem__(0, "nan"),  # non-finite floats have one spelling
        lambda d: d["iterations"]["skipped"].__setitem__(1, 0.5),  # a column's values are of its field's type
        lambda d: d["iterations"].update(lossy=[1.0, 2.0]),  # a column the record does not have
        lambda d: d["iterations"].update(loss=2.5),  # a column is an array
        lambda d: d["iterations"].pop("iteration"),  # the one column without a default
        lambda d: d["iterations"]["reported"].__setitem__("tflops", 1.0),  # reported: an array per figure
        lambda d: d["iterations"]["reported"]["tflops"].__setitem__(0, [1.0]),  # of numbers, text or null
        lambda d: d["summary"].pop("warmup_iterations"),  # a required field
    ],
)
def test_what_the_loader_refuses_the_schema_refuses(change):
    data = result_to_dict(make_result())
    change(data)
    with pytest.raises(ResultError):
        result_from_dict(json.loads(json.dumps(data)))
    assert not _validator().is_valid(data)
