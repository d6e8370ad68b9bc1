"""rocprofv3's JSON output (``--output-format json``) read into the same trace as the other formats.

The fixture is a real rocprofv3 JSON output from a public repository (an MI350X training run,
kernel trace only; tests/fixtures/traces/PROVENANCE.md).  Every expected figure is computed
here from the raw document with the standard ``json`` module, independently of the reader.
That run has no HIP API or memory copy records: the tests of those take the run's own agents,
symbols and string tables and its first dispatches, and add records of the shape rocprofv3
writes (``rocprofiler-sdk`` ``serialization.hpp``: ``size``, ``kind``, ``operation``,
``correlation_id``, ``start_timestamp``, ``end_timestamp``, ``thread_id``, and for a copy
``dst_agent_id``, ``src_agent_id``, ``bytes``).
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprimat.cli import cli
from tprimat.trace import rocprof_json
from tprimat.trace.analyze import analyze_trace
from tprimat.trace.compare import trace_files
from tprimat.trace.reader import TraceFormatError, load_trace, sniff_format, traces_in

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "rocprofv3" / "tracelens-mi350x"
RESULTS = FIXTURE / "908_results.json.gz"


@pytest.fixture(scope="module")
def raw() -> dict:
    with gzip.open(RESULTS, "rt") as fh:
        return json.load(fh)["rocprofiler-sdk-tool"][0]


@pytest.fixture(scope="module")
def trace():
    return load_trace(RESULTS)


def _kernel_names(process: dict) -> dict[int, str]:
    return {s["kernel_id"]: s["formatted_kernel_name"] for s in process["kernel_symbols"]}


def _op(process: dict, kind: str, name: str) -> tuple[int, int]:
    """(kind, operation) numbers of ``name`` in the document's own string tables."""
    tables = process["strings"]["buffer_records"]
    index = next(i for i, table in enumerate(tables) if table["kind"] == kind)
    return index, tables[index]["operations"].index(name)


def test_the_real_output_is_recognised_by_content(tmp_path: Path) -> None:
    assert sniff_format(RESULTS) == "rocprofv3-json"
    odd = tmp_path / "profile.trace"
    shutil.copy(RESULTS, odd)
    assert load_trace(odd).format == "rocprofv3-json"


def test_every_dispatch_is_a_kernel_with_its_name_stream_and_times(raw: dict, trace) -> None:
    dispatches = raw["buffer_records"]["kernel_dispatch"]
    names = _kernel_names(raw)
    assert trace.format == "rocprofv3-json" and trace.vendor == "amd"
    assert trace.malformed == 0 and trace.events == len(dispatches) == 43915
    rows = sorted(
        (d["start_timestamp"], d["end_timestamp"], names[d["dispatch_info"]["kernel_id"]], d["stream_id"]["handle"])
        for d in dispatches
    )
    origin = rows[0][0]
    assert trace.metadata["time_origin_ns"] == origin and trace.metadata["pid"] == raw["metadata"]["pid"] == 908
    assert len(trace.ts) == len(rows)
    assert list(trace.ts) == [(start - origin) / 1000 for start, *_ in rows]
    assert list(trace.dur) == [(end - start) / 1000 for start, end, *_ in rows]
    assert [trace.names[i] for i in trace.name_id] == [name for *_, name, _ in rows]
    assert list(trace.stream) == [stream for *_, stream in rows]
    assert set(trace.stream) == {d["stream_id"]["handle"] for d in dispatches}
    assert len(set(trace.stream)) == 567  # HIP streams, not the 5 HSA queues
    assert len(trace.names) == 80 and "__amd_rocclr_copyBuffer" in trace.names  # demangled, without ".kd"
    assert any(name.startswith("ncclDevKernel_Generic_1(") for name in trace.names)
    assert sorted(trace.correlation) == sorted(d["correlation_id"]["internal"] for d in dispatches)
    assert trace.runtime_api is None and not len(trace.launch_ts)


def test_the_device_is_the_agents_product_name(raw: dict, trace) -> None:
    gpu = {a["id"]["handle"]: a["product_name"] for a in raw["agents"] if a["type"] == 2}
    used = {d["dispatch_info"]["agent_id"]["handle"] for d in raw["buffer_records"]["kernel_dispatch"]}
    assert used == {trace.metadata["agent"]} and trace.metadata["other_agents_kernels"] == {}
    assert trace.device == gpu[trace.metadata["agent"]] == "AMD Instinct MI350X"


