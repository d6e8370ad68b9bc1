"""Memory lines of real logs: Megatron's prediction and allocator report, Primus hip usage, NeMo peaks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tprimat.plugins.megatron_core.memory_lines import (
    RankMemory,
    parse_allocator,
    parse_hip_usage,
    parse_nemo_memory,
    parse_theoretical,
    scan_memory,
)

LOGS = Path(__file__).parents[2] / "fixtures" / "logs"


def _lines(relative: str) -> list[str]:
    return (LOGS / relative).read_text(encoding="utf-8", errors="replace").splitlines()


def _first(lines: list[str], needle: str) -> str:
    return next(line for line in lines if needle in line)


def test_theoretical_footprint_with_and_without_the_activation_term():
    gh200 = _lines("megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log")
    full = parse_theoretical(_first(gh200, "Theoretical memory footprints"))
    assert (full.weight_and_optimizer_mib, full.activation_mib, full.total_mib) == (17861.66, 4864.68, 22726.34)
    fixstars = _lines(
        "megatron/mlm_core_r0.8.0_2024-09-03_gpt3-7b_fp16_1node8gpu_skipped-iters_fixstars-mdk-doc_excerpt.log"
    )
    weights_only = parse_theoretical(_first(fixstars, "Theoretical memory footprints"))
    assert weights_only.weight_and_optimizer_mib == 46038.57 and weights_only.activation_mib is None
    assert parse_theoretical(_first(gh200, "iteration")) is None


def test_allocator_report_with_rank_and_ansi_colours():
    primus = _lines(
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
    )
    peak = parse_allocator(_first(primus, "memory (MB)"))
    assert peak.rank == 0
    assert peak.max_allocated_gib == pytest.approx(121962.64 / 1024)
    assert peak.max_reserved_gib == pytest.approx(122700.00 / 1024)
    assert peak.allocated_gib == pytest.approx(72778.64 / 1024)


def test_rank_memory_reads_an_allocator_report_whose_words_hold_a_colour_code():
    """Reports are looked for only in lines holding their words: the allocator's as its reader sees them."""
    primus = _lines(
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
    )
    report = _first(primus, "memory (MB)")
    split = report.replace("memory (MB)", "memory\x1b[0m (MB)")
    assert "memory (MB)" not in split
    expected = parse_allocator(report)
    for line in (report, split):
        memory = RankMemory()
        assert memory.read_line(line) is not None
        (peak,) = memory.peaks()
        assert (peak.rank, peak.max_allocated_gib, peak.max_reserved_gib) == (
            expected.rank,
            expected.max_allocated_gib,
            expected.max_reserved_gib,
        )
    titan = (LOGS / "torchtitan" / "torchtitan_2026-02-24_pr2389_moe-gate-fp32_step4-5_excerpt.log").read_text(
        encoding="utf-8"
    )
    memory = RankMemory()
    assert [memory.read_line(line) for line in titan.splitlines()] == [None, None, None]  # "memory:" is none of them


def test_primus_hip_mem_usage_is_device_used_per_rank():
    lines = _lines("primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log")
    peak = parse_hip_usage(_first(lines, "rank-63/64"))
    assert peak.rank == 63 and peak.device_used_gib == 253.38 and peak.device_total_gib == 255.98


def test_nemo_step_line_peaks_are_bytes():
    lines = _lines("nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log")
    peak = parse_nemo_memory(lines[0])
    assert peak.max_allocated_gib == pytest.approx(62777982976 / 2**30)
    assert peak.max_reserved_gib == pytest.approx(64286097408 / 2**30)


def test_scan_keeps_each_ranks_largest_figures_and_names_the_rank_that_peaked():
    memory = scan_memory(_lines("megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"))
    assert [r.rank for r in memory.ranks] == [0, 1, 2, 3]
    assert memory.peak().rank == 3 and memory.peak().max_allocated_gib == pytest.approx(3081.67138671875 / 1024)
    gh200 = scan_memory(_lines("megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"))
    # After iteration 1 the peak is 14235.46 MiB, after iteration 2 it is 20306.24: the larger is kept.
    assert gh200.peak().max_allocated_gib == pytest.approx(20306.24 / 1024)
    assert gh200.theoretical.total_mib == 22726.34


ALL_LOGS = sorted(str(p.relative_to(LOGS)) for p in LOGS.rglob("*") if p.is_file() and p.suffix != ".md")


@pytest.mark.parametrize("block_bytes", [997, 1 << 24])
def test_the_file_scan_reads_blocks_and_finds_what_the_line_scan_finds(monkeypatch, block_bytes):
    import tprimat.plugins.megatron_core.memory_lines as logfacts

    monkeypatch.setattr(logfacts, "_BLOCK_BYTES", block_bytes)
    found = 0
    for relative in ALL_LOGS:
        memory = logfacts.scan_memory_file(LOGS / relative)
        assert memory == scan_memory(_lines(relative)), relative
        found += bool(memory.ranks)
    assert found >= 8


