"""rocprofv3's Perfetto output (``--output-format pftrace``), read by :mod:`tprimat.trace.pftrace`.

One real rocprofv3 ``.pftrace`` is public (tests/fixtures/traces/PROVENANCE.md): a run with HIP
runtime calls and no dispatches.  Its expected figures are taken from the file by
:func:`_raw_calls`, which walks the protobuf itself and reads the times from the ``delta_ns``
annotations (the reader takes them from the packet timestamps).  For dispatches, copies and
several GPUs, the traces are written by the small encoder below, which writes what rocprofv3
writes through the Perfetto SDK:

* what rocprofv3 emits: ROCm/rocprofiler-sdk ``source/lib/rocprofiler-sdk-tool/generatePerfetto.cpp``
  at 2a146259 (2024-09-11): thread tracks "THREAD <n> (<tid>)" (l. 190), copy tracks "COPY to AGENT
  [<node>] THREAD [<n>] (GPU)" (l. 205), queue tracks "COMPUTE AGENT [<node>] QUEUE [<n>] (GPU)"
  (l. 233), slices ``TRACE_EVENT_BEGIN``/``_END`` in the categories hsa_api, hip_api, memory_copy and
  kernel_dispatch with the annotations begin_ns, end_ns, delta_ns, kind, operation, agent (the
  agent's node id), src_agent/dst_agent, copy_bytes, corr_id, queue, tid, kernel_id ... (l. 263-466),
  byte counters ``TRACE_COUNTER`` (l. 537); then ``source/lib/output/generatePerfetto.cpp`` at
  029ff02a (tracks "COMPUTE AGENT [<node>] STREAM [<id>] (GPU)", agents as "Agent-2" strings) and at
  a5a2f86a (tracks ``STREAM [" <id> "]``, the annotation agent_type);
* how the Perfetto SDK (v44, the version rocprofiler-sdk pins) encodes it: google/perfetto
  ``src/tracing/internal/track_event_internal.cc`` (``ResetIncrementalState``: the packet that clears
  the sequence's state carries ``trace_packet_defaults`` with the incremental clock 64 and the
  thread's track, and a clock snapshot of BOOTTIME and clock 64; ``NewTracePacket``: a timestamp
  given in another clock than the default is written absolute with its ``timestamp_clock_id``, as
  rocprofv3's BOOTTIME nanoseconds are); names and categories interned in ``interned_data``;
  debug annotation names interned, values inline.

The expected figures of the encoded traces are computed from the scenario table :data:`SCENARIO`.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.trace.analyze import analyze_trace
from tprimat.trace.pftrace import fields, read_pftrace, sniff_pftrace
from tprimat.trace.reader import TraceFormatError, load_trace, sniff_format, traces_in

REAL = (
    Path(__file__).resolve().parents[2]
    / "fixtures/traces/rocprofv3/basilisk-mi250x-hip-runtime/3619281_results.pftrace"
)
BASE_NS = 7_340_112_345_000  # CLOCK_BOOTTIME of the run, ns
MAIN_TID, OTHER_TID, PID = 4242, 4250, 4242
KERNEL_A = "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN_1LDSB0"
KERNEL_B = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, Fn, Arr)"
KERNEL_C = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

#: (category, name, start ns, end ns from BASE_NS, corr_id, thread, agent, stream, queue handle, src, dst)
SCENARIO = [
    ("hip_api", "hipMemcpyAsync", 1_000, 1_900, 10, MAIN_TID, None, None, None, None, None),
    ("hsa_api", "hsa_signal_store_screlease", 1_200, 1_300, 10, MAIN_TID, None, None, None, None, None),
    ("memory_copy", "MEMORY_COPY_HOST_TO_DEVICE", 2_000, 8_000, 10, MAIN_TID, None, 1, None, 0, 2),
    ("hip_api", "hipLaunchKernel", 9_000, 9_600, 11, MAIN_TID, None, None, None, None, None),
    ("hip_api", "hipLaunchKernel", 9_700, 10_100, 12, MAIN_TID, None, None, None, None, None),
    ("hip_api", "hipLaunchKernel", 10_200, 10_500, 13, MAIN_TID, None, None, None, None, None),
    ("hip_api", "hipLaunchKernel", 11_000, 11_400, 14, OTHER_TID, None, None, None, None, None),
    ("kernel_dispatch", KERNEL_A, 10_000, 25_000, 11, MAIN_TID, 2, 1, 0x7F10_0000_1000, None, None),
    ("kernel_dispatch", KERNEL_B, 20_000, 23_500, 12, MAIN_TID, 2, 2, 0x7F10_0000_2000, None, None),
    ("kernel_dispatch", KERNEL_C, 12_000, 40_000, 14, OTHER_TID, 3, 3, 0x7F10_0000_3000, None, None),
    ("kernel_dispatch", KERNEL_A, 30_000, 41_250, 13, MAIN_TID, 2, 1, 0x7F10_0000_1000, None, None),
    ("hip_api", "hipMemcpyAsync", 44_000, 44_300, 15, MAIN_TID, None, None, None, None, None),
    ("hip_api", "hipMemcpyAsync", 44_100, 44_350, 16, OTHER_TID, None, None, None, None, None),
    ("memory_copy", "MEMORY_COPY_DEVICE_TO_HOST", 45_000, 47_000, 15, MAIN_TID, None, 1, None, 2, 0),
    ("memory_copy", "MEMORY_COPY_HOST_TO_DEVICE", 45_500, 46_000, 16, OTHER_TID, None, 3, None, 0, 3),
    ("hip_api", "hipDeviceSynchronize", 44_400, 50_000, 17, MAIN_TID, None, None, None, None, None),
]
#: The versions of generatePerfetto.cpp encoded: how they name tracks and agents.
STYLES = ("2a146259", "029ff02a", "a5a2f86a")


# -- protobuf wire format ------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _u(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _b(field: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return _varint(field << 3 | 2) + _varint(len(raw)) + raw


def _fixed64(field: int, value: int) -> bytes:
    return _varint(field << 3 | 1) + value.to_bytes(8, "little")


class _Sequence:
    """One Perfetto SDK trace writer (one thread of rocprofv3's tool): its interning and clocks."""

    def __init__(self, seq_id: int, tid: int, incremental: bool) -> None:
        self.seq_id, self.tid, self.incremental = seq_id, tid, incremental
        self.thread_uuid = 0x1000 + tid
        self.interned: dict[tuple[int, str], int] = {}
        self.packets: list[bytes] = []
        self.last_ns = 0

    def _packet(self, body: bytes) -> None:
        # the service appends the trusted fields to what the producer wrote
        self.packets.append(body + _u(3, 1000) + _u(10, self.seq_id) + _u(79, PID))

    def _iid(self, table: int, text: str, new: list[bytes]) -> int:
        key = (table, text)
        if key not in self.interned:
            self.interned[key] = len([k for k in self.interned if k[0] == table]) + 1
            new.append(_b(table, _u(1, self.interned[key]) + _b(2, text)))
        return self.interned[key]

    def _time(self, ns: int) -> bytes:
        if self.incremental and ns >= self.last_ns:  # the SDK's own clock: deltas on clock 64, the default
            delta, self.last_ns = ns - self.last_ns, ns
            return _u(8, delta)
        return _u(8, ns) + _u(58, 6)  # absolute BOOTTIME: rocprofv3's timestamps, or an earlier time

    def start(self, now_ns: int) -> None:
        """``ResetIncrementalState``: clear, defaults, clock snapshot, the thread's and process's tracks."""
        self.last_ns = now_ns
        first = _u(8, 0) if self.incremental else _u(8, now_ns) + _u(58, 6)
        defaults = _b(59, _u(58, 64) + _b(11, _u(11, self.thread_uuid)))
        clocks = _b(6, _b(1, _u(1, 6) + _u(2, now_ns)) + _b(1, _u(1, 64) + _u(2, now_ns) + _u(3, 1) + _u(4, 1)))
        self._packet(first + _u(13, 1) + defaults + clocks + _u(87, 1) + _u(42, 1))
        thread = _b(4, _u(1, PID) + _u(2, self.tid))
        self._packet(_u(8, 0) + _u(13, 2) + _b(60, _u(1, self.thread_uuid) + _u(5, 0x2000) + thread))
        self._packet(_u(8, 0) + _u(13, 2) + _b(60, _u(1, 0x2000) + _b(3, _u(1, PID))))

    def track(self, uuid: int, name: str, counter: bool = False) -> None:
        """``SetTrackDescriptor``: a track of rocprofv3's naming, child of the process track."""
        body = _u(1, uuid) + _u(5, 0x2000) + _b(2, name) + (_b(8, _u(3, 1)) if counter else b"")
        self._packet(_u(8, 0) + _u(13, 2) + _b(60, body))

    def slice(self, category: str, name: str, start: int, end: int, track: int | None, args: list) -> None:
        new: list[bytes] = []
        event = _u(9, 1) + _u(3, self._iid(1, category, new)) + _u(10, self._iid(2, name, new))
        if track is not None:
            event += _u(11, track)
        corr = dict(args)["corr_id"]
        event += _fixed64(47, 0x9E3779B97F4A7C15 ^ corr)  # the ProcessScoped flow of the correlation id
        for key, value in args:
            value_field = _b(6, value) if isinstance(value, str) else _u(3, value)
            event += _b(4, _u(1, self._iid(3, key, new)) + value_field)
        self._packet(self._time(start) + _u(13, 2) + _b(11, event) + (_b(12, b"".join(new)) if new else b""))
        end_event = _u(9, 2) + (_u(11, track) if track is not None else b"")
        self._packet(self._time(end) + _u(13, 2) + _b(11, end_event))

    def counter(self, track: int, at: int, value: int) -> None:
        self._packet(self._time(at) + _u(13, 2) + _b(11, _u(9, 4) + _u(11, track) + _u(30, value)))


def _agent(style: str, node: int) -> int | str:
    """A dispatch's ``agent`` annotation: the node id, later ``Agent-<n>`` (``--agent-index``'s label)."""
    return node if style == "2a146259" else f"Agent-{node}"


def _track(style: str, row: tuple, queues: dict) -> tuple[tuple, str]:
    """The track rocprofv3 (at ``style``) puts a dispatch or copy on: its key here, and its name."""
    cat, _, _, _, _, tid, node, stream, queue, _, dst = row
    if cat == "kernel_dispatch" and style == "2a146259":
        index = queues.setdefault((node, queue), sum(1 for n, _ in queues if n == node))
        return ("queue", node, queue), f"COMPUTE AGENT [{node}] QUEUE [{index}] (GPU)"
    if style == "2a146259":
        thread = 0 if tid == MAIN_TID else 1
        return ("copy", dst, thread), f"COPY to AGENT [{dst}] THREAD [{thread}] (GPU)"
    if style == "a5a2f86a":
        return ("stream", stream), f'STREAM [" {stream} "] '
    agent = node if cat == "kernel_dispatch" else dst
    kind = "COMPUTE" if cat == "kernel_dispatch" else "COPY to"
    return (kind, agent, stream), f"{kind} AGENT [{agent}] STREAM [{stream}] (GPU)"


def _args(style: str, row: tuple) -> list:
    """The debug annotations generatePerfetto.cpp (at ``style``) attaches to a slice, in its order."""
    cat, _, start, end, corr, tid, node, _, queue, src, dst = row
    times = [("begin_ns", BASE_NS + start), ("end_ns", BASE_NS + end), ("delta_ns", end - start)]
    if cat in ("hip_api", "hsa_api"):
        return [*times, ("tid", tid), ("kind", 3), ("operation", 51), ("corr_id", corr)]
    if cat == "memory_copy":
        agents = [("src_agent", _agent(style, src)), ("dst_agent", _agent(style, dst)), ("copy_bytes", 1 << 20)]
        return [*times, ("kind", 11), ("operation", 1), *agents, ("corr_id", corr), ("tid", tid)]
    agent = [("agent", _agent(style, node))] + ([("agent_type", "GPU")] if style == "a5a2f86a" else [])
    return [*times, ("kind", 12), *agent, ("corr_id", corr), ("queue", queue), ("tid", tid), ("kernel_id", 7)]


def encode(style: str = "a5a2f86a", incremental: bool = False, compress: bool = False) -> bytes:
    """The Perfetto trace rocprofv3 (generatePerfetto.cpp at ``style``) writes for :data:`SCENARIO`.

    ``incremental``: timestamps as the SDK writes its own clock (deltas on clock 64, placed by
    the clock snapshot), not rocprofv3's absolute BOOTTIME ones; ``compress``: the writer's
    packets deflated into ``compressed_packets`` (``TraceConfig.compression_type``)."""
    service = [  # the tracing service's own sequence: a clock snapshot, the config, a marker
        _b(6, b"".join(_b(1, _u(1, c) + _u(2, BASE_NS + c)) for c in (1, 3, 5, 6))) + _u(3, 0) + _u(10, 1),
        _b(33, _b(1, _u(1, 65536)) + _b(2, _b(1, _b(1, "track_event")))) + _u(3, 0) + _u(10, 1),
        _b(36, bytes(range(16))) + _u(10, 1),
    ]
    seq = _Sequence(2, MAIN_TID, incremental)
    seq.start(BASE_NS if incremental else BASE_NS + 1_000_000)
    uuids = iter(range(0x5000, 0x6000))
    threads = {OTHER_TID: next(uuids)}
    seq.track(threads[OTHER_TID], f"THREAD 1 ({OTHER_TID})")
    tracks: dict[tuple, int] = {}
    queues: dict = {}
    placed = []
    for row in SCENARIO:
        if row[0] in ("kernel_dispatch", "memory_copy"):
            key, name = _track(style, row, queues)
            if key not in tracks:
                tracks[key] = next(uuids)
                seq.track(tracks[key], name)
            placed.append((row, tracks[key]))
        else:
            placed.append((row, None if row[5] == MAIN_TID else threads[row[5]]))
    counter = next(uuids)
    seq.track(counter, "COPY BYTES to AGENT [2] (GPU)", counter=True)
    for row, track in placed:
        seq.slice(row[0], row[1], BASE_NS + row[2], BASE_NS + row[3], track, _args(style, row))
    seq.counter(counter, BASE_NS + 50_001, 1024)
    packets = service + seq.packets
    if compress:
        packets = [*service, _b(50, zlib.compress(b"".join(_b(1, p) for p in seq.packets))) + _u(10, 1)]
    return b"".join(_b(1, p) for p in packets)


def _write(tmp_path: Path, data: bytes, name: str = "4242_results.pftrace") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _expected(style: str) -> dict:
    """What the scenario holds for agent 2, the agent that ran most kernels."""
    kernels = [r for r in SCENARIO if r[0] == "kernel_dispatch"]
    counts = {node: sum(1 for r in kernels if r[6] == node) for node in {r[6] for r in kernels}}
    busiest = max(counts, key=counts.__getitem__)
    copies = [r for r in SCENARIO if r[0] == "memory_copy" and busiest in (r[9], r[10])]
    activity = sorted([r for r in kernels if r[6] == busiest] + copies, key=lambda r: r[2])
    origin = activity[0][2]
    streams = [(r[8] if style == "2a146259" else r[7]) if r[0] == "kernel_dispatch" else -1 for r in activity]
    return {
        "busiest": busiest,
        "others": {str(_agent(style, n)): c for n, c in counts.items() if n != busiest},
        "activity": activity,
        "ts": [(r[2] - origin) / 1000 for r in activity],
        "dur": [(r[3] - r[2]) / 1000 for r in activity],
        "streams": streams,
        "origin_ns": BASE_NS + origin,
        "api": [r for r in SCENARIO if r[0] == "hip_api"],
    }


# -- the reader ------------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_kernels_copies_and_times_match_the_scenario(style: str, tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, encode(style)))
    want = _expected(style)
    assert trace.format == "rocprofv3-pftrace" and trace.vendor == "amd"
    assert trace.device is None  # the file names agents by number, never the product
    assert list(trace.ts) == pytest.approx(want["ts"], abs=1e-9)
    assert list(trace.dur) == pytest.approx(want["dur"], abs=1e-9)
    names = [trace.names[i] for i in trace.name_id]
    assert names == [
        r[1] if r[0] == "kernel_dispatch" else "Memcpy " + r[1].removeprefix("MEMORY_COPY_") for r in want["activity"]
    ]
    assert list(trace.stream) == want["streams"]
    assert list(trace.correlation) == [r[4] for r in want["activity"]]
    assert trace.metadata["agent"] == _agent(style, want["busiest"])
    assert trace.metadata["other_agents_kernels"] == want["others"]
    assert trace.metadata["time_origin_ns"] == want["origin_ns"]
    assert trace.malformed == 0


def test_hip_calls_give_launches_and_the_runtime_summary(tmp_path: Path) -> None:
    trace = load_trace(_write(tmp_path, encode()))
    want = _expected("a5a2f86a")
    api = want["api"]
    kept = {r[4] for r in want["activity"]}
    launches = sorted((r[4], (r[2] - want["activity"][0][2]) / 1000) for r in api if r[4] in kept)
    got = sorted(zip(trace.launch_correlation, trace.launch_ts, strict=True))
    assert [c for c, _ in got] == [c for c, _ in launches]
    assert [t for _, t in got] == pytest.approx([t for _, t in launches])
    summary = trace.runtime_api
    assert summary["calls"] == len(api)  # HIP calls only: the HSA calls beside them are not counted
    assert summary["total_us"] == pytest.approx(sum(r[3] - r[2] for r in api) / 1000)
    launch = [r for r in api if r[1] in ("hipLaunchKernel", "hipMemcpyAsync")]
    assert summary["launch_calls"] == len(launch)
    assert summary["launch_us"] == pytest.approx(sum(r[3] - r[2] for r in launch) / 1000)
    assert summary["sync_calls"] == 1


def test_analysis_of_a_pftrace(tmp_path: Path) -> None:
    want = _expected("a5a2f86a")
    result = analyze_trace(load_trace(_write(tmp_path, encode())))
    assert result["format"] == "rocprofv3-pftrace"
    assert result["launches"]["kernels"] == sum(1 for r in want["activity"] if r[0] == "kernel_dispatch")
    assert result["launches"]["memcpy"] == sum(1 for r in want["activity"] if r[0] == "memory_copy")
    first, last = want["activity"][0][2], max(r[3] for r in want["activity"])
    assert result["temporal"]["total_us"] == pytest.approx((last - first) / 1000)


@pytest.mark.parametrize(("incremental", "compress"), [(True, False), (False, True)])
def test_delta_encoded_clocks_and_compressed_packets_read_the_same(
    incremental: bool, compress: bool, tmp_path: Path
) -> None:
    """The SDK's own delta-encoded clock (64, placed by the clock snapshot) and the service's
    deflate-compressed packets give the same slices."""
    plain = load_trace(_write(tmp_path, encode(), "a.pftrace"))
    other = load_trace(_write(tmp_path, encode(incremental=incremental, compress=compress), "b.pftrace"))
    assert list(other.ts) == pytest.approx(list(plain.ts)) and list(other.dur) == pytest.approx(list(plain.dur))
    assert other.names == plain.names and list(other.stream) == list(plain.stream)


def test_gzip_reads_the_same(tmp_path: Path) -> None:
    data = encode()
    plain = load_trace(_write(tmp_path, data))
    packed = load_trace(_write(tmp_path, gzip.compress(data), "4242_results.pftrace.gz"))
    assert list(packed.ts) == list(plain.ts) and packed.names == plain.names
    assert packed.format == "rocprofv3-pftrace"


def _raw_calls(path: Path) -> list[tuple[str, int, int]]:
    """(name, ``delta_ns``, ``corr_id``) of every ``hip_api`` slice of a one-writer trace, straight
    from the packets: interned names and annotation names, the begin events' annotations."""
    names: dict[int, str] = {}
    keys: dict[int, str] = {}
    categories: dict[int, str] = {}
    calls = []
    for _, _, packet in fields(path.read_bytes()):
        parts = {f: v for f, _, v in fields(packet)}
        for table, _, entry in fields(parts[12]) if 12 in parts else []:
            entry_fields = {f: v for f, _, v in fields(entry)}
            target = {1: categories, 2: names, 3: keys}.get(table)
            if target is not None:
                target[entry_fields[1]] = entry_fields[2].decode()
        if 11 not in parts:
            continue
        event = list(fields(parts[11]))
        if (9, 0, 1) not in event:
            continue
        single = {f: v for f, _, v in event}
        if categories[single[3]] != "hip_api":
            continue
        args = {}
        for f, _, annotation in event:
            if f == 4:
                a = {f2: v2 for f2, _, v2 in fields(annotation)}
                args[keys[a[1]]] = a.get(3)
        calls.append((names[single[10]], args["delta_ns"], args["corr_id"]))
    return calls


def test_a_real_rocprofv3_pftrace_gives_its_hip_calls() -> None:
    calls = _raw_calls(REAL)
    trace = load_trace(REAL)
    assert trace.format == "rocprofv3-pftrace" and trace.vendor == "amd" and trace.malformed == 0
    assert not len(trace.ts)  # this run dispatched no kernels
    api = trace.runtime_api
    assert api["calls"] == len(calls) == 67
    assert api["total_us"] == pytest.approx(sum(d for _, d, _ in calls) / 1000)
    syncs = [c for c in calls if c[0] in ("hipMemcpy", "hipDeviceSynchronize")]
    assert api["sync_calls"] == len(syncs) and api["sync_us"] == pytest.approx(sum(d for _, d, _ in syncs) / 1000)
    assert api["launch_calls"] == 0
    result = analyze_trace(trace)
    assert result["temporal"] is None and result["note"]
    cli_result = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(REAL)])
    assert cli_result.exit_code == 0, cli_result.output
    (rank,) = json.loads(cli_result.output)["ranks"]
    assert rank["format"] == "rocprofv3-pftrace" and rank["runtime_api"]["calls"] == len(calls)