def test_the_analysis_covers_the_whole_run(raw: dict, trace) -> None:
    dispatches = raw["buffer_records"]["kernel_dispatch"]
    result = analyze_trace(trace)
    assert result["launches"]["kernels"] == len(dispatches) and result["launches"]["memcpy"] == 0
    first = min(d["start_timestamp"] for d in dispatches)
    last = max(d["end_timestamp"] for d in dispatches)
    assert result["temporal"]["total_us"] == pytest.approx((last - first) / 1000, abs=1e-6)
    kernel_us = sum(d["end_timestamp"] - d["start_timestamp"] for d in dispatches) / 1000
    assert sum(c["kernel_us"] for c in result["categories"].values()) == pytest.approx(kernel_us, rel=1e-12)


def test_analyze_command_reads_it() -> None:
    done = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(RESULTS)])
    assert done.exit_code == 0, done.output
    (rank,) = json.loads(done.output)["ranks"]
    assert rank["format"] == "rocprofv3-json" and rank["device"] == "AMD Instinct MI350X"
    assert rank["launches"]["kernels"] == 43915 and rank["vendor"] == "amd"
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(RESULTS)])
    assert text.exit_code == 0, text.output
    assert "AMD Instinct MI350X" in text.output and "rocprofv3-json" in text.output


def test_trace_compare_takes_it_by_category_under_its_device_name() -> None:
    kineto = FIXTURE.parents[1] / "tracelens" / "mi300_resnet_act_checkpoint.json.gz"
    done = CliRunner().invoke(cli, ["trace", "compare", str(RESULTS), str(kineto), "--jobs", "1"])
    assert done.exit_code == 0, done.output
    assert "MI350X vs MI300X" in done.output
    assert "908_results.json.gz (rocprofv3 JSON output): no profiler steps in it" in done.output


def test_a_directory_search_finds_it(tmp_path: Path) -> None:
    folder = tmp_path / "traces" / "node0"
    folder.mkdir(parents=True)
    shutil.copy(RESULTS, folder / "908_results.json.gz")
    (folder / "notes.csv").write_text("a,b\n1,2\n")
    assert traces_in(tmp_path / "traces") == [folder / "908_results.json.gz"]
    assert trace_files(tmp_path) == [folder / "908_results.json.gz"]
    done = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(tmp_path / "traces")])
    assert done.exit_code == 0, done.output
    assert [r["format"] for r in json.loads(done.output)["ranks"]] == ["rocprofv3-json"]


def test_a_truncated_output_is_one_error_naming_the_file(tmp_path: Path) -> None:
    with gzip.open(RESULTS) as fh:
        head = fh.read(200_000)
    cut = tmp_path / "908_results.json"
    cut.write_bytes(head)
    with pytest.raises(TraceFormatError, match=r"908_results\.json: not readable JSON \(truncated"):
        load_trace(cut)
    done = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(cut)])
    assert done.exit_code == 2 and "908_results.json: not readable JSON" in done.output
    assert "Traceback" not in done.output
    short_gzip = tmp_path / "cut_results.json.gz"
    short_gzip.write_bytes(RESULTS.read_bytes()[:300_000])
    with pytest.raises(TraceFormatError, match=r"cut_results\.json\.gz: .*truncated"):
        load_trace(short_gzip)


def test_a_document_of_another_shape_is_one_error(tmp_path: Path) -> None:
    odd = tmp_path / "odd_results.json"
    odd.write_text(json.dumps({"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": {"a": 1}}}]}))
    with pytest.raises(TraceFormatError, match=r"odd_results\.json: not rocprofv3 JSON output of the expected shape"):
        load_trace(odd)
    empty = tmp_path / "empty_results.json"
    empty.write_text(json.dumps({"rocprofiler-sdk-tool": []}))
    with pytest.raises(TraceFormatError, match="no process in it"):
        load_trace(empty)


def test_a_gzip_output_past_the_inflation_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tprimat.trace import reader

    monkeypatch.setattr(reader, "inflation_limit", lambda compressed: 1 << 20)
    with pytest.raises(TraceFormatError, match=r"908_results\.json\.gz: .*inflates to more than 1048576 bytes"):
        load_trace(RESULTS)


def test_the_plain_text_is_mapped_and_reads_as_the_gzip_one(tmp_path: Path, trace) -> None:
    plain = tmp_path / "908_results.json"
    with gzip.open(RESULTS) as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    again = load_trace(plain)
    assert list(again.ts) == list(trace.ts) and again.names == trace.names and again.device == trace.device
    (tmp_path / "empty_results.json").write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty_results.json: an empty file"):
        rocprof_json.read_rocprof_json(tmp_path / "empty_results.json")


