"""Read rocprofv3's Perfetto output (``rocprofv3 --kernel-trace --output-format pftrace``) into a :class:`RankTrace`.

A ``.pftrace`` file is a Perfetto ``Trace`` protobuf: a sequence of ``TracePacket``
messages, each framed as field 1 (length-delimited) of ``Trace``.  rocprofv3 writes it
through the Perfetto SDK (rocprofiler-sdk ``source/lib/output/generatePerfetto.cpp``):
one slice (a ``TYPE_SLICE_BEGIN`` and a ``TYPE_SLICE_END`` track event) per record, in
the categories ``kernel_dispatch``, ``memory_copy``, ``hip_api`` (and ``hsa_api``,
``marker_api``, ``rccl_api``, ... which are not read), on tracks it names itself:
``STREAM [" <id> "]`` (recent versions), ``COMPUTE AGENT [<node>] STREAM [<id>] (GPU)``
(earlier), ``COMPUTE ... QUEUE [<n>] ...`` (with ``--group-by-queue``, and before HIP
streams were recorded), ``THREAD <n> (<tid>)`` and the thread tracks of the host.

The protobuf is decoded here with the standard library alone, packet by packet from the
file (plain or gzip; a packet of at most :data:`~tprimat.trace.limits.MAX_SPAN_BYTES`), so
memory grows with the activities kept, not with the file.  The hot loops (packets, track
events, debug annotations) decode one- and two-byte keys, varints and lengths in line and
pass over the annotations not read without decoding them; anything else goes through
:func:`fields`' own field reader, so both decode alike.  A short packet whose bytes after
its timestamp were seen before (the end of each slice on one track) is not decoded again.
The file is recognised by its content (:func:`sniff_pftrace`: the first bytes are packets
framed as field 1 of ``Trace`` that decode), after SQLite, CSV and JSON are ruled out.  The
fields read (Perfetto's ``protos/perfetto/trace/``; every other field is skipped):

* ``TracePacket``: ``timestamp`` (8), ``timestamp_clock_id`` (58),
  ``trusted_packet_sequence_id`` (10), ``sequence_flags`` (13; bit 1 clears the sequence's
  incremental state, as ``incremental_state_cleared`` (41) did), ``previous_packet_dropped``
  (42: packets of the sequence were lost before this one; counted in
  ``metadata["data_losses"]``), ``first_packet_on_sequence`` (87), ``interned_data`` (12),
  ``trace_packet_defaults`` (59: its ``timestamp_clock_id`` (58) and
  ``track_event_defaults.track_uuid`` (11.11)), ``clock_snapshot`` (6),
  ``track_descriptor`` (60), ``track_event`` (11) and ``compressed_packets`` (50, deflate;
  ``zstd_compressed_packets`` (133) is refused: the standard library has no zstd);
* ``TrackEvent``: ``type`` (9), ``track_uuid`` (11), ``name_iid`` (10) or ``name`` (23),
  ``category_iids`` (3) or ``categories`` (22), ``debug_annotations`` (4);
* ``DebugAnnotation``: ``name_iid`` (1) or ``name`` (10), and ``uint_value`` (3),
  ``int_value`` (4), ``string_value`` (6) or ``string_value_iid`` (17), of the annotations
  named in :data:`_ANNOTATIONS` (the others are skipped undecoded);
* ``InternedData`` of the packet's sequence: ``event_categories`` (1), ``event_names``
  (2), ``debug_annotation_names`` (3), ``debug_annotation_string_values`` (29);
* ``TrackDescriptor``: ``uuid`` (1), ``name`` (2) or ``static_name`` (10);
* ``ClockSnapshot.clocks`` (1): ``clock_id`` (1), ``timestamp`` (2), ``is_incremental``
  (3), ``unit_multiplier_ns`` (4), for the sequence-scoped clocks (ids 64 and up) the SDK
  uses for delta-encoded timestamps.  rocprofv3 passes its own nanosecond timestamps
  (``CLOCK_BOOTTIME``, the clock of its CSV output) with the clock id, so they are read as
  written; builtin clocks are not converted into one another.

What a slice gives: its start and end (the packet timestamps of its begin and end), its
name (the demangled kernel name, ``MEMORY_COPY_HOST_TO_DEVICE``, ``hipLaunchKernel``) and
the annotations rocprofv3 attaches: ``corr_id`` (matching a dispatch to the HIP call that
launched it: launch times, and the host time in launch and synchronisation calls,
:mod:`tprimat.trace.runtime_calls`), ``agent`` of a dispatch and ``src_agent``/
``dst_agent`` of a copy, ``queue`` (the HSA queue handle).  A dispatch's stream is the
number in its track's ``STREAM [...]`` name, else its ``queue`` (as the CSV reader takes
``Queue_Id`` where there is no ``Stream_Id``); copies have no stream (-1), as in the CSV
reader.  rocprofv3 trims dispatches that overlap on one queue to meet at the midpoint of
the overlap (a firmware timestamp workaround in generatePerfetto.cpp), so such a pair's
durations differ from the CSV output by that amount.

What it cannot give: PyTorch operators, their shapes and nesting, ``ProfilerStep``
annotations (the window is the whole run), collective arguments, and the device's name
(only an agent number or label such as ``Agent-2``).  With several GPUs, the agent that
ran most kernels is analysed (with the copies to or from it) and the others are counted in
``metadata``.  Times are kept in µs from the first activity (``metadata["time_origin_ns"]``).
A slice without an end, an end without a begin, or one ending before it starts is skipped
and counted (:attr:`RankTrace.malformed`); a file that is not a Perfetto trace, is
truncated, or holds no rocprofv3 category is one :class:`TraceFormatError` naming the file.
Tested on a real rocprofv3 file (HIP calls only) and, for dispatches and copies, on files
encoded as generatePerfetto.cpp and the Perfetto SDK write them (``tests/core/trace/test_pftrace.py``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs

from tprimat.trace.limits import MAX_SPAN_BYTES, BrokenTrace, mib
from tprimat.trace.reader import ACTIVITY_CODES, RankTrace, TraceFormatError, open_binary
from tprimat.trace.runtime_calls import add_runtime_call, new_summary

#: The categories rocprofv3 writes (rocprofiler-sdk ``cxx/perfetto.hpp``): a trace with none is not its output.
ROCPROF_CATEGORIES = frozenset(
    {
        "hsa_api",
        "hip_api",
        "marker_api",
        "rccl_api",
        "openmp",
        "kernel_dispatch",
        "memory_copy",
        "memory_allocation",
        "rocdecode_api",
        "rocjpeg_api",
        "counter_collection",
        "kfd_events",
        "none",
    }
)
_KERNEL, _COPY, _API = "kernel_dispatch", "memory_copy", "hip_api"
_READ = frozenset({_KERNEL, _COPY, _API})
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_SLICE_BEGIN, _SLICE_END = 1, 2
_BOOTTIME = 6  # BuiltinClock.BOOTTIME: the default clock of a packet's timestamp
_MAX_BUILTIN_CLOCK = 63
_CHUNK = 1 << 20
_STREAM_IN_NAME = re.compile(r"STREAM \[\D*(\d{1,19})")
_INT64_MAX = 2**63 - 1
_REPEATED_BYTES, _REPEATED_MAX = 64, 4096  # the packets remembered decoded (after their timestamp)


class _Malformed(Exception):
    """Protobuf bytes that do not decode (what is wrong)."""


class _Cut(_Malformed):
    """Protobuf bytes that end inside a field."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _Malformed("a varint longer than 10 bytes")
    raise _Cut("a varint runs past the end of its message")


