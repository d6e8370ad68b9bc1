"""Golden tests: every Megatron-LM and Megatron-Bridge fixture, checked by hand."""

from __future__ import annotations

import pytest

from tests.plugins.logfixtures import LOGS, collect, events_of, facts_of, timed
from tprimat.plugins.nvd_megatron.parse import parse_megatron

GOLDEN = [
    # file, records, (first iteration, step s, loss), (last iteration, step s, loss)
    ("megatron/cloudai-test_megatron-run_2026-01-16_3iter_snippet.log", 3, (5, 15.8, 13.4424), (7, 15.4485, 13.40574)),
    (
        "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
        20,
        (100, 2.946, 9.654853),
        (2000, 3.024, 3.732524),
    ),
    (
        "megatron/mlm_2024-04-06_mixtral8x7b_16xH100_issue756_iter71-73_excerpt.log",
        3,
        (71, 5.3616, 1.818812),
        (73, 5.8299, 1.798953),
    ),
    (
        "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
        15,
        (1, 5.3208, 10.48310),
        (15, 3.116, 8.372658),
    ),
    (
        "megatron/mlm_core_r0.8.0_2024-09-03_gpt3-7b_fp16_1node8gpu_skipped-iters_fixstars-mdk-doc_excerpt.log",
        10,
        (10, 13.0353, None),
        (100, 12.1043, 5.847192),
    ),
    (
        "bridge/cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log",
        1,
        (50, 9.089, 8.114214),
        (50, 9.089, 8.114214),
    ),
    ("bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt", 20, (1, 12.953, 10.56832), (20, 0.4492, 8.226928)),
]


@pytest.mark.parametrize(("name", "count", "first", "last"), GOLDEN, ids=[g[0].split("/")[1][:40] for g in GOLDEN])
def test_golden(name, count, first, last):
    collector = collect(parse_megatron, LOGS / name)
    records = timed(collector)
    assert len(records) == count
    for record, (iteration, step, loss) in ((records[0], first), (records[-1], last)):
        assert record.iteration == iteration
        assert record.step_time_s == pytest.approx(step)
        assert record.loss == (pytest.approx(loss) if loss is not None else None)
    assert collector.replaced == []
    assert collector.issue_count == 0


def test_oom_logs_have_no_iterations():
    for name in (
        "mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_stdout.log",
        "mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_stderr.log",
    ):
        assert timed(collect(parse_megatron, LOGS / "megatron" / name)) == []


def test_pre_2024_format_log_interval_memory_of_four_ranks():
    name = "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
    collector = collect(parse_megatron, LOGS / name)
    first = collector.records[0]
    assert first.covers_iterations == 100  # --log-interval 100 from the argument dump
    assert first.skipped == 15
    assert first.timestamp is None and "tflops_per_gpu" not in first.reported
    # Four ranks print their memory after iteration 100: the largest reading is kept, MiB -> GiB.
    assert first.mem_max_allocated_gib == pytest.approx(3081.67138671875 / 1024)
    assert first.mem_reserved_gib == pytest.approx(3398.0 / 1024)
    assert all(r.covers_iterations == 100 for r in collector.records)
    facts = {k: f.value for k, f in collector.facts.items()}
    assert facts["log_interval"] == 100 and facts["world_size"] == 4
    assert facts["fp16"] is True and facts["seq_length"] == 1024


def test_skipped_iterations_without_loss_are_kept_not_dropped():
    name = "megatron/mlm_core_r0.8.0_2024-09-03_gpt3-7b_fp16_1node8gpu_skipped-iters_fixstars-mdk-doc_excerpt.log"
    records = timed(collect(parse_megatron, LOGS / name))
    first = records[0]
    assert (first.iteration, first.skipped, first.loss, first.grad_norm) == (10, 10, None, None)
    assert first.lr == 0.0
    assert first.covers_iterations == 10  # an interval holds at least what it skipped
    assert first.reported["loss_scale"] == 8388608.0
    assert [r.skipped for r in records if r.skipped] == [10, 5, 1]
    assert records[1].covers_iterations == 10
    mem = [r for r in records if r.mem_max_allocated_gib is not None]
    assert [r.iteration for r in mem] == [20]
    assert mem[0].mem_max_allocated_gib == pytest.approx(75078.4326171875 / 1024)


def test_recent_megatron_memory_and_facts():
    name = "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
    events = events_of(parse_megatron, LOGS / name)
    facts = facts_of(events)
    assert (facts["global_batch_size"], facts["seq_length"], facts["world_size"]) == (80, 2048, 1)
    assert facts["train_iters"] == 15 and facts["bf16"] is True
    records = timed(collect(parse_megatron, LOGS / name))
    assert records[1].mem_max_reserved_gib == pytest.approx(20562.0 / 1024)
    assert records[0].timestamp == "2026-03-31T14:11:11.448457"
    assert records[0].reported["tflops_per_gpu"] == 204.6


