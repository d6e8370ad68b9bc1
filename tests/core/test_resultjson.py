"""Writing a result piece by piece: the iterations as one line per column, each value spelled as json spells it."""

from __future__ import annotations

import enum
import json
import math
import random

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_schema import make_result
from tests.plugins.logfixtures import LOGS
from tprimat.contract.records import ITERATION_FIELDS, IterationRecord, LineSources, iteration_values
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.result import resultjson, schema
from tprimat.result.iterjson import reported_columns
from tprimat.result.resultjson import iter_result_json, values_text, write_result
from tprimat.result.schema import dumps_result, load_result, result_to_dict

PATHS = [
    LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
    LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
    LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log",
]


def _compact(values) -> str:
    """``values`` as json writes them compactly, non-finite floats as the result's strings."""
    return json.dumps(schema._replace_non_finite(list(values)), separators=(",", ":"), allow_nan=False)


def _same_records(loaded, written) -> bool:
    """Records equal value for value, NaN equal to NaN (as their JSON text is); a record's
    figures by name (a figure that is None is none)."""

    def values(record: IterationRecord) -> list:
        figures = {name: value for name, value in sorted(record.reported.items()) if value is not None}
        return list(iteration_values(attrs.evolve(record, reported=figures)))

    return _compact(list(map(values, loaded))) == _compact(list(map(values, written)))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.parent.name)
def test_written_file_reads_back_as_the_same_records(path, tmp_path):
    result = parse_logs([path], registry=Registry.from_environment(), allow_mismatch=True).result
    nan = attrs.evolve(result.iterations[0], loss=float("nan"), reported={"x": float("inf"), "y": None})
    for variant in (
        result,
        attrs.evolve(result, iterations=[nan, *result.iterations[1:]]),
        attrs.evolve(result, iterations=[]),
    ):
        out = write_result(variant, tmp_path / "result.json")
        text = out.read_text(encoding="utf-8")
        assert text == dumps_result(variant) == "".join(iter_result_json(variant))
        loaded = load_result(out)
        assert loaded.schema_version == schema.SCHEMA_VERSION == json.loads(text)["schema_version"]
        assert _same_records(loaded.iterations, variant.iterations)
        assert dumps_result(loaded) == text


@pytest.mark.parametrize("path", PATHS[:1], ids=lambda p: p.parent.name)
def test_the_text_is_the_indented_document_with_one_line_per_column(path):
    result = parse_logs([path], registry=Registry.from_environment(), allow_mismatch=True).result
    text = dumps_result(result)
    data = result_to_dict(result)
    assert json.loads(text) == data
    lines = text.splitlines()
    start = lines.index('  "iterations": {')
    columns = lines[start + 1 : start + 1 + len(ITERATION_FIELDS)]
    for line, name in zip(columns[:-1], ITERATION_FIELDS[:-1], strict=True):
        assert line.rstrip(",") == f"    {json.dumps(name)}: {_compact(data['iterations'][name])}"
    assert columns[-1] == '    "reported": {'  # then one line per figure
    figures = data["iterations"]["reported"]
    assert figures  # the log's figures
    after = start + len(ITERATION_FIELDS)
    for line, name in zip(lines[after + 1 :], figures, strict=False):
        assert line.rstrip(",") == f"      {json.dumps(name)}: {_compact(figures[name])}"
    assert lines[after + 1 + len(figures) : after + 3 + len(figures)] == ["    }", "  },"]
    # Everything around the iterations is as json.dumps indents it.
    bare = json.dumps({**data, "iterations": None}, indent=2).splitlines()
    assert lines[:start] == bare[: bare.index('  "iterations": null,')]


def _number(draw: random.Random) -> float | int | None:
    """Floats of every magnitude (those Python writes with an exponent too), zeros, ints, None,
    NaN and the infinities."""
    kind = draw.random()
    if kind < 0.1:
        return None
    if kind < 0.2:
        return draw.choice([0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e-05, 1e15, 1e16, -1e16, 5e-324, 1.5, 7.0])
    if kind < 0.22:
        return draw.choice([math.nan, math.inf, -math.inf])
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
            tokens=draw.choice([None, 0, 1 << 20, 1 << 70]),
            tokens_per_s_per_gpu=_number(draw),
            timestamp=text(draw, i),
            source=f"run.log:{i}",
            reported={f"k{j}": draw.choice([_number(draw), "text", None]) for j in range(draw.randint(0, 5))},
        )
        for i in range(count)
    ]


def test_each_column_is_written_as_json_writes_it():
    draw = random.Random(14)
    for _ in range(60):
        records = _records(draw, draw.randint(1, 50))
        for name in ITERATION_FIELDS:
            values = [getattr(record, name) for record in records]
            assert f"[{values_text(values)}]" == _compact(values), name


@pytest.mark.parametrize(
    "odd",
    ["caf\u00e9", "x\x7fy", "null", 'a": 1e-05,\n"b', "tab\there", 'quote"and\\'],
    ids=["non-ascii", "DEL", "null-text", "member-like", "tab", "quote"],
)
def test_sources_given_as_line_numbers_are_written_as_their_texts(odd):
    for lines in ([7], [1, 22, 10**12], list(range(5, 900, 7))):
        sources = LineSources(f"rank 0/{odd}.log:", lines)
        assert f"[{values_text(sources)}]" == _compact(list(sources))