def test_hip_fields_the_byte_scan_cannot_read_go_to_the_text_scan(tmp_path):
    """Colour codes inside the values, a line without a rank tag: read as text, same figures."""
    import tprimat.plugins.megatron_core.memory_lines as logfacts

    real = _lines("primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log")
    line = _first(real, "rank-63/64")
    coloured = line.replace("usage_ratio: ", "usage_ratio: \x1b[1m").replace("GB/", "\x1b[0mGB/", 1)
    untagged = re.sub(r"\[(?:\x1b?\[[\d;]*m)*rank-63/64(?:\x1b?\[[\d;]*m)*\]", "", line)
    assert untagged != line
    text = "\n".join([line, coloured, untagged, *real]) + "\n"
    log = tmp_path / "mixed.log"
    log.write_text(text, encoding="utf-8")
    memory = logfacts.scan_memory_file(log)
    assert memory == scan_memory(text.splitlines())
    assert None in {r.rank for r in memory.ranks} and 63 in {r.rank for r in memory.ranks}


PARSERS = {
    "primus": "tprimat.plugins.amd_primus.parse:parse_primus",
    "megatron/rocm": "tprimat.plugins.amd_megatron.parse:parse_rocm_megatron",
    "megatron/mlm": "tprimat.plugins.nvd_megatron.parse:parse_megatron",
    "bridge": "tprimat.plugins.nvd_megatron.parse:parse_megatron",
}


def _parser_for(relative: str):
    import importlib

    for prefix, target in PARSERS.items():
        if relative.startswith(prefix):
            module, name = target.split(":")
            return getattr(importlib.import_module(module), name)
    return None


@pytest.mark.parametrize("chunked", [True, False], ids=["bytes", "text"])
def test_the_parser_reads_each_ranks_peaks_as_the_file_scan_does(chunked):
    """The log parser counts copies of a line from other ranks without reading them again: same peaks."""
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.megatron_core.stream import iter_events  # noqa: F401  (the parsers' engine)
    from tprimat.result.collect import EventCollector

    compared = 0
    for relative in ALL_LOGS:
        parse = _parser_for(relative)
        if parse is None:
            continue
        path = LOGS / relative
        lines = LogFile(path) if chunked else _lines(relative)
        if not chunked:
            lines = [line + "\n" for line in lines]
        collector = EventCollector().consume(parse(lines, relative))
        assert collector.rank_peaks == list(logfacts_scan(path).ranks), relative
        compared += bool(collector.rank_peaks)
    assert compared >= 5


def test_copies_from_other_ranks_count_for_their_rank(tmp_path):
    """An interleaved console log: each rank's copy of the iteration line gives that rank its peak."""
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.amd_primus.parse import parse_primus
    from tprimat.result.collect import EventCollector

    real = _lines("primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log")
    line = _first(real, "rank-63/64")
    copies = [line.replace("rank-63/64", f"rank-{rank}/64") for rank in (63, 5, 9)]
    log = tmp_path / "interleaved.log"
    log.write_text("\n".join(copies) + "\n", encoding="utf-8")
    collector = EventCollector().consume(parse_primus(LogFile(log), "interleaved.log"))
    assert collector.duplicates == 2  # two copies counted, not read again
    assert [(p.rank, p.device_used_gib) for p in collector.rank_peaks] == [(5, 253.38), (9, 253.38), (63, 253.38)]


def logfacts_scan(path):
    from tprimat.plugins.megatron_core.memory_lines import scan_memory_file

    return scan_memory_file(path)


def test_the_parser_and_the_rank_peaks_read_an_allocator_line_alike_also_in_the_cached_form():
    """Megatron-LM before PyTorch 1.4 printed ``cached``/``max cached`` (memory_cached()) for reserved memory."""
    from tprimat.plugins.megatron.logparse import MegatronLogParser

    lines = [
        "[Rank 3] (after 10 iterations) memory (MB) | allocated: 1570.5 | max allocated: 3869.25 | "
        "cached: 4020.0 | max cached: 4096.0",
        "[Rank 3] (after 20 iterations) memory (MB) | allocated: 1570.5 | max allocated: 3869.25",
    ]
    for line in lines:
        (record,) = MegatronLogParser("x.log").feed(line, 1)
        peak = parse_allocator(line)
        assert peak.rank == 3 and peak.allocated_gib == record.mem_allocated_gib == 1570.5 / 1024
        assert peak.max_allocated_gib == record.mem_max_allocated_gib == 3869.25 / 1024
        assert peak.max_reserved_gib == record.mem_max_reserved_gib
    assert parse_allocator(lines[0]).max_reserved_gib == 4096.0 / 1024
    assert parse_allocator(lines[1]).max_reserved_gib is None
    unreadable = "[Rank 0] (after 10 iterations) memory (MB) | allocated: n/a | max allocated: 1.0"
    assert parse_allocator(unreadable) is None
    (issue,) = MegatronLogParser("x.log").feed(unreadable, 7)
    assert issue.message == "unreadable memory line (allocated: not a number: 'n/a'); skipped"