# -- recognising and refusing -----------------------------------------------------------------


def test_format_is_told_by_content(tmp_path: Path) -> None:
    data = encode()
    assert sniff_pftrace(data[:4096]) and sniff_pftrace(data[:100])
    assert sniff_format(_write(tmp_path, data, "trace.json")) == "rocprofv3-pftrace"
    for text in (b'\n{"traceEvents": []}', b"\nKind,Kernel_Name\n", b"\n\n\n", b"\x0a\x05hello"):
        assert not sniff_pftrace(text)
    (tmp_path / "run" / "host").mkdir(parents=True)
    _write(tmp_path / "run" / "host", data, "4242_results.pftrace")
    _write(tmp_path / "run" / "host", gzip.compress(data), "4250_results.pftrace.gz")
    _write(tmp_path / "run", b"\x0a\x05hello", "broken.pftrace")
    assert [p.name for p in traces_in(tmp_path / "run")] == ["4242_results.pftrace", "4250_results.pftrace.gz"]


def test_a_truncated_file_is_refused_with_its_name(tmp_path: Path) -> None:
    data = encode()
    cut = _write(tmp_path, data[: len(data) - 7], "cut.pftrace")
    with pytest.raises(TraceFormatError, match=r"cut\.pftrace: the trace ends inside the packet at byte \d+"):
        load_trace(cut)