def _field(buf: bytes, pos: int, end: int) -> tuple[int, int, Any, int]:
    """The field at ``pos`` of a message ending at ``end`` (the end of ``buf``): its number,
    wire type and value (an int for varint and fixed-width fields, the bytes for
    length-delimited ones) and the position after it.  Groups are refused (Perfetto writes
    none).  One-byte keys, varints and lengths, the common case, take a short path."""
    try:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise _Malformed("field number 0")
        value: int | bytes
        if wire == _VARINT:
            value = buf[pos]
            if value < 0x80:
                pos += 1
            else:
                value, pos = _varint(buf, pos, end)
        elif wire == _LEN:
            size = buf[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _varint(buf, pos, end)
            if pos + size > end:
                raise _Cut(f"field {field} of {size} bytes runs past the end of its message")
            value = buf[pos : pos + size]
            pos += size
        elif wire == _I64 or wire == _I32:
            width = 8 if wire == _I64 else 4
            if pos + width > end:
                raise _Cut(f"fixed-width field {field} runs past the end of its message")
            value = int.from_bytes(buf[pos : pos + width], "little")
            pos += width
        else:
            raise _Malformed(f"field {field} has wire type {wire}, which Perfetto does not write")
    except IndexError:
        raise _Cut("a field runs past the end of its message") from None
    return field, wire, value, pos


def fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """The (field number, wire type, value) of a protobuf message, as :func:`_field` reads them.

    The hot loops below (packets, track events, debug annotations) read a one-byte key with a
    one-byte varint or length in line and call :func:`_field` for anything else, so they
    decode exactly as this does, without a generator step per field."""
    pos, end = 0, len(buf)
    while pos < end:
        field, wire, value, pos = _field(buf, pos, end)
        yield field, wire, value


def _signed(value: int) -> int:
    """A varint read as an int64 (two's complement)."""
    return value - (1 << 64) if value > _INT64_MAX else value


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def sniff_pftrace(head: bytes) -> bool:
    """Whether the first bytes of a file are a Perfetto trace: packets framed as field 1 of
    ``Trace`` (key byte 0x0A, then a length) whose content decodes as protobuf, up to where
    ``head`` ends.  Text that happens to start with a newline (0x0A) fails the decoding."""
    if head[:1] != b"\x0a" or head.lstrip()[:1] in (b"{", b"["):
        return False
    pos, end, packets = 0, len(head), 0
    while pos < end:
        if head[pos] != 0x0A:
            return False
        try:
            size, start = _varint(head, pos + 1, end)
        except _Cut:
            return packets > 0  # a packet header cut by the end of ``head``
        except _Malformed:
            return False
        packet = head[start : start + size]
        if start + size > end and not packet:
            return packets > 0  # the bytes end where a packet starts
        if not _decodes(packet, cut=start + size > end, first=not packets):
            return False
        packets += 1
        pos = start + size
    return packets > 0


def _decodes(packet: bytes, cut: bool, first: bool) -> bool:
    """Whether a packet decodes as protobuf (``cut``: only its start is there, so it may end
    inside a field); the ``first`` packet must hold at least one whole field."""
    whole = 0
    try:
        for _ in fields(packet):
            whole += 1
    except _Cut:
        return cut and (whole > 0 or not first)
    except _Malformed:
        return False
    return whole > 0 or not first


@attrs.define
class _Clock:
    """A sequence-scoped clock from a ``ClockSnapshot``: ns = offset + units × multiplier."""

    incremental: bool
    multiplier: int
    units: int
    offset_ns: int


@attrs.define
class _Sequence:
    """The incremental state of one packet sequence (one writer: a thread of the profiler)."""

    names: dict[int, str] = attrs.Factory(dict)
    categories: dict[int, str] = attrs.Factory(dict)
    annotation_names: dict[int, str] = attrs.Factory(dict)
    strings: dict[int, str] = attrs.Factory(dict)
    clocks: dict[int, _Clock] = attrs.Factory(dict)
    clock_id: int | None = None
    track: int | None = None
    seen: bool = False

    def clear(self) -> None:
        self.names.clear()
        self.categories.clear()
        self.annotation_names.clear()
        self.strings.clear()
        self.clocks.clear()
        self.clock_id = self.track = None


#: A slice begun and not yet ended on its track: (start ns, category, name, annotations read,
#: event index); the category is None for a slice of a category not read.
_Open = tuple[int | None, str | None, str, dict[str, Any], int]


class _Reader:
    """The state of one read: sequences, tracks, open slices, and what is kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sequences: dict[int, _Sequence] = {}
        self.track_names: dict[int, str] = {}
        self.open: dict[int, list[_Open]] = {}
        # start ns, end ns, name, activity, agent, correlation, track, queue, src/dst agents
        self.rows: list[tuple[int, int, str, str, Any, int, int, int, tuple[Any, ...]]] = []
        self.api_calls: list[tuple[str, int, int, int]] = []  # name, start ns, end ns, correlation
        self.categories_seen: set[str] = set()
        self.events = self.packets = self.data_loss = 0
        self.bad = self.bad_activities = 0
        self.bad_first: tuple[int, str] | None = None
        self.repeated: dict[bytes, tuple[Any, ...]] = {}  # short packets after their timestamp -> their fields

    def skip(self, index: int, problem: str, category: str | None) -> None:
        """Count slice event ``index`` (of ``category``, None where unknown) as skipped for ``problem``."""
        self.bad += 1
        self.bad_activities += category in (_KERNEL, _COPY)
        if self.bad_first is None:
            self.bad_first = (index, problem)

    # -- packets ------------------------------------------------------------------------------

    def packet(self, data: bytes, depth: int = 0) -> None:
        self.packets += 1
        if len(data) > 1 and data[0] == 0x40:  # the timestamp first, as the Perfetto SDK writes it
            stamp, at = _varint(data, 1, len(data))
            rest = data[at:]  # the same bytes in every end of a slice on one track: decoded once
            fields_of_rest = self.repeated.get(rest)
            if fields_of_rest is None:
                fields_of_rest = _packet_fields(rest)
                if len(rest) <= _REPEATED_BYTES and len(self.repeated) < _REPEATED_MAX:
                    self.repeated[rest] = fields_of_rest
            time, clock, seq_id, flags, event, got = fields_of_rest
            if time is None:
                time = stamp
        else:
            time, clock, seq_id, flags, event, got = _packet_fields(data)
        if 133 in got:
            raise _Malformed(
                "zstd-compressed packets, which are not read: decompress them first (`traceconv decompress_packets`)"
            )
        if 50 in got:
            if depth:
                raise _Malformed("compressed packets inside compressed packets")
            for inner in _inflated_packets(got[50]):
                self.packet(inner, depth + 1)
            return
        seq = self.sequence(seq_id, flags, got)
        if time is not None and (clock is not None or seq.clock_id is not None or seq.clocks):
            time = _time_ns(seq, time, clock)
        if 60 in got:
            self.descriptor(got[60])
        if event is not None:
            self.track_event(seq, event, time)

    def sequence(self, seq_id: int, flags: int, got: dict[int, Any]) -> _Sequence:
        """A packet's sequence, its incremental state updated by the packet's flags, interned
        data, defaults and clock snapshot; a loss of packets before this one counted."""
        seq = self.sequences.get(seq_id)
        if seq is None:
            seq = self.sequences[seq_id] = _Sequence()
        if got.get(42) and seq.seen and not got.get(87):
            self.data_loss += 1
        seq.seen = True
        if flags & 1 or got.get(41):
            seq.clear()
        if got:
            if 12 in got:
                _intern(seq, got[12])
            if 59 in got:
                _defaults(seq, got[59])
            if 6 in got:
                _snapshot(seq, got[6])
        return seq

    def descriptor(self, data: bytes) -> None:
        got = _pick(data, {1: _VARINT, 2: _LEN, 10: _LEN})
        name = got.get(2, got.get(10))
        if name is not None:
            self.track_names[got.get(1, 0)] = _text(name)

    def track_event(self, seq: _Sequence, data: bytes, time_ns: int | None) -> None:
        """Read a ``TrackEvent``: a slice's begin or end; the annotations are decoded only for
        the begin of a slice of a category read."""
        kind, track, name_iid, name, category, annotations = _event_fields(seq, data)
        if kind != _SLICE_BEGIN and kind != _SLICE_END:
            return
        if track is None:
            track = seq.track if seq.track is not None else 0
        index = self.events
        self.events += 1
        stack = self.open.get(track)
        if stack is None:
            stack = self.open[track] = []
        if kind == _SLICE_END:
            self.end(stack, time_ns, index, track)
            return
        if category is not None:
            self.categories_seen.add(category)
        if category not in _READ:
            stack.append((time_ns, None, "", {}, -1))
            return
        text = _text(name) if name is not None else seq.names.get(name_iid, "")
        stack.append((time_ns, category, text, _annotations(seq, annotations), index))

    def end(self, stack: list[_Open], end_ns: int | None, index: int, track: int) -> None:
        """The slice on top of ``stack`` ends at ``end_ns``: kept if it is of a category read."""
        if not stack:
            self.skip(index, "a slice end without a begin on its track", None)
            return
        start_ns, category, name, args, begun = stack.pop()
        if category is None:
            return
        if start_ns is None or end_ns is None:
            problem = "a slice without a timestamp, or in a clock that no clock snapshot defines"
            self.skip(begun, problem, category)
        elif end_ns < start_ns:
            self.skip(begun, "a slice that ends before it starts", category)
        else:
            self.slice(category, name, args, start_ns, end_ns, track)

    def slice(self, category: str, name: str, args: dict[str, Any], start_ns: int, end_ns: int, track: int) -> None:
        corr = _int64(args.get("corr_id"))
        if category == _API:
            self.api_calls.append((name, start_ns, end_ns, corr))
        elif category == _KERNEL:
            queue = _int64(args.get("queue"))
            self.rows.append((start_ns, end_ns, name, "kernel", args.get("agent"), corr, track, queue, ()))
        else:
            name = f"Memcpy {name.removeprefix('MEMORY_COPY_')}"
            agents = (args.get("src_agent"), args.get("dst_agent"))
            self.rows.append((start_ns, end_ns, name, "gpu_memcpy", None, corr, track, -1, agents))

    def unfinished(self) -> None:
        for stack in self.open.values():
            for _, category, _, _, index in stack:
                if category is not None:
                    self.skip(index, "a slice that never ends (the trace stops before its end)", category)

    def stream_of(self, track: int, queue: int) -> int:
        match = _STREAM_IN_NAME.search(self.track_names.get(track, ""))
        if match is not None and int(match.group(1)) <= _INT64_MAX:
            return int(match.group(1))
        return queue


#: The fields of a ``TracePacket`` read, with their wire types.
_PACKET_FIELDS = {
    **dict.fromkeys((8, 58, 10, 13, 41, 42, 87), _VARINT),
    **dict.fromkeys((11, 60, 12, 59, 6, 50, 133), _LEN),
}


def _packet_fields(data: bytes) -> tuple[int | None, int | None, int, int, bytes | None, dict[int, Any]]:  # noqa: C901
    """A ``TracePacket``'s timestamp, clock, sequence, flags and track event (each None or 0
    where absent), and the rarer fields read (:data:`_PACKET_FIELDS`), the last of each.

    The hottest loop of the read: one- or two-byte keys, varints and lengths are decoded in
    line (as :func:`_field` decodes them, which takes the rest), hence its many branches."""
    time: int | None = None
    clock: int | None = None
    event: bytes | None = None
    seq_id = flags = 0
    got: dict[int, Any] = {}
    value: Any  # an int (varint) or bytes (length-delimited), by the field's wire type
    pos, end = 0, len(data)
    while pos < end:
        key, at = data[pos], pos + 1  # in line (one- or two-byte key, varint, length): see :func:`fields`
        if key >= 0x80:  # a longer key, or one cut by the end, is left to :func:`_field` (as key 0)
            key, at = ((key & 0x7F) | data[at] << 7, at + 1) if at + 1 < end and data[at] < 0x80 else (0, at)
        if key >= 8 and key & 7 == _VARINT and at < end:
            field, wire, value = key >> 3, _VARINT, data[at]
            if value < 0x80:
                pos = at + 1
            elif at + 1 < end and data[at + 1] < 0x80:
                value, pos = (value & 0x7F) | data[at + 1] << 7, at + 2
            else:
                value, pos = _varint(data, at, end)
        elif key >= 8 and key & 7 == _LEN and at < end:
            size = data[at]
            if size < 0x80:
                at += 1
            elif at + 1 < end and data[at + 1] < 0x80:
                size, at = (size & 0x7F) | data[at + 1] << 7, at + 2
            else:
                size, at = _varint(data, at, end)
            if at + size > end:
                raise _Cut(f"field {key >> 3} of {size} bytes runs past the end of its message")
            field, wire, value, pos = key >> 3, _LEN, data[at : at + size], at + size
        else:
            field, wire, value, pos = _field(data, pos, end)
        if wire == _VARINT:
            if field == 8:
                time = value
            elif field == 13:
                flags = value
            elif field == 10:
                seq_id = value
            elif field == 58:
                clock = value
            elif _PACKET_FIELDS.get(field) == _VARINT:
                got[field] = value
        elif wire == _LEN:
            if field == 11:
                event = value
            elif _PACKET_FIELDS.get(field) == _LEN:
                got[field] = value
    return time, clock, seq_id, flags, event, got


def _event_fields(  # noqa: C901
    seq: _Sequence, data: bytes
) -> tuple[int, int | None, int, bytes | None, str | None, list[bytes]]:
    """A ``TrackEvent``'s type, track, name iid and name (the last of each), its first
    category, and those of its debug annotations that may be read (an annotation whose
    interned name is not in :data:`_ANNOTATIONS` is skipped undecoded).

    Hot as :func:`_packet_fields`, and decoded in line the same way."""
    kind = name_iid = 0
    track: int | None = None
    name: bytes | None = None
    category: str | None = None
    annotations: list[bytes] = []
    annotation_names = seq.annotation_names
    value: Any  # an int (varint) or bytes (length-delimited), by the field's wire type
    pos, end = 0, len(data)
    while pos < end:
        key, at = data[pos], pos + 1  # in line (one- or two-byte key, varint, length): see :func:`fields`
        if key == 0x22 and pos + 3 < end and data[pos + 2] == 0x08:  # a debug annotation, most of an event
            stop = at + 1 + data[at]
            if 1 < data[at] < 0x80 and stop <= end and data[pos + 3] < 0x80:  # its name interned, iid < 128
                if annotation_names.get(data[pos + 3]) in _ANNOTATIONS:
                    annotations.append(data[pos + 2 : stop])
                pos = stop
                continue
        if key >= 0x80:  # a longer key, or one cut by the end, is left to :func:`_field` (as key 0)
            key, at = ((key & 0x7F) | data[at] << 7, at + 1) if at + 1 < end and data[at] < 0x80 else (0, at)
        wire = key & 7
        if key < 8 or at >= end:
            field, wire, value, pos = _field(data, pos, end)
        elif wire == _VARINT:
            field, value = key >> 3, data[at]
            if value < 0x80:
                pos = at + 1
            elif at + 1 < end and data[at + 1] < 0x80:
                value, pos = (value & 0x7F) | data[at + 1] << 7, at + 2
            else:
                value, pos = _varint(data, at, end)
        elif wire == _LEN and data[at] < 0x80 and at + 1 + data[at] <= end:
            field, stop = key >> 3, at + 1 + data[at]
            value, pos = data[at + 1 : stop], stop
        elif wire == _I64 and key != 3 << 3 | _I64 and at + 8 <= end:
            pos = at + 8  # a fixed64 not read (the flow ids of a slice)
            continue
        else:
            field, wire, value, pos = _field(data, pos, end)
        if field == 4:
            if wire == _LEN:
                annotations.append(value)
        elif field == 3:
            if category is None:
                category = seq.categories.get(_varint(value, 0, len(value))[0] if wire == _LEN else value)
        elif wire == _VARINT:
            if field == 9:
                kind = value
            elif field == 11:
                track = value
            elif field == 10:
                name_iid = value
        elif wire == _LEN:
            if field == 23:
                name = value
            elif field == 22 and category is None:
                category = _text(value)
    return kind, track, name_iid, name, category, annotations


def _pick(data: bytes, wanted: dict[int, int]) -> dict[int, Any]:
    """The fields of a message named in ``wanted`` (field -> wire type), the last of each."""
    return {field: value for field, wire, value in fields(data) if wanted.get(field) == wire}


def _int64(value: Any) -> int:
    """An annotation's integer, or -1 where it is absent or not one."""
    return value if isinstance(value, int) and 0 <= value <= _INT64_MAX else -1


