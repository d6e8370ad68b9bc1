"""A result's iterations as columns: older documents migrate, bad columns are refused by their place."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest

from tests.core.test_schema import make_result
from tprimat.contract.records import ITERATION_FIELDS, IterationRecord
from tprimat.result import schema
from tprimat.result.resultjson import write_result
from tprimat.result.schema import ResultError, dumps_result, load_result, result_from_dict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _older_results() -> list[Path]:
    """The result fixtures of an older schema, whose iterations are a list of objects (they stay so on disk)."""
    found = []
    for path in sorted(FIXTURES.rglob("result.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data.get("iterations"), list) and data["iterations"]:
            found.append(path)
    return found


def test_there_are_older_results_to_migrate():
    versions = {json.loads(path.read_text())["schema_version"] for path in _older_results()}
    assert {1, 2, 3} <= versions and max(versions) < schema.SCHEMA_VERSION


@pytest.mark.parametrize("path", _older_results(), ids=lambda p: str(p.parent.relative_to(FIXTURES)))
def test_an_older_result_migrates_to_the_same_records(path, tmp_path):
    objects = json.loads(path.read_text(encoding="utf-8"))["iterations"]
    loaded = load_result(path)
    assert loaded.schema_version == schema.SCHEMA_VERSION
    assert len(loaded.iterations) == len(objects)
    for record, item in zip(loaded.iterations, objects, strict=True):
        values = schema._replace_non_finite(attrs.asdict(record))
        assert {key: values[key] for key in item} == item  # each value as written ("NaN" for NaN)
        defaults = attrs.asdict(IterationRecord(iteration=record.iteration))
        assert all(values[key] == defaults[key] for key in values.keys() - item.keys())
    again = load_result(write_result(loaded, tmp_path / "result.json"))  # written as columns, read back
    assert dumps_result(again) == dumps_result(loaded)
    assert json.loads((tmp_path / "result.json").read_text())["iterations"]["iteration"] == [
        item["iteration"] for item in objects
    ]


def _v5(data: dict) -> dict:
    """A document of this version as schema version 5 wrote it: its figures an object per record."""
    columns = data["iterations"]
    count = len(columns["iteration"])
    figures = columns["reported"]
    rows = [{name: values[row] for name, values in figures.items() if values[row] is not None} for row in range(count)]
    return {**data, "iterations": {**columns, "reported": rows}, "schema_version": 5}


def _older(**changes) -> dict:
    """make_result()'s document as schema version 4 wrote it: its iterations a list of objects."""
    data = _v5(json.loads(dumps_result(make_result())))
    columns = data["iterations"]
    data["iterations"] = [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
    return {**data, "schema_version": 4, **changes}


def test_a_version_5_document_reads_its_figures_as_columns():
    data = _v5(json.loads(dumps_result(make_result())))
    data["iterations"]["reported"] = [{"tflops": 1.5, "label": None}, {"label": "GB", "tflops": "NaN"}]
    loaded = result_from_dict(data)
    assert loaded.iterations[0].reported == {"tflops": 1.5}  # a null figure: none
    assert loaded.iterations[1].reported["label"] == "GB" and math.isnan(loaded.iterations[1].reported["tflops"])
    written = json.loads(dumps_result(loaded))["iterations"]["reported"]
    assert written == {"tflops": [1.5, "NaN"], "label": [None, "GB"]}
    assert list(written) == ["label", "tflops"]


@pytest.mark.parametrize(
    "reported, message",
    [({"tflops": 1.0}, "expected an array of objects @ $.iterations.reported"), ([{}, 3], "@ $.iterations.reported")],
)
def test_a_bad_version_5_document_is_refused_naming_the_place(reported, message):
    data = _v5(json.loads(dumps_result(make_result())))
    data["iterations"]["reported"] = reported
    with pytest.raises(ResultError) as info:
        result_from_dict(data, origin="v5.json")
    assert message in str(info.value) and "v5.json" in str(info.value)


def test_figures_are_written_one_array_per_name_in_sorted_order():
    records = [
        IterationRecord(iteration=1, reported={"b": None, "a": 0.0}),
        IterationRecord(iteration=2, reported={}),
        IterationRecord(iteration=3, reported={"c": "x", "b": 2.5}),
    ]
    text = dumps_result(attrs.evolve(make_result(), iterations=records))
    assert json.loads(text)["iterations"]["reported"] == {
        "a": [0.0, None, None],
        "c": [None, None, "x"],
        "b": [None, None, 2.5],
    }
    assert '\n      "a": [0.0,null,null],\n      "b": [null,null,2.5],\n      "c": [null,null,"x"]\n' in text
    assert [record.reported for record in result_from_dict(json.loads(text)).iterations] == [
        {"a": 0.0},
        {},
        {"b": 2.5, "c": "x"},
    ]


def test_a_version_4_document_reads_as_its_columns():
    loaded = result_from_dict(_older())
    expected = make_result()
    assert dumps_result(loaded) == dumps_result(expected)
    assert math.isnan(loaded.iterations[0].loss) and loaded.iterations[0].reported["tflops"] == math.inf


@pytest.mark.parametrize(
    "iterations, message",
    [
        ([{"iteration": 1}, 7], "expected an object @ $.iterations[1]"),
        ([{"iteration": 1, "los": 2.0}], "extra fields found (los) @ $.iterations[0]"),
        ([{"step_time_s": 1.0}], "required field missing @ $.iterations[0].iteration"),
        ({"iteration": [1]}, "expected an array of iteration records @ $.iterations"),
        ([{"iteration": 1}, {"iteration": 2, "loss": "low"}], "$.iterations.loss[1]"),
    ],
)
def test_a_bad_version_4_document_is_refused_naming_the_place(iterations, message):
    with pytest.raises(ResultError) as info:
        result_from_dict(_older(iterations=iterations), origin="old.json")
    assert message in str(info.value) and "old.json" in str(info.value)


def _columns(change) -> dict:
    data = json.loads(dumps_result(make_result()))
    change(data["iterations"])
    return data


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["loss"].append(1.0), "(3 values where 'iteration' has 2) @ $.iterations.loss"),
        (
            lambda c: c["reported"]["tflops"].pop(),
            "(figure 'tflops': 1 values where 'iteration' has 2) @ $.iterations.reported",
        ),
        (lambda c: c.update(reported=[{}, {}]), "(expected an object with one array per figure name) @"),
        (lambda c: c["tokens"].__setitem__(1, "many"), "expected an integer, got 'many') @ $.iterations.tokens[1]"),
        (lambda c: c["tokens"].__setitem__(0, 2.0), "@ $.iterations.tokens[0]"),
        (lambda c: c["profiled"].__setitem__(1, 1), "expected true or false, got 1) @ $.iterations.profiled[1]"),
        (lambda c: c["source"].__setitem__(1, 3), "@ $.iterations.source[1]"),
        (
            lambda c: c["step_time_s"].__setitem__(0, "NaN"),
            "'step_time_s' must be > 0: nan) @ $.iterations.step_time_s[0]",
        ),
        (lambda c: c["covers_iterations"].__setitem__(1, 0), "@ $.iterations.covers_iterations[1]"),
        (lambda c: c["reported"].__setitem__("x", [None, [1]]), "$.iterations.reported[1]"),
        (lambda c: c.update(lr=0.1), "expected an array) @ $.iterations.lr"),
        (lambda c: c.update(lrs=[0.1, 0.2]), "(extra columns found (lrs)) @ $.iterations"),
        (lambda c: c.pop("iteration"), "@ $.iterations.iteration"),
    ],
)
def test_a_bad_column_is_refused_naming_its_place(change, message):
    with pytest.raises(ResultError) as info:
        result_from_dict(_columns(change), origin="r.json")
    assert message in str(info.value) and "r.json" in str(info.value)