def test_bridge_step_time_line_is_reported_beside_the_iteration():
    name = "bridge/cloudai-test_megatron-bridge_2025-12-22_step-time-line_snippet.log"
    (record,) = timed(collect(parse_megatron, LOGS / name))
    assert record.reported["bridge_step_time_s"] == 9.09
    # "GPU utilization: 663.5MODEL_TFLOP/s/GPU": the framework's TFLOP/s, where Megatron-LM's goes
    assert record.reported["tflops_per_gpu"] == 663.5
    assert "model_tflops_per_gpu" not in record.reported
    assert record.reported["load_balancing_loss"] == 1.0
    assert record.global_batch_size == 512 and record.consumed_samples == 25600


def test_bridge_glued_text_and_per_rank_memory():
    name = "bridge/mbridge_2025-08-29_llama_recipe_20iter_out1.txt"
    collector = collect(parse_megatron, LOGS / name)
    records = timed(collector)
    assert records[0].grad_norm == 20.435  # "> padded vocab ..." glued after the line
    assert records[0].mem_max_reserved_gib == pytest.approx(56088.0 / 1024)  # rank 0 > rank 1
    assert records[9].step_time_s == pytest.approx(9.1416)  # the 9 s outlier is kept


def test_a_megatron_log_never_seen_in_the_same_format():
    """A run written for this test (values varied by hand), not copied from a fixture."""
    text = """\
using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 4
------------------------ arguments ------------------------
  global_batch_size ............................... 256
  log_interval .................................... 5
  seq_length ...................................... 4096
  train_iters ..................................... 30
  world_size ...................................... 16
-------------------- end of arguments ---------------------
 [2025-11-02 09:14:07.120311] iteration        5/      30 | consumed samples:         1280 | elapsed time per iteration (ms): 6402.7 | throughput per GPU (TFLOP/s/GPU): 402.3 | learning rate: 7.500000E-05 | global batch size:   256 | lm loss: 1.021377E+01 | loss scale: 1.0 | grad norm: 4.118 | number of skipped iterations:   0 | number of nan iterations:   0 |
[Rank 0] (after 5 iterations) memory (MB) | allocated: 30512.5 | max allocated: 51200.25 | reserved: 55002.0 | max reserved: 55002.0
 [2025-11-02 09:14:38.533904] iteration       10/      30 | consumed samples:         2560 | elapsed time per iteration (ms): 6282.1 | throughput per GPU (TFLOP/s/GPU): 410.0 | learning rate: 1.500000E-04 | global batch size:   256 | lm loss: NAN | loss scale: 1.0 | grad norm: 3.007 | number of skipped iterations:   0 | number of nan iterations:   1 |
 [2025-11-02 09:15:09.917456] iteration       15/      30 | consumed samples:         3840 | elapsed time per iteration (ms): 6276.8 | throughput per GPU (TFLOP/s/GPU): 410.4 | learning rate: 1.496000E-04 | global batch size:   256 | lm loss: 8.900312E+00 | loss scale: 1.0 | grad norm: 1.554 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""  # noqa: E501
    events = list(parse_megatron(text.splitlines(True), "new.log"))
    from tprimat.result.collect import EventCollector

    collector = EventCollector().consume(events)
    records = timed(collector)
    assert [r.iteration for r in records] == [5, 10, 15]
    assert [r.covers_iterations for r in records] == [5, 5, 5]
    assert records[0].mem_max_allocated_gib == pytest.approx(51200.25 / 1024)
    assert records[1].loss != records[1].loss  # NaN kept
    assert records[1].reported["nan_iterations"] == 1.0
    assert records[2].step_time_s == pytest.approx(6.2768)
    assert facts_of(events)["world_size"] == 16


def test_a_forks_tokens_per_second_per_gpu_is_the_reported_column():
    # Pai-Megatron-Patch adds "tokens/sec/gpu: X" to the line: the framework's own figure, kept
    # where every backend keeps it, never as tprimat's computed tokens/s/GPU.
    name = "megatron/pai-megatron-patch_2025-10-24_qwen2.5-vl-7b_tokens-sec-gpu_iter493-500_doc_excerpt.log"
    records = timed(collect(parse_megatron, LOGS / name))
    assert [r.reported["tokens_per_s_per_gpu"] for r in records] == [11723.5, 11749.3, 11269.9]
    assert all("tokens_sec_gpu" not in r.reported for r in records)
    assert all(r.tokens_per_s_per_gpu is None for r in records)
    assert records[0].reported["tflops_per_gpu"] == 555.2 and records[0].step_time_s == pytest.approx(5.5929)