def _intern(seq: _Sequence, data: bytes) -> None:
    """Add an ``InternedData`` message's entries to the sequence's tables."""
    tables = {1: seq.categories, 2: seq.names, 3: seq.annotation_names, 29: seq.strings}
    for field, wire, value in fields(data):
        table = tables.get(field)
        if table is None or wire != _LEN:
            continue
        iid, text = 0, ""
        for inner, inner_wire, inner_value in fields(value):
            if inner == 1 and inner_wire == _VARINT:
                iid = inner_value
            elif inner == 2 and inner_wire == _LEN:
                text = _text(inner_value)
        table[iid] = text


def _defaults(seq: _Sequence, data: bytes) -> None:
    """A ``TracePacketDefaults``: the sequence's default clock and track."""
    for field, wire, value in fields(data):
        if field == 58 and wire == _VARINT:
            seq.clock_id = value
        elif field == 11 and wire == _LEN:
            for inner, inner_wire, inner_value in fields(value):
                if inner == 11 and inner_wire == _VARINT:
                    seq.track = inner_value


def _snapshot(seq: _Sequence, data: bytes) -> None:
    """A ``ClockSnapshot``: the sequence-scoped clocks it defines, placed on a builtin clock
    read at the same instant (BOOTTIME where the snapshot has it)."""
    clocks: list[tuple[int, int, bool, int]] = []
    for field, wire, value in fields(data):
        if field != 1 or wire != _LEN:
            continue
        clock_id, ts, incremental, multiplier = 0, 0, False, 1
        for inner, inner_wire, inner_value in fields(value):
            if inner_wire != _VARINT:
                continue
            if inner == 1:
                clock_id = inner_value
            elif inner == 2:
                ts = inner_value
            elif inner == 3:
                incremental = bool(inner_value)
            elif inner == 4:
                multiplier = inner_value or 1
        clocks.append((clock_id, ts, incremental, multiplier))
    builtin = {c[0]: c[1] for c in clocks if 0 < c[0] <= _MAX_BUILTIN_CLOCK}
    reference = builtin.get(_BOOTTIME, next(iter(builtin.values()), None))
    for clock_id, ts, incremental, multiplier in clocks:
        if clock_id > _MAX_BUILTIN_CLOCK:
            offset = 0 if reference is None else reference - ts * multiplier
            seq.clocks[clock_id] = _Clock(incremental, multiplier, ts, offset)