@pytest.fixture()
def small(raw: dict) -> dict:
    """The run's own tables and its first 40 dispatches (whole records), to add records to."""
    process = {key: value for key, value in raw.items() if key != "buffer_records"}
    process = copy.deepcopy(process)
    process["buffer_records"] = {
        kind: copy.deepcopy(records[:40]) if kind == "kernel_dispatch" else []
        for kind, records in raw["buffer_records"].items()
    }
    return process


def _write(tmp_path: Path, process: dict, indent: int | None = None) -> Path:
    path = tmp_path / "4242_results.json"
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [process]}, indent=indent))
    return path


def _call(process: dict, name: str, corr: int, start: int, end: int) -> dict:
    kind, op = _op(process, "HIP_RUNTIME_API", name)
    return {
        "size": 40,
        "kind": kind,
        "operation": op,
        "correlation_id": {"internal": corr, "external": 0},
        "start_timestamp": start,
        "end_timestamp": end,
        "thread_id": 908,
    }


def test_hip_api_calls_give_launches_by_correlation_and_host_time(tmp_path: Path, small: dict) -> None:
    dispatches = small["buffer_records"]["kernel_dispatch"]
    launched = dispatches[:3]
    calls = [
        _call(
            small,
            "hipLaunchKernel",
            d["correlation_id"]["internal"],
            d["start_timestamp"] - 5000,
            d["start_timestamp"] - 1000,
        )
        for d in launched
    ]
    last = max(d["end_timestamp"] for d in dispatches)
    calls.append(_call(small, "hipStreamSynchronize", 10**9, last - 2000, last + 3000))
    small["buffer_records"]["hip_api"] = calls
    trace = load_trace(_write(tmp_path, small))
    origin = min(d["start_timestamp"] for d in dispatches)
    assert trace.metadata["time_origin_ns"] == origin
    assert len(trace.launch_ts) == 3  # the synchronisation's correlation id launched nothing
    launches = dict(zip(trace.launch_correlation, trace.launch_ts, strict=True))
    assert launches == {
        d["correlation_id"]["internal"]: (d["start_timestamp"] - 5000 - origin) / 1000 for d in launched
    }
    api = trace.runtime_api
    assert (api["calls"], api["launch_calls"], api["sync_calls"]) == (4, 3, 1)
    assert api["launch_us"] == pytest.approx(12.0) and api["sync_us"] == pytest.approx(5.0)


def test_memory_copies_to_or_from_the_analysed_gpu_are_read(tmp_path: Path, small: dict) -> None:
    cpu = next(a["id"]["handle"] for a in small["agents"] if a["type"] == 1)
    gpus = [a["id"]["handle"] for a in small["agents"] if a["type"] == 2]
    ours = small["buffer_records"]["kernel_dispatch"][0]["dispatch_info"]["agent_id"]["handle"]
    other = next(g for g in gpus if g != ours)
    kind, h2d = _op(small, "MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE")
    _, d2d = _op(small, "MEMORY_COPY", "MEMORY_COPY_DEVICE_TO_DEVICE")
    start = small["buffer_records"]["kernel_dispatch"][0]["start_timestamp"] - 100_000

    def record(operation: int, src: int, dst: int, corr: int) -> dict:
        return {
            "size": 64,
            "kind": kind,
            "operation": operation,
            "thread_id": 908,
            "correlation_id": {"internal": corr, "external": 0},
            "start_timestamp": start,
            "end_timestamp": start + 25_000,
            "dst_agent_id": {"handle": dst},
            "src_agent_id": {"handle": src},
            "bytes": 1 << 20,
        }

    small["buffer_records"]["memory_copy"] = [record(h2d, cpu, ours, 900_001), record(d2d, other, other, 900_002)]
    trace = load_trace(_write(tmp_path, small))
    result = analyze_trace(trace)
    assert result["launches"]["memcpy"] == 1 and result["launches"]["kernels"] == 40
    assert trace.names[trace.name_id[0]] == "Memcpy HOST_TO_DEVICE"
    assert (trace.ts[0], trace.dur[0], trace.correlation[0]) == (0.0, 25.0, 900_001)
    assert trace.metadata["time_origin_ns"] == start