@pytest.mark.parametrize(
    "odd",
    ["caf\u00e9", "x\x7fy", "null", 'a": 1e-05,\n"b', "tab\there", 'quote"and\\'],
    ids=["non-ascii", "DEL", "null-text", "member-like", "tab", "quote"],
)
def test_text_json_escapes_is_escaped_as_json_escapes_it(odd):
    values = ["2026-11-24 21:00:00", odd, None]
    assert f"[{values_text(values)}]" == _compact(values)
    records = [IterationRecord(iteration=i, reported=figures) for i, figures in enumerate([{"a": 1.0}, {odd: odd}, {}])]
    written = json.loads(dumps_result(attrs.evolve(make_result(), iterations=records)))["iterations"]["reported"]
    assert written == {"a": [1.0, None, None], odd: [None, odd, None]}


def test_a_long_column_is_written_a_block_at_a_time_as_one_array(monkeypatch, tmp_path):
    result = parse_logs([PATHS[0]], registry=Registry.from_environment(), allow_mismatch=True).result
    result = attrs.evolve(result, iterations=_records(random.Random(7), 60))
    whole = dumps_result(result)
    monkeypatch.setattr(resultjson, "BLOCK_RECORDS", 7)
    assert dumps_result(result) == whole
    assert _same_records(load_result(write_result(result, tmp_path / "result.json")).iterations, result.iterations)


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
    assert f"[{values_text(values)}]" == _compact(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.integers(), st.none(), st.booleans(), st.text(max_size=4)), min_size=1))
def test_any_column_of_json_scalars_is_written_as_json_writes_it(values):
    assert f"[{values_text(values)}]" == _compact(values)


class _Figure(float):
    """A float of its own type (as numpy's float64 is)."""


class _Count(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "values",
    [
        [_Figure(1.5), 2.5],
        [_Figure(1e-05), _Figure(2.5)],
        [_Count.ONE, 2],
        [1.5, "x"],
        [1, True],
        [None, 1.0, [1.0]],
        [2.0, {"a": 1}],
        [0.0, -0.0, 0.0],
        [float("nan"), None],
    ],
)
def test_a_column_of_other_kinds_after_a_number_is_written_as_json_writes_it(values):
    assert f"[{values_text(values)}]" == json.dumps(values, separators=(",", ":")).replace("NaN", '"NaN"')


_EDGES = [1e-4, 9.999999999999999e-05, 1e-05, 10.00001, 0.00001234, 1e16, 1e-7, 0.0, -0.0, 2.5, float("nan")]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_EDGES), st.floats(), st.integers(-(2**70), 2**70), st.none(), st.floats(-1e-3, 1e-3)
        ),
        min_size=1,
    ),
    st.sampled_from([1.0, -1.0]),
)
def test_a_column_of_numbers_and_none_is_written_as_json_writes_it(values, sign):
    """Numbers and None alone are told by msgspec's text (exponents, ``0.0000``, the count of
    ``null``): NaN and the infinities among None, fifth decimals and ints beyond 64 bits too;
    and so are the framework's figures, a column per name."""
    values = [value * sign if isinstance(value, float) else value for value in values]
    assert f"[{values_text(values)}]" == _compact(values)
    assert resultjson._figure_text(values) == _compact(values)[1:-1].encode()


def test_records_kept_in_a_file_are_written_alike_read_by_field_or_held(monkeypatch):
    """Few records kept in a file are read in one pass and held; many, a field at a time: the
    text is the same either way, and the same as that of the records in memory."""
    from tprimat.result.collect import EventCollector
    from tprimat.result.spill import RecordSequence

    result = parse_logs([PATHS[0]], registry=Registry.from_environment(), allow_mismatch=True).result
    records = _records(random.Random(11), 300)
    collector = EventCollector(spill_after=64).consume(records)
    kept = collector.records
    assert isinstance(kept, RecordSequence)
    assert 64 < len(kept) < len(records)  # the implausible ones refused (see collect.implausible)
    in_memory = dumps_result(attrs.evolve(result, iterations=list(kept)))
    monkeypatch.setattr(resultjson, "BLOCK_RECORDS", 50)
    for held in (0, 10_000):
        monkeypatch.setattr(resultjson, "HELD_RECORDS", held)
        assert dumps_result(attrs.evolve(result, iterations=kept)) == in_memory


def _kept_records():
    """A result of one fixture, and a few hundred records kept in a file (see the test above)."""
    from tprimat.result.collect import EventCollector

    result = parse_logs([PATHS[0]], registry=Registry.from_environment(), allow_mismatch=True).result
    kept = EventCollector(spill_after=64).consume(_records(random.Random(5), 300)).records
    return result, kept


