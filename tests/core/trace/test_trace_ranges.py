"""One trace file read as ranges of its events on several processes: the arrays of one process."""

from __future__ import annotations

import gzip
import json

import attrs
import pytest

from tprimat.trace import reader
from tprimat.trace.fastread import element_boundary
from tprimat.trace.reader import RankTrace, read_trace

TRACES = [
    "traces/hta/nccl_parser_config_nccl_data.json.gz",  # NVIDIA, NCCL kernels
    "traces/tracelens/mi300_resnet_act_checkpoint.json.gz",  # AMD, RCCL
    "traces/tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


def _fields(trace: RankTrace) -> dict:
    return {f.name: getattr(trace, f.name) for f in attrs.fields(RankTrace)}


@pytest.fixture
def split_everything(monkeypatch):
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "RANGE_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "_TAIL", 64)  # cuts near the end too


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("workers", [2, 3])
def test_ranges_read_on_several_processes_give_the_arrays_of_one(fixtures, tmp_path, split_everything, name, workers):
    plain = tmp_path / "rank-0.pt.trace.json"
    plain.write_bytes(gzip.decompress((fixtures / name).read_bytes()))
    ranges = reader.event_ranges(plain, "traceEvents.item", workers)
    assert ranges is not None and len(ranges) == workers
    whole = read_trace(plain)
    assert whole.events > 1000
    assert _fields(read_trace(plain, workers=workers)) == _fields(whole)
    # each range on its own decodes (the result is not the whole file read again)
    parts = [reader._read_range((plain, "traceEvents.item", start, end)) for start, end in ranges]
    assert sum(part.events for part, _ in parts) == whole.events
    assert sum(len(part.ts) for part, _ in parts) == len(whole.ts)


def test_a_cut_inside_an_event_name_falls_back_to_one_process(tmp_path, split_everything):
    # The middle of the file is one long name holding the bytes of a boundary between events:
    # the cut lands inside that string.
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": float(i), "dur": 1.0, "args": {"stream": 7}}
        for i in range(200)
    ]
    events.insert(100, {"ph": "X", "cat": "kernel", "name": "x }, { " * 5000, "ts": 99.5, "dur": 0.5})
    path = tmp_path / "rank-1.json"
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 1}}))
    ranges = reader.event_ranges(path, "traceEvents.item", 2)
    assert ranges is not None
    text = path.read_bytes()
    assert text.rfind(b'"name": "x', 0, ranges[0][1]) > text.rfind(b'"args"', 0, ranges[0][1])  # inside the name
    with pytest.raises(Exception):  # noqa: B017 - whatever the decoders raise: the ranges are not events
        reader._read_range((path, "traceEvents.item", *ranges[0]))
    trace = read_trace(path, workers=2)
    assert _fields(trace) == _fields(read_trace(path))
    assert len(trace.ts) == 201 and trace.rank == 1


def test_a_range_holds_at_least_range_min_bytes(fixtures, tmp_path, monkeypatch):
    plain = tmp_path / "rank-0.json"
    plain.write_bytes(gzip.decompress((fixtures / TRACES[0]).read_bytes()))  # 9.8 MB
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "RANGE_MIN_BYTES", 3_000_000)
    assert len(reader.event_ranges(plain, "traceEvents.item", 64)) == 3
    monkeypatch.setattr(reader, "RANGE_MIN_BYTES", 6_000_000)
    assert reader.event_ranges(plain, "traceEvents.item", 64) is None


def test_gzip_and_small_files_are_not_cut(fixtures, tmp_path, monkeypatch):
    packed = fixtures / TRACES[0]
    assert reader.event_ranges(packed, "traceEvents.item", 2) is None
    plain = tmp_path / "small.json"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    assert reader.event_ranges(plain, "traceEvents.item", 2) is None  # below SPLIT_MIN_BYTES


def test_an_element_boundary_is_a_closing_brace_and_the_comma_after_it(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"a": {"b": 1}} ,\n  {"c": 2}]}')
    with open(path, "rb") as fh:
        end, following = element_boundary(fh, 0)
        data = path.read_bytes()
        assert data[end - 1 : end] == b"}" and data[following - 1 : following] == b","
        assert data[:end].endswith(b'{"a": {"b": 1}}')
        assert element_boundary(fh, following) is None


def test_a_bare_array_of_events_is_cut_the_same_way(fixtures, tmp_path, split_everything):
    document = json.loads(gzip.decompress((fixtures / TRACES[0]).read_bytes()))
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps(document["traceEvents"], indent=1))
    ranges = reader.event_ranges(path, "item", 3)
    assert ranges is not None and len(ranges) == 3
    whole = read_trace(path)
    assert whole.events == len(document["traceEvents"])
    assert _fields(read_trace(path, workers=3)) == _fields(whole)
    parts = [reader._read_range((path, "item", start, end)) for start, end in ranges]
    assert sum(part.events for part, _ in parts) == whole.events