def _time_ns(seq: _Sequence, ts: int, clock_id: int | None) -> int | None:
    """A packet's timestamp in ns (delta-encoded clocks advanced), or None in an undefined clock."""
    if clock_id is None:
        clock_id = seq.clock_id if seq.clock_id is not None else _BOOTTIME
    clock = seq.clocks.get(clock_id)
    if clock is None:
        return ts if clock_id <= _MAX_BUILTIN_CLOCK else None
    if clock.incremental:
        clock.units += ts
        return clock.offset_ns + clock.units * clock.multiplier
    return clock.offset_ns + ts * clock.multiplier


#: The debug annotations of a slice that are read (the others, a dozen a dispatch, are skipped undecoded).
_ANNOTATIONS = frozenset({"corr_id", "agent", "queue", "src_agent", "dst_agent"})


def _annotations(seq: _Sequence, annotations: list[bytes]) -> dict[str, Any]:
    """The debug annotations of a slice named in :data:`_ANNOTATIONS`, name -> integer or string value."""
    out: dict[str, Any] = {}
    names = seq.annotation_names
    for data in annotations:
        if len(data) > 1 and data[0] == 0x08 and data[1] < 0x80 and names.get(data[1]) not in _ANNOTATIONS:
            continue  # an interned name (one-byte iid) that is not read
        name: str | None = None
        value: Any = None
        raw: Any  # an int (varint) or bytes (length-delimited), by the field's wire type
        pos, end = 0, len(data)
        while pos < end:
            key = data[pos]
            if 8 <= key < 0x80 and key & 7 == _VARINT and pos + 1 < end:  # in line: see :func:`fields`
                field, wire, raw = key >> 3, _VARINT, data[pos + 1]
                if raw < 0x80:
                    pos += 2
                else:
                    raw, pos = _varint(data, pos + 1, end)
            else:
                field, wire, raw, pos = _field(data, pos, end)
            if field == 1 and wire == _VARINT:
                name = names.get(raw)
            elif field == 10 and wire == _LEN:
                name = _text(raw)
            elif field == 3 and wire == _VARINT:
                value = raw
            elif field == 4 and wire == _VARINT:
                value = _signed(raw)
            elif field == 6 and wire == _LEN:
                value = _text(raw)
            elif field == 17 and wire == _VARINT:
                value = seq.strings.get(raw)
        if name in _ANNOTATIONS:
            out[name] = value
    return out


