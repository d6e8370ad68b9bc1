"""The block decoder reads every fixture trace exactly as one whole-document decode does."""

from __future__ import annotations

import gzip
import json

import msgspec
import pytest

from tprimat.trace import fastread, reader
from tprimat.trace.limits import describe_event

TRACES = sorted(
    p
    for sub in ("hta", "tracelens")
    for p in (reader.Path(__file__).parents[2] / "fixtures" / "traces" / sub).iterdir()
    if p.name.endswith((".json", ".json.gz"))
)
FIELDS = (
    "path",
    "rank",
    "world_size",
    "vendor",
    "device",
    "metadata",
    "names",
    "ts",
    "dur",
    "name_id",
    "code",
    "stream",
    "correlation",
    "launch_correlation",
    "launch_ts",
    "steps",
    "events",
    "malformed",
    "malformed_first",
)


def _event(value):
    try:
        return msgspec.convert(value, fastread.Event)
    except msgspec.ValidationError:
        return fastread.Malformed(describe_event(value))


def _whole(path):
    """The trace from the whole document decoded at once by the standard library: the reference."""
    data = path.read_bytes()
    document = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    events = document["traceEvents"] if isinstance(document, dict) else document
    metadata = {k: v for k, v in document.items() if k != "traceEvents"} if isinstance(document, dict) else {}
    trace = reader.RankTrace(path=path, metadata=metadata)
    reader._take(trace, (_event(event) for event in events))
    return reader.finish_trace(trace, {})


@pytest.mark.parametrize("block", [4096, 1 << 20])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:50])
def test_batches_read_like_the_whole_document(path, block, monkeypatch):
    monkeypatch.setattr(fastread, "BLOCK_BYTES", block)
    monkeypatch.setattr(fastread, "HEAD_READ_BYTES", 97)  # the head found across many small reads
    fast = reader.read_trace(path)
    whole = _whole(path)
    assert fast.malformed == 0
    for field in FIELDS:
        assert getattr(fast, field) == getattr(whole, field), field


def test_a_truncated_trace_gives_the_precise_error(tmp_path):
    source = TRACES[0]
    data = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(reader.TraceFormatError, match="truncated or malformed trace after [0-9]+ events"):
        reader.read_trace(cut)


def test_a_boundary_inside_a_string_is_not_cut(tmp_path, monkeypatch):
    # Names holding the bytes of a boundary between events, longer than a block: the block
    # ends inside the string, and the reader waits for the next boundary instead of failing.
    monkeypatch.setattr(fastread, "BLOCK_BYTES", 64)
    events = [
        {"ph": "X", "cat": "kernel", "name": "k }, { " * (i % 40), "ts": float(i), "dur": 1.0, "args": {"stream": 7}}
        for i in range(300)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"name": "GPU"}]}, indent=1))
    trace = reader.read_trace(path)
    assert trace.events == 300 and list(trace.ts) == [float(i) for i in range(300)]
    assert [trace.names[i] for i in trace.name_id] == [e["name"] for e in events]
    assert trace.device == "GPU"


def test_where_the_event_array_ends_is_the_decoders(tmp_path):
    # The decoder reports the first byte after the array; the keys after it are metadata.
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "]}, {"}]\n  ,"deviceProperties": [{"name": "G]"}]}  \n')
    trace = reader.read_trace(path)
    assert trace.events == 1 and trace.device == "G]"
