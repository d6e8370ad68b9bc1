"""The bounds a trace is read under, and the accounting of events with malformed fields."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from tprimat.trace import fastread, reader
from tprimat.trace.limits import MAX_DUR_US, describe_event, inflation_limit
from tprimat.trace.reader import TraceFormatError, malformed_note, read_trace

KERNEL = {"ph": "X", "cat": "kernel", "name": "nvjet", "ts": 1.0, "dur": 2.0, "args": {"stream": 7, "correlation": 1}}


def _write(tmp_path, document, name="rank0.json") -> reader.Path:
    path = tmp_path / name
    path.write_bytes(document if isinstance(document, bytes) else json.dumps(document).encode())
    return path


@pytest.mark.parametrize(
    "event,problem",
    [
        (5, "not an object but a number"),
        ({"ph": 1}, "ph is a number"),
        ({"cat": None, "name": []}, "name is a list"),
        ({"ts": "1"}, "ts is a string"),
        ({"ts": 2.0**54}, "ts is 1.80144e+16 µs, above the 9.0072e+15 µs limit"),
        ({"ts": -(2.0**54)}, "ts is -1.80144e+16 µs, below -9.0072e+15"),
        ({"dur": -1}, "dur is negative (-1)"),
        ({"dur": MAX_DUR_US * 2}, "dur is 1.728e+11 µs, above the 8.64e+10 µs limit"),
        ({"dur": True}, "dur is true"),
        ({"args": [1]}, "args is a list"),
        ({"ts": 10**400}, "ts is an integer of 1329 bits µs, above the 9.0072e+15 µs limit"),
        ({"dur": -(10**5000)}, "dur is negative (an integer of 16610 bits)"),
    ],
)
def test_describe_event(event, problem):
    assert describe_event(event) == problem


def test_the_inflation_limit_is_relative_to_the_compressed_size():
    assert inflation_limit(0) == 1024 * 1024
    assert inflation_limit(10_000) == 100 * 10_000 + 1024 * 1024


def test_malformed_events_are_counted_and_the_first_one_named(tmp_path):
    events = [KERNEL, {**KERNEL, "ts": "x"}, KERNEL, {**KERNEL, "dur": -3}, {**KERNEL, "cat": "cpu_op", "name": 5}]
    trace = read_trace(_write(tmp_path, {"traceEvents": events}))
    assert (trace.events, trace.malformed, trace.malformed_activities) == (5, 3, 2)
    assert trace.malformed_first == (1, "ts is a string") and len(trace.ts) == 2
    assert malformed_note(trace) == "3 events with malformed fields skipped (first: event #1: ts is a string)"


def test_a_trace_of_malformed_events_only_is_refused(tmp_path):
    path = _write(tmp_path, {"traceEvents": [{**KERNEL, "name": 1}, 7]})
    with pytest.raises(TraceFormatError, match=r"no usable events: all 2 have malformed fields \(first: event #0"):
        read_trace(path)


def test_malformed_events_in_ranges_are_numbered_in_the_whole_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "RANGE_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "_TAIL", 64)
    events = [{**KERNEL, "ts": float(i), "name": f"k{i}"} for i in range(400)]
    events[350] = {**events[350], "dur": "long"}
    events[380] = {**events[380], "args": "none"}
    path = _write(tmp_path, {"traceEvents": events}, "rank-0.json")
    parts = reader.event_ranges(path, "traceEvents.item", 3)
    assert parts is not None and len(parts) == 3
    whole, split = read_trace(path), read_trace(path, workers=3)
    assert whole.malformed_first == split.malformed_first == (350, "dur is a string")
    assert whole.malformed == split.malformed == 2 and list(whole.ts) == list(split.ts)


def test_a_traceevents_key_nested_in_the_metadata_is_not_the_event_array(tmp_path):
    document = (
        b'{"meta": {"traceEvents": [1, 2]}, "x": [{"traceEvents": []}], "traceEvents": ['
        + json.dumps(KERNEL).encode()
        + b"]}"
    )
    trace = read_trace(_write(tmp_path, document))
    assert trace.events == 1 and trace.metadata["meta"] == {"traceEvents": [1, 2]}


def test_many_nested_traceevents_keys_are_refused(tmp_path):
    document = b'{"m": [' + b", ".join([b'{"traceEvents": []}'] * 20) + b'], "traceEvents": []}'
    with pytest.raises(TraceFormatError, match="refused: more than 16 nested traceEvents keys"):
        read_trace(_write(tmp_path, document))


def test_metadata_before_the_events_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(fastread, "MAX_SPAN_BYTES", 4096)
    document = {"pad": "x" * 10_000, "traceEvents": [KERNEL]}
    with pytest.raises(TraceFormatError, match=r"refused: no traceEvents array in the first 0.00390625 MiB"):
        read_trace(_write(tmp_path, document))


def test_one_event_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(fastread, "MAX_SPAN_BYTES", 4096)
    monkeypatch.setattr(fastread, "BLOCK_BYTES", 1024)
    document = {"traceEvents": [KERNEL, {**KERNEL, "name": "y" * 10_000}, KERNEL]}
    with pytest.raises(TraceFormatError, match=r"refused: event #1 \(from byte \d+\) runs past 0.00390625 MiB"):
        read_trace(_write(tmp_path, document))
    document = {"traceEvents": [KERNEL, {**KERNEL, "name": "y" * 1000}, KERNEL]}
    assert read_trace(_write(tmp_path, document)).events == 3


@pytest.mark.parametrize(
    "text,message",
    [
        (b'{"traceEvents": []', "truncated trace: the document ends after its event array"),
        (b'{"traceEvents": [], "a": 1} x', "malformed metadata after the events"),
        (b'{"traceEvents": [] "a": 1}', "unexpected text after the event array"),
        (b"[] []", "text after the event array"),
        (b'{"traceEvents": [{"ph": "X"}, 5 6]}', "truncated or malformed trace after 0 events"),
        (b"   \n ", "the file is empty"),
        (b"\xef\xbb\xbf{}", "not a readable JSON trace (it starts with"),
        (b'{"a": "\xff", "traceEvents": []}', "not a readable JSON trace"),
        (b'{"a": 1e999, "traceEvents": []}', "not a readable JSON trace"),
    ],
)
def test_broken_documents_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(TraceFormatError, match=re.escape(message)) as info:
        read_trace(_write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_an_event_array_may_be_empty_or_bare(tmp_path):
    assert read_trace(_write(tmp_path, b'{"traceEvents": [ ] , "deviceProperties": [{"name": "G"}]}')).device == "G"
    assert read_trace(_write(tmp_path, b" [ ] ")).events == 0


def test_metadata_of_the_wrong_type_is_ignored(tmp_path):
    document = {
        "distributedInfo": {"rank": True, "world_size": 1e300},
        "deviceProperties": [{"name": {"x": 1}}],
        "traceEvents": [KERNEL],
    }
    trace = read_trace(_write(tmp_path, document, "rank_4.json"))
    assert (trace.rank, trace.world_size, trace.device) == (4, None, None)
    document["deviceProperties"] = [{"name": "N" * 10_000}]
    assert len(read_trace(_write(tmp_path, document)).device) == reader.MAX_DEVICE_CHARS


def test_gzip_is_bounded_by_its_compressed_size(tmp_path):
    text = b'{"traceEvents": [' + json.dumps(KERNEL).encode() + b"," + b" " * (30 << 20) + b"]}"
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text, mtime=0))
    with pytest.raises(TraceFormatError, match=r"refused after 0 events: the gzip data inflates to more than"):
        read_trace(path)


def test_a_step_number_too_long_is_no_step(tmp_path):
    step = {"ph": "X", "cat": "user_annotation", "ts": 0, "dur": 10}
    events = [KERNEL, {**step, "name": "ProfilerStep#12"}, {**step, "name": "ProfilerStep#" + "1" * 19}]
    assert [s.number for s in read_trace(_write(tmp_path, {"traceEvents": events})).steps] == [12]
