"""The batch decoder reads every fixture trace exactly as the item-by-item reader does."""

from __future__ import annotations

import gzip

import pytest

from tprimat.trace import fastread, reader

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
)


def _slow(path):
    prefix, metadata = reader._read_head(path)
    return reader._read_events(path, prefix, metadata, None)


@pytest.mark.parametrize("block", [4096, 1 << 20])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:50])
def test_batches_read_like_items(path, block, monkeypatch):
    monkeypatch.setattr(fastread, "BLOCK_BYTES", block)
    prefix, metadata = reader._read_head(path)
    fast = reader._read_events(path, prefix, dict(metadata), reader._fast_events(path, prefix))
    slow = _slow(path)
    for field in FIELDS:
        assert getattr(fast, field) == getattr(slow, field), field


def test_a_truncated_trace_falls_back_to_the_precise_error(tmp_path):
    source = TRACES[0]
    data = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(reader.TraceFormatError, match="truncated or malformed"):
        reader.read_trace(cut)
