"""Memory lines of real logs: Megatron's prediction and allocator report, Primus hip usage, NeMo peaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.plugins.megatron.memory_lines import (
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


@pytest.mark.parametrize("block_bytes", [997, 1 << 24])
def test_the_file_scan_reads_blocks_and_finds_what_the_line_scan_finds(monkeypatch, block_bytes):
    import tprimat.plugins.megatron.memory_lines as logfacts

    monkeypatch.setattr(logfacts, "_BLOCK_BYTES", block_bytes)
    for relative in (
        "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
        "nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log",
    ):
        assert logfacts.scan_memory_file(LOGS / relative) == scan_memory(_lines(relative)), relative