def test_every_prefix_reads_or_is_one_error(tmp_path: Path) -> None:
    """Cut anywhere, a trace is read (a cut between packets) or refused with TraceFormatError."""
    data = encode()
    path = tmp_path / "p.pftrace"
    for size in range(1, len(data), 37):
        path.write_bytes(data[:size])
        try:
            load_trace(path)
        except TraceFormatError as exc:
            assert str(exc).startswith(str(path))


def test_a_perfetto_trace_of_another_program_is_refused(tmp_path: Path) -> None:
    seq = _Sequence(2, MAIN_TID, incremental=False)
    seq.start(BASE_NS)
    seq.slice("gfx", "DrawFrame", BASE_NS, BASE_NS + 500, None, [("corr_id", 1)])
    path = _write(tmp_path, b"".join(_b(1, p) for p in seq.packets), "chrome.pftrace")
    with pytest.raises(TraceFormatError, match="without rocprofv3's slices"):
        read_pftrace(path)


def test_unmatched_slices_are_skipped_and_counted(tmp_path: Path) -> None:
    seq = _Sequence(2, MAIN_TID, incremental=False)
    seq.start(BASE_NS)
    seq.track(0x77, 'STREAM [" 0 "] ')
    seq.slice("kernel_dispatch", KERNEL_A, BASE_NS, BASE_NS + 4_000, 0x77, [("agent", "Agent-2"), ("corr_id", 1)])
    seq.slice(
        "kernel_dispatch", KERNEL_B, BASE_NS + 5_000, BASE_NS + 6_000, 0x77, [("agent", "Agent-2"), ("corr_id", 2)]
    )
    seq.packets.pop()  # the second dispatch never ends
    seq._packet(_u(8, BASE_NS) + _u(58, 6) + _u(13, 2) + _b(11, _u(9, 2) + _u(11, 0x99)))  # an end of nothing
    trace = read_pftrace(_write(tmp_path, b"".join(_b(1, p) for p in seq.packets)))
    assert [trace.names[i] for i in trace.name_id] == [KERNEL_A] and list(trace.dur) == [4.0]
    assert trace.malformed == 2 and trace.malformed_activities == 1


# -- the command -----------------------------------------------------------------------------


def test_trace_analyze_command_reads_a_pftrace(tmp_path: Path) -> None:
    path = _write(tmp_path, encode())
    result = CliRunner().invoke(cli, ["trace", "analyze", "--json", "-j", "1", str(path)])
    assert result.exit_code == 0, result.output
    (rank,) = json.loads(result.output)["ranks"]
    assert rank["format"] == "rocprofv3-pftrace" and rank["runtime_api"]["sync_calls"] == 1
    text = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(path)])
    assert text.exit_code == 0 and "rocprofv3-pftrace" in text.output


def test_trace_analyze_refuses_a_truncated_pftrace_with_exit_2(tmp_path: Path) -> None:
    data = encode()
    path = _write(tmp_path, data[: len(data) // 2], "half.pftrace")
    result = CliRunner().invoke(cli, ["trace", "analyze", "-j", "1", str(path)])
    assert result.exit_code == 2 and "half.pftrace" in result.output and "Traceback" not in result.output
