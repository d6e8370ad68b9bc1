"""Writing a result piece by piece gives exactly the text of the whole-document encoder."""

from __future__ import annotations

import json
import os
import random
import threading

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS
from tprimat.contract.records import IterationRecord
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.result import childtext, resultjson, schema
from tprimat.result.resultjson import _batch_text, _record_text, iter_result_json, write_result
from tprimat.result.schema import dumps_result, load_result

PATHS = [
    LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
    LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
    LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log",
]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.parent.name)
def test_written_file_is_the_whole_document_text(path, tmp_path):
    result = parse_logs([path], registry=Registry.from_environment(), allow_mismatch=True).result
    nan = attrs.evolve(result.iterations[0], loss=float("nan"), reported={"x": float("inf")})
    for variant in (
        result,
        attrs.evolve(result, iterations=[nan, *result.iterations[1:]]),
        attrs.evolve(result, iterations=[]),
    ):
        out = write_result(variant, tmp_path / "result.json")
        text = out.read_text(encoding="utf-8")
        assert text == dumps_result(variant) == "".join(iter_result_json(variant))
        assert json.loads(text)["schema_version"] == load_result(out).schema_version


def _number(draw: random.Random) -> float | int | None:
    """Floats of every magnitude (those Python writes with an exponent too), zeros, ints, None."""
    kind = draw.random()
    if kind < 0.1:
        return None
    if kind < 0.2:
        return draw.choice([0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-05, 1e15, 1e16, -1e16, 5e-324, 1.5, 7])
    return draw.choice([1, -1]) * draw.random() * 10 ** draw.randint(-30, 30)


def _records(draw: random.Random, count: int, text=lambda draw, i: f"run.log:{i}") -> list[IterationRecord]:
    return [
        IterationRecord(
            iteration=i,
            step_time_s=draw.random() + 0.01,
            loss=_number(draw),
            lr=_number(draw),
            grad_norm=_number(draw),
            mem_device_used_gib=_number(draw),
            tokens=draw.choice([None, 0, 1 << 20]),
            tokens_per_s_per_gpu=_number(draw),
            timestamp=text(draw, i),
            source=f"run.log:{i}",
            reported={f"k{j}": draw.choice([_number(draw), "text", True, None]) for j in range(draw.randint(0, 5))},
        )
        for i in range(count)
    ]


def _one_by_one(records: list[IterationRecord]) -> str:
    return ",\n    ".join(_record_text(record, schema) for record in records)


def test_a_batch_is_written_as_json_writes_each_record():
    draw = random.Random(14)
    for _ in range(60):
        records = _records(draw, draw.randint(1, 50))
        assert _batch_text(records) == _one_by_one(records)


@pytest.mark.parametrize(
    "odd",
    ["caf\u00e9", "x\x7fy", "null", 'a": 1e-05,\n"b'],
    ids=["non-ascii", "DEL", "null-text", "member-like"],
)
def test_a_batch_msgspec_would_write_otherwise_goes_one_by_one(odd):
    draw = random.Random(3)
    records = _records(draw, 20, lambda draw, i: odd if i == 7 else "2026-11-24 21:00:00")
    text = _batch_text(records)
    if odd in ('a": 1e-05,\n"b', "null"):  # a string that looks like a member or a null: written fast, as it is
        assert text == _one_by_one(records)
    else:  # text that json escapes
        assert text is None
    for bad in (float("nan"), float("inf")):
        spoilt = [*records[:3], attrs.evolve(records[3], loss=bad), *records[4:]]
        assert _batch_text(spoilt) is None


@pytest.fixture
def long_result(monkeypatch):
    """A parsed result with 60 random records, written in batches of 7, a child forked from 20 records on."""
    monkeypatch.setattr(resultjson, "BATCH_RECORDS", 7)
    monkeypatch.setattr(resultjson, "FORK_MIN_RECORDS", 20)
    result = parse_logs([PATHS[0]], registry=Registry.from_environment(), allow_mismatch=True).result
    return attrs.evolve(result, iterations=_records(random.Random(7), 60))


def test_records_encoded_partly_by_a_child_process_give_the_same_text(long_result, monkeypatch):
    children = []
    start = resultjson.TextInChild.start.__func__

    def spy(cls, make):
        child = start(cls, make)
        children.append(child)
        return child

    monkeypatch.setattr(resultjson.TextInChild, "start", classmethod(spy))
    alone = threading.active_count() == 1  # else no child is forked, and this process writes it all
    assert "".join(iter_result_json(long_result)) == dumps_result(long_result)
    assert len(children) == 1 and (children[0] is not None) == alone


def test_a_child_that_fails_leaves_its_records_to_this_process(long_result, monkeypatch):
    parent = os.getpid()
    batches = []
    batch_text = resultjson._batch_text

    def fails_in_child(records):
        if os.getpid() != parent:
            raise MemoryError
        batches.append(records[0].iteration)
        return batch_text(records)

    monkeypatch.setattr(resultjson, "_batch_text", fails_in_child)
    assert "".join(iter_result_json(long_result)) == dumps_result(long_result)
    assert batches == list(range(0, 60, 7))  # the child's half was encoded here, after the first


def test_without_a_temporary_directory_this_process_writes_it_all(long_result, monkeypatch):
    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(childtext.tempfile, "TemporaryFile", no_room)
    assert childtext.TextInChild.start(lambda: ["text"]) is None
    assert "".join(iter_result_json(long_result)) == dumps_result(long_result)


_MAGNITUDES = st.one_of(
    st.sampled_from([1e-4, 9.999999999999999e-05, 1e-05, 1.5, 1e15, 9.999999999999998e15, 1e16, 5e-324]),
    st.floats(1e-7, 1e18),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_MAGNITUDES, st.sampled_from([0, 1, 1, 1])), min_size=1, max_size=30),
    st.sampled_from([1.0, -1.0]),
    st.booleans(),
)
def test_a_column_of_one_sign_is_written_as_json_writes_it(figures, sign, with_none):
    """Floats all of one sign (zeros among them) are checked by their least and largest alone:
    written as json writes them, those Python spells with an exponent too."""
    values = [sign * magnitude * kept for magnitude, kept in figures]  # some zeros, signed
    if with_none:
        values[0] = None
    records = [
        IterationRecord(iteration=i + 1, step_time_s=1.0, lr=value, reported={"figure": value})
        for i, value in enumerate(values)
    ]
    assert _batch_text(records) == _one_by_one(records)
