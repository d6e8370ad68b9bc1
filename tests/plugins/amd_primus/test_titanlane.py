"""TorchTitan step lines read a run at a time (the fast lane) give exactly what the line reader gives.

Each log is read twice with the Primus parser: from its bytes (runs of step lines become
blocks) and as text lines (every line through the line reader, which defines the records).
The events, blocks made into their records, and the reader's state at the end must be the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plugins.lanes import ROOT, assert_same, denselogs, read_both, with_one_line_edited
from tprimat.plugins.amd_primus.parse import PrimusLogParser
from tprimat.plugins.amd_primus.titanlane import PrimusLanes, TitanLane

FIXTURES = ROOT / "tests" / "fixtures" / "logs" / "torchtitan"


def _titan_parser(source: str) -> PrimusLogParser:
    parser = PrimusLogParser(source)
    assert isinstance(parser.fast_lane, PrimusLanes) and isinstance(parser.fast_lane.steps, TitanLane)
    return parser


def _both(path: Path, chunk_bytes: int | None = None) -> tuple[list, list, int]:
    return read_both(_titan_parser, path, chunk_bytes)


@pytest.fixture(scope="module")
def dense(tmp_path_factory) -> Path:
    path, _ = denselogs().build_dense(tmp_path_factory.mktemp("titan") / "titan.log", "torchtitan", 0.8)
    return path


def test_a_dense_log_reads_the_same_and_mostly_in_blocks(dense):
    from_bytes, from_text, in_blocks = _both(dense)
    assert_same(from_bytes, from_text)
    records = sum(1 for e in from_text if type(e).__name__ == "IterationRecord")
    assert in_blocks > records * 0.9


def test_small_chunks_cut_runs_anywhere_and_read_the_same(dense):
    from_bytes, from_text, in_blocks = _both(dense, chunk_bytes=4096)
    assert_same(from_bytes, from_text)
    assert in_blocks


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.log")), ids=lambda p: p.name[:60])
def test_every_torchtitan_fixture_reads_theassert_same(path):
    from_bytes, from_text, _ = _both(path)
    assert_same(from_bytes, from_text)


#: Edits of one step line well inside the log (where runs are read at once): pattern, replacement.
EDITS = {
    "nan loss": (rb"loss: +\S+", b"loss: nan"),
    "underscore in the loss": (rb"loss: +\S+", b"loss: 1_0"),
    "tps a lone comma": (rb"tps: \S+", b"tps: ,"),
    "no grad norm": (rb"grad_norm: \S+  ", b""),
    "colour": (rb"\[titan\]", b"\x1b[32m[titan]\x1b[0m"),
    "lost escape": (rb"mfu: \S+", lambda match: match.group(0) + b"[0m"),
    "non-ascii": (rb"- root -", "- r\u00f6\u00f6t -".encode()),
    "a step back": (rb"step: \d+", b"step: 3"),
    "the same step again": (rb"step: (\d+)", lambda match: b"step: %d" % (int(match.group(1)) - 1)),
    "time going back": (rb"\d\d:\d\d:\d\d,", b"00:00:00,"),
    "no timestamp": (rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+", b"sometime"),
    "a month that is not one": (rb"-\d\d-(\d\d) ", lambda match: b"-13-" + match.group(1) + b" "),
    "an iteration word": (rb"- root -", b"- iteration -"),
    "control character": (rb"mfu: \S+", lambda match: match.group(0) + b"\x1f"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_line_the_fast_lane_cannot_take_is_read_by_the_line_reader(dense, tmp_path, edit):
    path = with_one_line_edited(dense, tmp_path / "edited.log", b"step: 500 ", *EDITS[edit])
    from_bytes, from_text, in_blocks = _both(path)
    assert_same(from_bytes, from_text)
    assert in_blocks > 900  # the lines before and after the edited one


def test_every_rank_s_copy_of_a_step_is_skipped_inside_a_run(dense, tmp_path):
    """Every rank prints each step (its own figures differing a little): the copies are skipped
    as the line reader skips them, and the steps still come in blocks."""
    copied = []
    for line in dense.read_bytes().splitlines(keepends=True):
        copied.append(line)
        if b"tps:" in line:
            copied.append(re.sub(rb"tflops: (\d+)", rb"tflops: 9\1", line))
    path = tmp_path / "ranks.log"
    path.write_bytes(b"".join(copied))
    from_bytes, from_text, in_blocks = _both(path)
    assert_same(from_bytes, from_text)
    records = sum(1 for e in from_text if type(e).__name__ == "IterationRecord")
    assert in_blocks > records * 0.9