def test_iterations_that_are_not_columns_are_refused():
    data = json.loads(dumps_result(make_result()))
    data["iterations"] = [{"iteration": 1}]  # the older layout under this version's number
    with pytest.raises(ResultError, match=r"expected an object with one array per field .* @ \$\.iterations"):
        result_from_dict(data)


def test_a_column_left_out_holds_the_field_s_default():
    data = _columns(lambda c: [c.pop(name) for name in ITERATION_FIELDS if name not in ("iteration", "loss")])
    loaded = result_from_dict(data).iterations
    assert [(r.iteration, r.skipped, r.covers_iterations, r.reported) for r in loaded] == [(1, 0, 1, {}), (2, 0, 1, {})]
    assert loaded[0].reported is not loaded[1].reported  # each record its own
    assert math.isnan(loaded[0].loss) and loaded[1].loss == 2.5


def test_numbers_are_read_as_their_field_s_type():
    data = _columns(
        lambda c: c.update(
            loss=[3, "Infinity"], reported={"a": [2, None], "b": ["-Infinity", None], "c": [None, "text"]}
        )
    )
    loaded = result_from_dict(data).iterations
    assert loaded[0].loss == 3.0 and type(loaded[0].loss) is float and loaded[1].loss == math.inf
    assert loaded[0].reported == {"a": 2.0, "b": -math.inf} and loaded[1].reported == {"c": "text"}
