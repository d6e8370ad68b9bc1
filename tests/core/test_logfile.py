"""Reading a log as byte chunks gives exactly the events of reading it line by line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS
from tprimat.contract import IterationBlock
from tprimat.contract.logfile import LogFile, newline_count
from tprimat.plugins.amd_megatron.parse import parse_rocm_megatron
from tprimat.plugins.amd_primus.parse import parse_primus
from tprimat.plugins.nvd_megatron.parse import parse_megatron
from tprimat.plugins.nvd_nemo.parse import parse_nemo

PARSERS = {
    "primus": parse_primus,
    "torchtitan": parse_primus,
    "megatron": parse_megatron,
    "bridge": parse_megatron,
    "nemo": parse_nemo,
}


def by_lines(parser, path: Path, drop_last_line: bool = False) -> list:
    return list(parser(iter(LogFile(path, drop_last_line=drop_last_line)), path.name))


def collected(events: list) -> tuple:
    """What the core keeps of an event stream: records, facts, issues and the count of copies.

    A byte reader may yield ``REPEATED_LINE`` for an exact copy of a line where a line reader
    yields the record again; the collector counts both as one dropped duplicate.
    """
    from tprimat.result.collect import EventCollector

    kept = EventCollector().consume(events)
    return kept.records, {k: f.value for k, f in kept.facts.items()}, kept.issues, kept.duplicates


def by_chunks(parser, path: Path, chunk_bytes: int, drop_last_line: bool = False) -> list:
    """The events read from the file's bytes, a run of lines read at once made into its records."""
    log = LogFile(path, chunk_bytes=chunk_bytes, drop_last_line=drop_last_line)
    events = []
    for event in parser(log, path.name):
        events.extend(event.records() if isinstance(event, IterationBlock) else [event])
    return events


FILES = sorted(p for p in LOGS.rglob("*") if p.suffix in (".log", ".txt"))


@pytest.mark.parametrize("path", FILES, ids=[p.name[:40] for p in FILES])
@pytest.mark.parametrize("chunk_bytes", [97, 4096, 1 << 22])
def test_every_fixture_same_events_both_ways(path, chunk_bytes):
    parser = PARSERS[path.parent.name]
    if path.name.startswith("rocm-megatron"):
        parser = parse_rocm_megatron
    assert collected(by_chunks(parser, path, chunk_bytes)) == collected(by_lines(parser, path))


def test_lines_and_chunks_with_lone_carriage_returns_and_a_cut_line(tmp_path):
    text = (LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log").read_text(
        encoding="utf-8"
    )
    mixed = text.replace("\n", "\r", 40).replace("\n", "\r\n", 40)
    path = tmp_path / "mixed.log"
    path.write_bytes(mixed.encode() + b"Training epoch 0, iteration 20/30 | lr: 1e-4 | glo")
    for drop in (False, True):
        for size in (50, 3000, 1 << 20):
            assert by_chunks(parse_nemo, path, size, drop) == by_lines(parse_nemo, path, drop)


LINES = [
    line
    for line in (
        LOGS / "primus" / ("primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log")
    )
    .read_text(encoding="utf-8")
    .splitlines(True)[370:]
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.sampled_from(LINES), st.integers(0, 900), st.binary(max_size=8)), max_size=30),
    st.integers(16, 5000),
)
def test_mutated_files_same_events_both_ways(tmp_path, rows, chunk_bytes):
    blob = b"".join(line.encode()[:cut] + junk + b"\n" for line, cut, junk in rows)
    path = tmp_path / "m.log"
    path.write_bytes(blob)
    assert collected(by_chunks(parse_primus, path, chunk_bytes)) == collected(by_lines(parse_primus, path))


@given(st.binary(max_size=300).map(lambda b: b.replace(b"x", b"\n")), st.integers(-400, 400), st.integers(-400, 400))
def test_newline_count_is_bytes_count(data, start, end):
    assert newline_count(data) == data.count(b"\n")
    assert newline_count(data, start) == data.count(b"\n", start)
    assert newline_count(data, start, end) == data.count(b"\n", start, end)
