"""Reading traces: plain and gzip, metadata before or after the events, clear errors on bad files."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprimat.errors import TprimatError
from tprimat.trace.reader import ACTIVITY_CODES, TraceFormatError, read_trace

NCCL = "traces/hta/nccl_parser_config_nccl_data.json.gz"


def test_gzip_and_plain_give_the_same_arrays(fixtures, tmp_path):
    packed = fixtures / NCCL
    plain = tmp_path / "rank0.json"  # a plain copy, named without .gz
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    odd = tmp_path / "rank0.trace"  # gzip recognised by content, not by name
    shutil.copy(packed, odd)
    a, b, c = read_trace(packed), read_trace(plain), read_trace(odd)
    assert a.ts == b.ts == c.ts and a.dur == b.dur and a.names == b.names == c.names
    assert a.rank == b.rank == 0 and a.world_size == 2
    assert a.vendor == "nvidia" and a.device == "NVIDIA A100-PG509-200"


def test_counts_and_steps_of_a_real_trace(fixtures):
    trace = read_trace(fixtures / NCCL)
    kinds = {}
    for code in trace.code:
        kinds[ACTIVITY_CODES[code]] = kinds.get(ACTIVITY_CODES[code], 0) + 1
    # shared/fixtures INDEX: 2700 kernels, 960 memcpy (and 114 memset)
    assert kinds == {"kernel": 2700, "gpu_memcpy": 960, "gpu_memset": 114}
    assert [s.number for s in trace.steps] == [4, 5, 6]
    assert len(trace.launch_ts) == 8740  # cuda_runtime events with a correlation id


def test_metadata_written_after_the_events_is_found(fixtures):
    # this file has "metadata" first, then traceEvents, then deviceProperties and versions
    trace = read_trace(fixtures / "traces/tracelens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    assert trace.vendor == "nvidia"
    assert trace.device == "NVIDIA H100 80GB HBM3"
    assert trace.metadata["cupti_version"] == 22


def test_amd_trace_without_stream_or_correlation_is_still_read(fixtures):
    trace = read_trace(fixtures / "traces/tracelens/evals_mi300x_rocprofiler-sdk_gemm_01_compute_few_tiles.json")
    assert len(trace.ts) == 20 and set(trace.stream) == {-1} and set(trace.correlation) == {-1}


def test_rank_from_kineto_file_name_when_metadata_has_none(tmp_path):
    path = tmp_path / "host_rank-5.1234.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": []}))
    assert read_trace(path).rank == 5


def test_a_bare_event_array_is_accepted(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {}}]))
    trace = read_trace(path)
    assert list(trace.ts) == [1.0] and list(trace.dur) == [2.0]


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_truncated_gzip_trace_gives_a_clear_error(fixtures, tmp_path, cut):
    data = (fixtures / NCCL).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(TraceFormatError, match=r"cut\.json\.gz: truncated or malformed trace after \d+ events"):
        read_trace(path)


def test_truncated_plain_trace_gives_a_clear_error(fixtures, tmp_path):
    text = gzip.decompress((fixtures / NCCL).read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(text[: len(text) // 3])
    with pytest.raises(TraceFormatError, match="truncated or malformed"):
        read_trace(path)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"this is not json", "not a readable JSON trace"),
        (b'{"traceEvents": [{"ph": "X",, }]}', "truncated or malformed"),
        (b'{"schemaVersion": 1}', "no traceEvents array"),
        (b"\x1f\x8b\x08\x00garbage", "not a readable JSON trace"),
        (b"", "not a readable JSON trace"),
    ],
)
def test_malformed_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message) as info:
        read_trace(path)
    assert isinstance(info.value, TprimatError) and "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot open trace"):
        read_trace(tmp_path / "nope.json")


_event = st.fixed_dictionaries(
    {
        "ph": st.just("X"),
        "cat": st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "python_function"]),
        "name": st.text(min_size=1, max_size=30),
        "ts": st.floats(min_value=0, max_value=1e12, allow_nan=False),
        "dur": st.floats(min_value=0, max_value=1e6, allow_nan=False),
        "args": st.fixed_dictionaries({"stream": st.integers(0, 100), "correlation": st.integers(0, 10**9)}),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event, max_size=30), gz=st.booleans())
def test_property_reader_keeps_exactly_the_gpu_activities(tmp_path, events, gz):
    path = tmp_path / ("p.json.gz" if gz else "p.json")
    data = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    trace = read_trace(path)
    gpu = [e for e in events if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert list(trace.ts) == [e["ts"] for e in gpu]
    assert list(trace.dur) == [e["dur"] for e in gpu]
    assert [trace.names[i] for i in trace.name_id] == [e["name"] for e in gpu]
    assert list(trace.stream) == [e["args"]["stream"] for e in gpu]
    launches = [e for e in events if e["cat"] == "cuda_runtime"]
    assert list(trace.launch_correlation) == [e["args"]["correlation"] for e in launches]
    assert trace.events == len(events)


@pytest.mark.parametrize("cat", [None, "absent"])
def test_events_without_a_category_are_no_activity_but_steps_still_count(tmp_path, cat):
    """An event whose category is missing or null is no GPU activity and no launch; a
    ProfilerStep so written is still a step (both readers: activities, and operators)."""
    from tprimat.trace.opread import read_ops

    def event(name, ts, dur, **args):
        e = {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 1, "args": args}
        return e if cat == "absent" else e | {"cat": cat}

    events = [
        event("ProfilerStep#4", 0, 100),
        event("ampere_sgemm_128x64_tn", 10, 20, stream=7, correlation=1),
        event("cudaLaunchKernel", 5, 2, correlation=1),
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 40, "dur": 5, "pid": 0, "tid": 7, "args": {"stream": 7}},
    ]
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    for trace in (read_trace(path), read_ops(path).trace):
        assert [(s.number, s.ts, s.dur) for s in trace.steps] == [(4, 0.0, 100.0)]
        assert [trace.names[i] for i in trace.name_id] == ["k"]
        assert list(trace.launch_correlation) == []
