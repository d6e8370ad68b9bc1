"""Step lines of Primus's TorchTitan engine, on real TorchTitan output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.plugins.amd_primus.parse import parse_primus

TITAN = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "logs"
    / "torchtitan"
    / "torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log"
)


def test_step_lines_become_records_with_the_step_time_between_logged_steps():
    records = [e for e in parse_primus(TITAN.read_text().splitlines(keepends=True), "t.log") if hasattr(e, "iteration")]
    # Two ranks printed step 4: the first copy is kept.
    assert [r.iteration for r in records] == [4, 5]
    first, second = records
    assert first.step_time_s is None  # nothing logged before it
    # 19:46:19,145 - 19:46:17,508
    assert second.step_time_s == pytest.approx(1.637)
    assert second.loss == 7.07623 and second.grad_norm == 46.5
    assert second.mem_max_reserved_gib == 66.91  # TorchTitan's peak reserved, GiB
    assert second.reported == {
        "tokens_per_s_per_gpu": 10007.0,
        "tflops_per_gpu": 313.36,
        "mfu_percent": 13.93,
        "mem_max_reserved_percent": 37.51,
    }
    # TorchTitan's own tokens/s/GPU agrees with 16,384 tokens per GPU per step over 1.637 s
    assert 16384 / second.step_time_s == pytest.approx(second.reported["tokens_per_s_per_gpu"], rel=1e-3)


def test_parse_reads_it_as_amd_primus_when_told():
    result = parse_logs([TITAN], registry=Registry.from_environment(), backend="amd_primus").result
    assert result.run.backend == "amd_primus"
    assert [r.step_time_s for r in result.iterations] == [None, pytest.approx(1.637)]


def test_step_lines_are_found_past_the_start_up_part_of_a_large_file(monkeypatch):
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.megatron_core import stream

    monkeypatch.setattr(stream, "STARTUP_BYTES", 1)  # every chunk after the first is "running"
    events = list(parse_primus(LogFile(TITAN, chunk_bytes=64), "t.log"))
    assert [e.iteration for e in events if hasattr(e, "iteration")] == [4, 5]


def test_other_ranks_copies_of_a_step_are_told_from_their_bytes(tmp_path, monkeypatch):
    """Every rank prints each step, its own figures differing a little (the fixture's two copies
    of step 4): the file reader skips the copies unread and gives what reading them gives."""
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.amd_primus.torchtitan import TorchTitanSteps

    step_four = TITAN.read_text().splitlines(keepends=True)[:2]  # two ranks' copies of step 4
    assert step_four[0] != step_four[1]
    lines = []
    for step in range(4, 12):
        lines += [line.replace("step:  4 ", f"step:  {step} ") for line in step_four]
    path = tmp_path / "titan.log"
    path.write_text("".join(lines), encoding="utf-8")

    read = []
    real = TorchTitanSteps.feed
    monkeypatch.setattr(TorchTitanSteps, "feed", lambda self, line, n: read.append(n) or real(self, line, n))
    from_bytes = [repr(e) for e in parse_primus(LogFile(path), "t.log")]
    assert read == list(range(1, 17, 2))  # the first copy of each step only
    assert from_bytes == [repr(e) for e in parse_primus(lines, "t.log")]
    first = next(e for e in from_bytes if e.startswith("IterationRecord"))
    assert "'tflops_per_gpu': 314.71" in first  # the first copy's figures


def test_what_the_reader_keeps_per_step_is_bounded(tmp_path):
    """Copies are recognised from a bounded memory of recent records: a long log does not grow it."""
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.amd_primus.parse import PrimusLogParser
    from tprimat.plugins.megatron_core.stream import iter_events

    template = TITAN.read_text().splitlines(keepends=True)[2]
    path = tmp_path / "titan.log"
    path.write_text("".join(template.replace("step:  5 ", f"step: {step} ") for step in range(1, 10_001)))
    parser = PrimusLogParser("t.log")
    records = [e for e in iter_events(parser, LogFile(path)) if hasattr(e, "iteration")]
    assert len(records) == 10_000
    assert len(parser._generations) <= 4096 and len(parser._line_records) <= 256