def test_the_last_members_written_by_a_forked_child_are_the_same_text(monkeypatch, tmp_path):
    result, kept = _kept_records()
    monkeypatch.setattr(resultjson, "BLOCK_RECORDS", 50)
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 10**9)
    here = dumps_result(attrs.evolve(result, iterations=kept))
    children = []
    real_fork = resultjson.fork_call
    monkeypatch.setattr(resultjson, "fork_call", lambda call, **how: children.append(call) or real_fork(call, **how))
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 50)
    assert dumps_result(attrs.evolve(result, iterations=kept)) == here
    write_result(attrs.evolve(result, iterations=kept), tmp_path / "result.json")
    assert (tmp_path / "result.json").read_text(encoding="utf-8") == here  # its bytes copied as they are
    assert len(children) == 2  # a child wrote the last members each time
    assert resultjson.FORKED_FIELDS[-1] == "reported"


def test_members_a_child_fails_to_write_are_written_here(monkeypatch):
    import os

    result, kept = _kept_records()
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 10**9)
    here = dumps_result(attrs.evolve(result, iterations=kept))
    parent = os.getpid()
    real_write = resultjson._write_members

    def fails_in_a_child(iterations, names, fd):
        if os.getpid() != parent:
            raise OSError("disk full")
        real_write(iterations, names, fd)

    monkeypatch.setattr(resultjson, "_write_members", fails_in_a_child)
    monkeypatch.setattr("tprimat.workers.default_workers", lambda: 2)  # a child only beside a second CPU
    children = []
    real_fork = resultjson.fork_call
    monkeypatch.setattr(resultjson, "fork_call", lambda call, **how: children.append(call) or real_fork(call, **how))
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 50)
    assert dumps_result(attrs.evolve(result, iterations=kept)) == here
    assert len(children) == 1


def test_figures_written_a_block_at_a_time_are_the_columns_of_all_records(monkeypatch):
    """Names that come late, leave early or hold None, in blocks of any size: the same arrays as
    the figures of all records taken at once (``iterjson.reported_columns``)."""
    draw = random.Random(5)
    for _ in range(40):
        records = _records(draw, draw.randint(0, 40))
        expected = schema._replace_non_finite(reported_columns([record.reported for record in records]))
        result = attrs.evolve(make_result(), iterations=records)
        for size in (1, 3, 64):
            monkeypatch.setattr(resultjson, "BLOCK_RECORDS", size)
            assert json.loads(dumps_result(result))["iterations"]["reported"] == expected


def test_iterations_written_ahead_by_children_are_the_same_text(monkeypatch, tmp_path):
    """Two children write every member while the result is summarised; the writer copies their
    bytes once, and a second write (or a result of other records) writes its own."""
    import gc

    result, kept = _kept_records()
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 10**9)
    here = dumps_result(attrs.evolve(result, iterations=kept))
    monkeypatch.setattr("tprimat.workers.default_workers", lambda: 2)  # a child only beside a second CPU
    children = []
    real_fork = resultjson.fork_call
    monkeypatch.setattr(resultjson, "fork_call", lambda call, **how: children.append(call) or real_fork(call, **how))
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 50)
    resultjson.write_ahead(kept)
    assert len(children) == len(resultjson.AHEAD_SHARES) == 2
    write_result(attrs.evolve(result, iterations=kept), tmp_path / "result.json")
    assert (tmp_path / "result.json").read_text(encoding="utf-8") == here
    assert kept not in resultjson._AHEAD  # copied once, then let go
    assert dumps_result(attrs.evolve(result, iterations=kept)) == here  # written again: by the usual way
    assert len(children) == 3
    resultjson.write_ahead(kept)
    shares = resultjson._AHEAD[kept]
    del kept, children[:]  # (the usual way's child held them)
    gc.collect()
    assert all(share._spool.closed for share in shares)  # records dropped unwritten: children ended


def test_records_in_memory_are_not_written_ahead(monkeypatch):
    monkeypatch.setattr(resultjson, "FORKED_RECORDS", 1)
    records = _records(random.Random(3), 20)
    before = len(resultjson._AHEAD)
    resultjson.write_ahead(records)
    assert len(resultjson._AHEAD) == before


def test_figures_kept_by_name_are_written_as_their_dicts():
    """Blocks whose figures come by name (a worker's sealed block) write what their dicts write:
    a name without a value in a block (its lines cut off the run) is no figure."""
    from tprimat.contract.records import FigureColumns

    blocks = [
        FigureColumns(3, ["a", "b", "d"], [[None, None, None], [1.5, None, 2.0], [None, None, None]]),
        FigureColumns(2, ["a", "c"], [[None, 0.5], ["x", None]]),
        FigureColumns(2, ["a", "d"], [[None, None], [None, None]]),
    ]
    by_name = "".join(resultjson._member_text(1, "reported", blocks))
    as_dicts = "".join(resultjson._member_text(1, "reported", [list(block) for block in blocks]))
    assert by_name == as_dicts
    assert json.loads("{" + by_name[1:] + "}")["reported"] == {
        "a": [None, None, None, None, 0.5, None, None],
        "b": [1.5, None, 2.0, None, None, None, None],
        "c": [None, None, None, "x", None, None, None],
    }