def test_with_several_gpus_the_busiest_is_analysed_and_named(tmp_path: Path, small: dict) -> None:
    gpus = [a for a in small["agents"] if a["type"] == 2]
    gpus[3]["product_name"] = "AMD Instinct MI300X"
    for dispatch in small["buffer_records"]["kernel_dispatch"][:25]:
        dispatch["dispatch_info"]["agent_id"]["handle"] = gpus[3]["id"]["handle"]
    trace = load_trace(_write(tmp_path, small))
    assert trace.metadata["agent"] == gpus[3]["id"]["handle"] and len(trace.ts) == 25
    assert trace.metadata["other_agents_kernels"] == {str(gpus[0]["id"]["handle"]): 15}
    assert trace.device == "AMD Instinct MI300X"


def test_of_several_processes_the_one_with_most_dispatches_is_read(tmp_path: Path, small: dict) -> None:
    other = copy.deepcopy(small)
    other["metadata"]["pid"] = 4243
    other["buffer_records"]["kernel_dispatch"] = other["buffer_records"]["kernel_dispatch"][:5]
    path = tmp_path / "merged_results.json"
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [other, small]}))
    trace = load_trace(path)
    assert len(trace.ts) == 40 and trace.metadata["pid"] == 908 and trace.metadata["other_processes"] == 1


def test_a_record_with_malformed_fields_is_skipped_and_counted(tmp_path: Path, small: dict) -> None:
    small["buffer_records"]["kernel_dispatch"][7]["start_timestamp"] = "soon"
    trace = load_trace(_write(tmp_path, small))
    assert len(trace.ts) == 39 and trace.malformed == 1 and trace.events == 40
    assert trace.malformed_first[0] == 7 and "kernel_dispatch" in trace.malformed_first[1]
    for dispatch in small["buffer_records"]["kernel_dispatch"]:
        dispatch["end_timestamp"] = -1
    with pytest.raises(TraceFormatError, match="no usable GPU activity: all 40 records"):
        load_trace(_write(tmp_path, small))


def test_an_indented_document_reads_the_same(tmp_path: Path, small: dict) -> None:
    compact = load_trace(_write(tmp_path, small))
    indented = load_trace(_write(tmp_path, small, indent=4))
    assert indented.format == "rocprofv3-json"
    assert list(indented.ts) == list(compact.ts) and indented.names == compact.names
    assert indented.device == compact.device == "AMD Instinct MI350X"


@pytest.fixture(scope="module")
def tiny_text(raw: dict) -> bytes:
    """The run's first 20 dispatches with the agents, symbols and string tables they use: the fuzzed input."""
    dispatches = raw["buffer_records"]["kernel_dispatch"][:20]
    used = {d["dispatch_info"]["kernel_id"] for d in dispatches}
    process = {
        "metadata": raw["metadata"],
        "agents": raw["agents"],
        "strings": {"buffer_records": raw["strings"]["buffer_records"]},
        "kernel_symbols": [s for s in raw["kernel_symbols"] if s["kernel_id"] in used],
        "buffer_records": {"kernel_dispatch": dispatches, "hip_api": [], "memory_copy": []},
    }
    return json.dumps({"rocprofiler-sdk-tool": [process]}).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_cut_or_altered_document_is_a_trace_or_one_error(tmp_path: Path, tiny_text: bytes, data) -> None:
    """Whatever is cut from the end or written over a byte, the reader gives a trace or a TraceFormatError."""
    text = bytearray(tiny_text)
    if data.draw(st.booleans(), label="cut"):
        text = text[: data.draw(st.integers(0, len(text) - 1), label="length")]
    else:
        at = data.draw(st.integers(0, len(text) - 1), label="at")
        text[at] = data.draw(st.sampled_from(b'"{}[],:-0 x'), label="byte")
    path = tmp_path / "fuzz_results.json"
    path.write_bytes(bytes(text))
    try:
        trace = load_trace(path)
    except TraceFormatError as exc:
        assert str(path) in str(exc)
    else:  # a byte changed where the reader tolerates it: still 20 dispatches, kept or counted
        assert trace.format == "rocprofv3-json"
        assert len(trace.ts) + trace.malformed + sum(trace.metadata["other_agents_kernels"].values()) == 20
        columns = (trace.ts, trace.dur, trace.name_id, trace.code, trace.stream, trace.correlation)
        assert {len(column) for column in columns} == {len(trace.ts)}
        assert min(trace.ts, default=0.0) == 0.0 and min(trace.dur, default=0.0) >= 0.0
