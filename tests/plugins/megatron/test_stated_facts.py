"""Logs that state their workload or profiler window outside the parser's own lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.plugins.megatron.stated import profiled_iterations, scan_lines

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
P21 = LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
P57 = LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
FULL15 = LOGS / "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment()


def test_primus_command_line_and_rank_prefix_give_the_workload(registry):
    # Before: "no tokens/s: global batch, sequence length or world size unknown".
    result = parse_logs([P21], registry=registry).result
    assert result.config.seq_length == 128  # "--seq_length 128" on the primus-cli command line
    assert result.config.world_size == 8  # "[rank-0/8]"
    assert result.config.global_batch_size == 16
    notes = "\n".join(result.provenance.notes)
    assert "log states seq_length=128 (command line at" in notes
    assert "log states world_size=8 (rank prefix at" in notes
    per_gpu = [16 * 128 / 8 / r.step_time_s for r in result.iterations if r.step_time_s]
    assert result.summary.tokens_per_s_per_gpu is not None
    assert min(per_gpu) <= result.summary.tokens_per_s_per_gpu.median <= max(per_gpu)


def test_profiler_window_on_the_command_line_marks_iterations_profiled(registry):
    # "--profile True --use_pytorch_profiler True --profile_step_end 7 --profile_step_start 6"
    result = parse_logs([P57], registry=registry).result
    assert [r.iteration for r in result.iterations if r.profiled] == [5, 6, 7]
    assert "profiled: left out iterations 5-7" in result.provenance.notes
    assert result.summary.measured_iterations == 10 - 2 - 3  # warm-up 1-2, profiled 5-7


def test_profiler_window_with_profiling_off_marks_nothing(registry):
    # p21 states the same window with "--profile False"; the Megatron dump states 10-12, off.
    for path in (P21, FULL15):
        result = parse_logs([path], registry=registry).result
        assert not any(r.profiled for r in result.iterations)
        assert any("with profiling off" in n for n in result.provenance.notes)


def test_the_three_forms_are_read():
    lines = [
        "train pretrain --seq_length 128 --profile --profile-step-start 3 --profile_step_end 5\n",
        "{'global_batch_size': 64, 'use_pytorch_profiler': True}\n",
        "  world_size ...................................... 16\n",
    ]
    facts = {k: v.value for k, v in scan_lines(lines, "x.log").items()}
    assert facts == {
        "seq_length": 128,
        "profile": True,
        "profile_step_start": 3,
        "profile_step_end": 5,
        "global_batch_size": 64,
        "use_pytorch_profiler": True,
        "world_size": 16,
    }
    window, note = profiled_iterations(facts)
    assert window == (2, 3, 4, 5) and "torch profiler" in note


def test_megatron_bridge_config_dump_that_matches_the_run_gives_seq_and_profiler_window(registry):
    # 16 ConfigContainer dumps: recipe defaults (seq 8192, GBS 512, 1168251 iterations, no
    # profiling) and the run's own (seq 4096, GBS 8, 20 iterations, torch profiler 5-10).
    bridge = LOGS / "bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt"
    result = parse_logs([bridge], registry=registry).result
    assert result.config.seq_length == 4096  # not the recipe default 8192
    assert [r.iteration for r in result.iterations if r.profiled] == list(range(4, 11))
    # The 9 s outlier at iteration 10 is the profiler writing its trace.
    outlier = next(r for r in result.iterations if r.iteration == 10)
    assert outlier.step_time_s > 5 * result.summary.step_time_s.median
    notes = "\n".join(result.provenance.notes)
    assert "log states seq_length=4096 (Megatron-Bridge config dump at" in notes


def test_bridge_dumps_that_do_not_match_the_iteration_lines_are_not_used():
    bridge = LOGS / "bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt"
    from tprimat.plugins.megatron.stated import bridge_config_facts

    head = bridge.read_text(encoding="utf-8").splitlines()[:5000]
    found, note = bridge_config_facts(head, "b.txt", {"train_iters": 20, "global_batch_size": 16})
    assert found == {} and "none with train_iters 20 and global_batch_size 16" in note


def test_a_stated_profiler_window_beyond_any_trace_is_not_marked_and_costs_nothing():
    from tprimat.plugins.megatron.stated import MAX_PROFILED_ITERATIONS, profiled_iterations

    facts = {"profile": True, "profile_step_start": 6, "profile_step_end": 99_999_999_999_999_999}
    marked, note = profiled_iterations(facts)
    assert marked == () and "taken as not a window" in note
    facts["profile_step_end"] = 6 + MAX_PROFILED_ITERATIONS
    assert len(profiled_iterations(facts)[0]) == MAX_PROFILED_ITERATIONS + 2
