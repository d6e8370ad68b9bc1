"""Copies of lines recognised by their bytes change nothing: the collector ends up the same."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.logfile import LogFile
from tprimat.contract.records import REPEATED_LINE, RepeatedLine
from tprimat.plugins.amd_primus.parse import parse_primus
from tprimat.plugins.megatron_core.stream import repeat_key
from tprimat.result.collect import EventCollector

P21 = LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"


def _interleaved(tmp_path: Path) -> Path:
    path = Path(__file__).resolve().parents[3] / "bench" / "logshapes.py"
    spec = importlib.util.spec_from_file_location("logshapes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_interleaved(tmp_path / "console.log", 1)


def _collect(events) -> EventCollector:
    return EventCollector().consume(events)


def _same(a: EventCollector, b: EventCollector) -> None:
    assert a.records == b.records
    assert a.duplicates == b.duplicates and a.replaced == b.replaced
    assert {k: f.value for k, f in a.facts.items()} == {k: f.value for k, f in b.facts.items()}
    assert a.issues == b.issues and a.issue_count == b.issue_count


@pytest.mark.parametrize("source", ["interleaved", "fixture"])
def test_bytes_reader_skips_copies_and_collects_the_same(tmp_path, source):
    path = _interleaved(tmp_path) if source == "interleaved" else P21
    chunked = list(parse_primus(LogFile(path), path.name))
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = list(parse_primus(handle, path.name))
    assert REPEATED_LINE not in lines  # text lines are always read in full
    copies = sum(isinstance(e, RepeatedLine) for e in chunked)
    if source == "interleaved":
        assert copies > 0 and len(chunked) < len(lines)
    _same(_collect(chunked), _collect(lines))


def test_a_repeated_line_counts_as_a_duplicate():
    collector = EventCollector()
    assert collector.add(REPEATED_LINE) is None
    assert collector.duplicates == 1


@pytest.mark.parametrize(
    ("line", "keyed"),
    [
        (b"[rank-0/8] ... [2026-05-07 13:47:46] iteration 5/ 10 | loss: 1.0 |\n", True),
        (b"[Rank 0] (after 5 iterations) memory (MB) | allocated: 1.0\n", True),
        (b"a | b iteration 5/ 10 | loss: 1.0 |\n", False),  # a "|" before: an earlier match may exist
        (b"\x1b[0miteration 5/ 10 | loss: 1.0 |\n", False),  # right after a colour code
        (b"current_iteration 5/ 10 |\n", False),  # part of a word
    ],
)
def test_repeat_key_only_where_the_bytes_decide(line, keyed):
    assert (repeat_key(line) is not None) is keyed