def _inflated_packets(data: bytes) -> Iterator[bytes]:
    """The packets of a ``compressed_packets`` field (deflate of a ``Trace``), within the packet limit."""
    inflater = zlib.decompressobj()
    try:
        trace = inflater.decompress(data, MAX_SPAN_BYTES)
    except zlib.error as exc:
        raise _Malformed(f"corrupt compressed packets ({exc})") from None
    if inflater.unconsumed_tail:
        raise _Malformed(f"compressed packets inflating to more than {mib(MAX_SPAN_BYTES)}")
    for field, wire, value in fields(trace):
        if field == 1 and wire == _LEN:
            yield value


def _packets(fh: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """The (offset, bytes) of each packet of a ``Trace``, read from the file a chunk at a time."""
    buf, pos, base, eof = b"", 0, 0, False
    while True:
        if len(buf) - pos < 32 and not eof:
            chunk = fh.read(_CHUNK)
            eof = not chunk
            buf, base, pos = buf[pos:] + chunk, base + pos, 0
        if pos >= len(buf):
            return
        offset = base + pos
        key, size, at = buf[pos], 0, pos + 1
        if at + 1 < len(buf) and key == 0x0A and buf[at] < 0x80:  # a one-byte length, in line
            size, at = buf[at], at + 1
        elif at + 2 < len(buf) and key == 0x0A and buf[at + 1] < 0x80:  # a two-byte length, in line
            size, at = (buf[at] & 0x7F) | buf[at + 1] << 7, at + 2
        else:
            try:
                key, at = _varint(buf, pos, len(buf))
                size, at = _varint(buf, at, len(buf))
            except _Malformed as exc:
                raise (_Truncated(offset) if eof else _Framing(offset, str(exc))) from None
        if key != 0x0A:
            raise _Framing(offset, f"field {key >> 3} with wire type {key & 7} where a packet (field 1) belongs")
        if size > MAX_SPAN_BYTES:
            raise _Framing(offset, f"a packet of {size} bytes, more than the limit of {mib(MAX_SPAN_BYTES)}")
        while len(buf) - at < size and not eof:
            chunk = fh.read(max(_CHUNK, size - (len(buf) - at)))
            eof = not chunk
            buf, base, at, pos = buf[pos:] + chunk, base + pos, at - pos, 0
        if len(buf) - at < size:
            raise _Truncated(offset)
        yield offset, buf[at : at + size]
        pos = at + size


class _Truncated(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(f"the trace ends inside the packet at byte {offset}: a truncated file?")


class _Framing(Exception):
    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(f"not a Perfetto trace at byte {offset}: {problem}")


def read_pftrace(path: str | Path) -> RankTrace:
    """The GPU activity and launches of a rocprofv3 Perfetto trace (see the module docstring)."""
    path = Path(path)
    reader = _Reader(path)
    count = 0
    try:
        with open_binary(path) as fh:
            for offset, data in _packets(fh):
                count += 1
                try:
                    reader.packet(data)
                except _Malformed as exc:
                    raise TraceFormatError(f"{path}: packet #{count} at byte {offset} does not decode: {exc}") from None
    except (_Truncated, _Framing, BrokenTrace) as exc:
        raise TraceFormatError(f"{path}: {exc}") from None
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
    reader.unfinished()
    if not reader.categories_seen & ROCPROF_CATEGORIES:
        raise TraceFormatError(
            f"{path}: a Perfetto trace without rocprofv3's slices (categories kernel_dispatch, memory_copy, "
            "hip_api, ...): only rocprofv3's --output-format pftrace output is read"
        )
    return _trace(reader)


def _trace(reader: _Reader) -> RankTrace:
    """The kept slices as a trace: the busiest agent's kernels, its copies, times from the first activity."""
    agents: dict[Any, int] = {}
    for row in reader.rows:
        if row[3] == "kernel":
            agents[row[4]] = agents.get(row[4], 0) + 1
    agent = max(agents, key=agents.__getitem__) if agents else None
    rows = [
        row
        for row in reader.rows
        if (row[4] == agent if row[3] == "kernel" else agent is None or agent in row[8] or row[8] == (None, None))
    ]
    rows.sort(key=lambda row: (row[0], row[1]))
    origin = rows[0][0] if rows else min((call[1] for call in reader.api_calls), default=0)
    trace = RankTrace(path=reader.path, vendor="amd")
    codes = {code: i for i, code in enumerate(ACTIVITY_CODES)}
    names: dict[str, int] = {}
    for start, end, name, activity, _, corr, track, queue, _ in rows:
        trace.ts.append((start - origin) / 1000.0)
        trace.dur.append((end - start) / 1000.0)
        trace.name_id.append(names.setdefault(name, len(names)))
        trace.code.append(codes[activity])
        trace.stream.append(reader.stream_of(track, queue) if activity == "kernel" else -1)
        trace.correlation.append(corr)
    trace.names.extend(names)
    summary = new_summary() if reader.api_calls else None
    wanted = set(trace.correlation)
    for name, start, end, corr in reader.api_calls:
        add_runtime_call(summary, name, (end - start) / 1000.0)  # type: ignore[arg-type]
        if corr >= 0 and corr in wanted:
            trace.launch_correlation.append(corr)
            trace.launch_ts.append((start - origin) / 1000.0)
    trace.runtime_api = summary
    trace.events = len(reader.rows) + len(reader.api_calls) + reader.bad
    trace.malformed, trace.malformed_activities = reader.bad, reader.bad_activities
    trace.malformed_first = reader.bad_first
    trace.format = "rocprofv3-pftrace"
    trace.metadata = {
        "agent": agent,
        "time_origin_ns": origin,
        "other_agents_kernels": {str(a): n for a, n in agents.items() if a != agent},
        "packets": reader.packets,
        "data_losses": reader.data_loss,
    }
    if not len(trace.ts) and summary is None and reader.bad:
        raise TraceFormatError(f"{reader.path}: no usable slices: all {reader.bad} are malformed")
    return trace


__all__ = ["ROCPROF_CATEGORIES", "fields", "read_pftrace", "sniff_pftrace"]
