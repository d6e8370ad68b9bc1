"""NeMo 2 step lines read a run at a time (the fast lane) give exactly what the line reader gives.

Each log is read twice with the same parser: from its bytes (runs of step lines become blocks)
and as text lines (every line through the line reader, which defines the records).  The events,
blocks made into their records, must be the same, in the same order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.lanes import ROOT, assert_same, denselogs, read_both, with_one_line_edited
from tprimat.contract import LogFile
from tprimat.plugins.megatron_core.stream import iter_events
from tprimat.plugins.nvd_nemo.parse import NemoLogParser

FIXTURES = ROOT / "tests" / "fixtures" / "logs" / "nemo"


def _both(path: Path, chunk_bytes: int | None = None) -> tuple[list, list, int]:
    return read_both(NemoLogParser, path, chunk_bytes)


@pytest.fixture(scope="module")
def dense(tmp_path_factory) -> Path:
    path, _ = denselogs().build_dense(tmp_path_factory.mktemp("nemo") / "nemo2.log", "nemo2", 0.6)
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


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.log")), ids=lambda p: p.name[:60])
def test_every_nemo_fixture_reads_theassert_same(path):
    from_bytes, from_text, _ = _both(path)
    assert_same(from_bytes, from_text)


#: Edits of one step line well inside the log (where runs are read at once): pattern, replacement.
EDITS = {
    "nan loss": (rb"reduced_train_loss: \S+", b"reduced_train_loss: nan"),
    "zero step time": (rb"train_step_timing in s: \S+", b"train_step_timing in s: 0.0"),
    "negative step time": (rb"train_step_timing in s: \S+", b"train_step_timing in s: -2.742"),
    "not a number": (rb"lr: \S+", b"lr: 1.9.43"),
    "val_loss": (rb"\n", b" | val_loss: 2.5\n"),
    "samples twice": (rb"global_batch_size", b"consumed_samples: 7 | global_batch_size"),
    "colour": (rb"Training epoch", b"\x1b[32mTraining epoch"),
    "lost escape": (rb"reduced_train_loss: \S+", lambda match: match.group(0) + b"[0m"),
    "non-ascii": (rb"Training epoch", "\u00e9 Training epoch".encode()),
    "two lines in one": (rb"\n", b" Training epoch 0, iteration 9/9 | lr: 1.0\n"),
    "a step back": (rb"global_step: +\d+", b"global_step: 0"),
    "unknown key": (rb"global_step:", b"extra: 5 | global_step:"),
    "control character": (rb"reduced_train_loss: \S+", lambda match: match.group(0) + b"\x1f"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_line_the_fast_lane_cannot_take_is_read_by_the_line_reader(dense, tmp_path, edit):
    path = with_one_line_edited(dense, tmp_path / "edited.log", b", iteration 500/", *EDITS[edit])
    from_bytes, from_text, in_blocks = _both(path)
    assert_same(from_bytes, from_text)
    assert in_blocks > 900  # the lines before and after the edited one


def _reports_state(path: Path) -> bool:
    """Whether the parser of ``path`` reports its state, as the parallel reader probes it."""
    from tprimat.plugins.nvd_nemo.parse import parse_nemo

    probe = LogFile(path, start=0, end=0)
    list(parse_nemo(probe, path.name))
    return probe.final_state is not None


def test_a_nemo2_file_can_be_read_in_ranges_and_a_nemo1_file_is_read_whole(dense, tmp_path):
    assert _reports_state(dense)
    nemo1 = sorted(FIXTURES.glob("nemo1_2025-*.log"))  # NeMo 1 runs: DLLogger lines, a configuration
    assert nemo1 and not any(map(_reports_state, nemo1))
    # A NeMo 1 line anywhere in the file, even far after the start, makes it a file read whole.
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes(dense.read_bytes() + b"DLL 2025-06-12 08:00:00 - TRAIN Step: 3 train_loss: 1.0\n")
    assert not _reports_state(mixed)


@pytest.mark.parametrize("name", ["dense", *(p.name for p in sorted(FIXTURES.glob("*.log")))])
def test_the_memory_peaks_the_parser_reads_are_those_a_scan_of_the_file_finds(dense, name):
    """The parser yields each rank's peaks, so that the result need not scan the file again."""
    from tprimat.contract import RankPeak
    from tprimat.plugins.megatron_core.memory_lines import memory_peaks

    path = dense if name == "dense" else FIXTURES / name
    read = [e for e in iter_events(NemoLogParser(path.name), LogFile(path)) if isinstance(e, RankPeak)]
    assert read == memory_peaks(path)


def test_a_nemo1_trigger_is_found_across_the_blocks_the_file_is_searched_in(tmp_path):
    from tprimat.plugins.nvd_nemo.parse import _search

    path = tmp_path / "log"
    path.write_bytes(b"x" * 10 + b"DLL 2025" + b"y" * 10)
    for block_bytes in range(1, 30):
        assert _search(path, (b"DLL", b"Experiment configuration"), block_bytes)
    assert not _search(path, (b"DLX",), 4)
