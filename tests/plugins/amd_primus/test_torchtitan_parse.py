"""Step lines of Primus's TorchTitan engine, on real TorchTitan output."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tprimat.contract import IterationBlock
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
    records = [r for e in events for r in (e.records() if isinstance(e, IterationBlock) else [e])]
    assert [e.iteration for e in records if hasattr(e, "iteration")] == [4, 5]


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
    events = parse_primus(LogFile(path), "t.log")
    from_bytes = [repr(r) for e in events for r in (e.records() if isinstance(e, IterationBlock) else [e])]
    assert read and set(read) <= set(range(1, 17, 2))  # first copies only (a run of them is read at once)
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
    events = iter_events(parser, LogFile(path))
    records = [r for e in events for r in (e.records() if isinstance(e, IterationBlock) else [e])]
    assert len([r for r in records if hasattr(r, "iteration")]) == 10_000
    assert len(parser._generations) <= 4096 and len(parser._line_records) <= 256


# -- the step pattern is tried only where "step:" occurs, the figures of an ASCII line read at once --

_PIECES = st.sampled_from(
    [
        "step:",
        "step: 4",
        " loss: 7.1",
        "  grad_norm: 2",
        " memory: 6.9GiB(37.5%)",
        " tps: 1,0",
        " tflops: 3",
        " mfu: 1%",
        "x",
        " ",
        "\u0663",
        "\x1b[0m",
    ]
)


_STEP = (
    "step: 5  loss:  7.07623  grad_norm: 46.5000  memory: 66.91GiB(37.51%)  tps: 10,007  tflops: 313.36  mfu: 13.93%"
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=8),
    st.sampled_from(["", _STEP, _STEP.replace("  grad_norm: 46.5000", ""), _STEP.replace("tps", "tps ")]),
    st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=4),
)
def test_the_step_pattern_is_found_where_its_search_finds_it(before, step, after):
    from tprimat.plugins.amd_primus.torchtitan import STEP_BYTES_RE, STEP_RE, _first_step

    text = "".join(before) + step + "".join(after)
    for line, pattern, key in ((text, STEP_RE, "step:"), (text.encode(), STEP_BYTES_RE, b"step:")):
        found, searched = _first_step(line, pattern, key), pattern.search(line)
        assert (found and (found.span(), found.groups())) == (searched and (searched.span(), searched.groups()))


def _reference_figures(match):
    """The figures as every one of them is read on its own (the reading of a line that is not plain ASCII)."""
    from tprimat.plugins.megatron_core.lines import parse_float

    return (
        parse_float(match["loss"]),
        parse_float(match["grad_norm"]) if match["grad_norm"] else None,
        parse_float(match["memory"]),
        parse_float(match["tps"].replace(",", "")),
        parse_float(match["tflops"].replace(",", "")),
        parse_float(match["mfu"]),
        parse_float(match["memory_pct"]),
    )


_PLAIN = st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3})?\Z")
_DIGITS = st.one_of(_PLAIN, _PLAIN, _PLAIN, st.sampled_from([".", "1.2.3", "\u0663", "7."]))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(_DIGITS, st.sampled_from(["nan", "-inf", "1_0", "1e-3", "\u0663.5", "x"])),
            st.one_of(st.none(), _DIGITS, st.sampled_from(["inf", "2_5"])),
            st.lists(_DIGITS, min_size=5, max_size=5),
            st.sampled_from(["", ",", "0,0"]),
        ),
        min_size=1,
        max_size=4,
    )
)
@example([("1_0", "2", ["6.5", "37.5", "10", "313.36", "13.9"], ","), ("7.1", "2_5", ["6", "3", "1", "3", "1"], "")])
@example([("7.1", None, ["6.5", "1.2.3", "10", "3", "1"], ""), ("\u0663.5", "2", ["6", "3", "1", "3", "."], "")])
def test_the_figures_of_a_step_line_read_as_each_read_on_its_own(lines):
    from tprimat.plugins.amd_primus import torchtitan

    text = []
    for step, (loss, grad_norm, (memory, percent, tps, tflops, mfu), comma) in enumerate(lines, 1):
        norm = f"  grad_norm: {grad_norm}" if grad_norm is not None else ""
        text.append(
            f"[titan] 2026-02-24 19:46:{step:02d},145 - root - INFO - step: {step}  loss:  {loss}{norm}"
            f"  memory: {memory}GiB({percent}%)  tps: {tps}{comma}  tflops: {tflops}{comma}  mfu: {mfu}%\n"
        )
    read = [repr(e) for e in parse_primus(text, "t.log")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torchtitan, "_figures", _reference_figures)
        assert read == [repr(e) for e in parse_primus(text, "t.log")]
