"""Golden tests over the Primus fixtures, and the Primus traps one by one."""

from __future__ import annotations

import pytest

from tests.plugins.logfixtures import LOGS, collect, events_of, facts_of, timed
from tprimat.plugins.amd_primus.parse import parse_primus
from tprimat.plugins.megatron.logparse import GIB_LABEL_NOTE
from tprimat.result.collect import EventCollector

SAFE = "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log"
P21 = "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
P57 = "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
PR656 = "primus/primus_AMD-AGI-Primus_PR656_mlperf_llama3.1_8b_MI355X_2026-04-06_excerpt.log"


def test_legacy_trainer_lines_ansi_and_duplicates():
    collector = collect(parse_primus, LOGS / SAFE)
    records = timed(collector)
    assert [r.iteration for r in records] == [126, 424, 4273, 4408, 12125]
    assert collector.duplicates == 2  # the same line with and without colour codes
    first, last = records[0], records[-1]
    assert first.step_time_s == pytest.approx(13.3728)
    assert first.loss == pytest.approx(6.548988e-03)
    assert first.reported["elapsed_time_per_iteration_ms_avg"] == 13364.7
    assert first.reported["tflops_per_gpu"] == 567.6
    assert first.reported["tokens_per_s_per_gpu"] == 9801.4
    assert first.reported["tokens_per_s_per_gpu_avg"] == 9807.3
    assert first.timestamp == "2025-12-02T09:12:08"
    assert last.step_time_s == pytest.approx(2.7013)
    assert last.loss == pytest.approx(2.352391)
    assert last.global_batch_size == 256
    assert records[1].reported["num_zeros"] == 960902016.0  # the 64-GPU line
    assert records[1].mem_device_used_gib == 253.38


def test_gib_values_with_gb_label_are_recorded_as_gib_and_noted():
    events = events_of(parse_primus, LOGS / SAFE)
    assert facts_of(events)["note.gib_labelled_gb"] == GIB_LABEL_NOTE
    record = timed(collect(parse_primus, LOGS / SAFE))[-2]
    assert (record.mem_device_used_gib, record.mem_device_total_gib) == (153.81, 255.98)


@pytest.mark.parametrize("name", [P21, P57])
def test_upstream_logging_with_primus_patches(name):
    collector = collect(parse_primus, LOGS / name)
    records = timed(collector)
    assert [r.iteration for r in records] == list(range(1, 11))
    # First two iterations: no "/avg" and no tokens; from the third on both are printed.
    for record in records[:2]:
        assert "tokens_per_s_per_gpu" not in record.reported
        assert "elapsed_time_per_iteration_ms_avg" not in record.reported
    assert "tokens_per_s_per_gpu_avg" in records[2].reported
    assert records[0].timestamp.startswith("2026-05-")  # Megatron's own timestamp
    assert all(r.mem_device_used_gib is not None for r in records)
    assert records[0].mem_max_allocated_gib is not None  # rank 0's memory line after iteration 1
    assert collector.issue_count == 0


def test_p57_values_and_facts():
    events = events_of(parse_primus, LOGS / P57)
    facts = facts_of(events)
    assert (facts["seq_length"], facts["world_size"], facts["global_batch_size"]) == (4096, 8, 8)
    records = timed(EventCollector().consume(events))
    assert records[0].step_time_s == pytest.approx(25.4127)
    assert records[-1].step_time_s == pytest.approx(0.4326)
    assert records[-1].loss == pytest.approx(9.224617)
    assert records[-1].lr == 0.0
    assert records[-1].reported["tokens_per_s_per_gpu"] == 9468.3
    assert records[-1].reported["rocm_smi_max_mem_used_gib_all_ranks"] == 170.79
    assert records[0].mem_max_allocated_gib == pytest.approx(121962.64 / 1024)


def test_p21_pipeline_parallel_values():
    records = timed(collect(parse_primus, LOGS / P21))
    assert records[0].step_time_s == pytest.approx(33.2418)
    assert records[0].loss == pytest.approx(11.89183)
    assert records[-1].step_time_s == pytest.approx(0.6357)
    assert records[-1].reported["tokens_per_s_per_gpu_avg"] == 360.1
    assert facts_of(events_of(parse_primus, LOGS / P21))["device_name_in_log"] == "MI355X"


def test_end_of_run_lines_without_iterations():
    assert timed(collect(parse_primus, LOGS / PR656)) == []


FORMAT_C = (
    "\x1b[32mINFO\x1b[0m [\x1b[32m20260923 15:34:02\x1b[0m][\x1b[36mrank-7/8\x1b[0m]"
    "\x1b[34m\x1b[1m[DEBUG]    \x1b[0m\x1b[34m\x1b[1m[---------------utils.py:425] : "
    "[2026-09-23 15:34:04.269468] iteration        {n}/      20 | consumed samples:  {c} | "
    "elapsed time per iteration (ms): {ms}/735.1 | compute per GPU (TFLOP/s/GPU): 612.4 (avg 598.0)"
    "  | tokens/s/GPU inst/harmonic mean: 25032.8/22288.1 | learning rate: 9.698463E-06 | "
    "global batch size:    16 | lm loss: 1.101008E+01 | loss scale: 1.0 | grad norm: 19.806 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 | "
    "hip mem usage/free/total/usage_ratio: 23.06GB/264.93GB/287.98GB/8.01%\x1b[0m\n"
)


def test_generation_c_line():
    lines = [FORMAT_C.format(n=4, c=64, ms="654.5")]
    (record,) = timed(EventCollector().consume(parse_primus(lines, "c.log")))
    assert record.step_time_s == pytest.approx(0.6545)
    assert record.reported["tflops_per_gpu"] == 612.4
    assert record.reported["tflops_per_gpu_avg"] == 598.0
    assert record.reported["tokens_per_s_per_gpu"] == 25032.8
    assert record.reported["tokens_per_s_per_gpu_harmonic_mean"] == 22288.1
    assert record.timestamp == "2026-09-23T15:34:04.269468"


def test_last_rank_line_forwarded_to_rank_zero_is_counted_once():
    line = FORMAT_C.format(n=5, c=80, ms="640.0")
    forwarded = line.replace("rank-7/8", "rank-0/8").replace("15:34:02", "15:34:03")
    collector = EventCollector().consume(parse_primus([line, forwarded], "console.log"))
    assert len(timed(collector)) == 1
    assert collector.duplicates == 1
    assert collector.replaced == []


def test_padded_levels_and_dash_prefixes_do_not_matter():
    base = FORMAT_C.format(n=6, c=96, ms="650.0")
    variant = base.replace("[DEBUG]    ", "[DEBUG ]").replace("[---------------utils.py", "[-utils.py")
    a = timed(EventCollector().consume(parse_primus([base], "a")))
    b = timed(EventCollector().consume(parse_primus([variant], "b")))
    assert a[0].step_time_s == b[0].step_time_s and a[0].loss == b[0].loss


def test_a_primus_log_never_seen_in_the_same_format():
    """A legacy-trainer run written for this test (values varied by hand)."""
    lines = []
    for n, ms, avg, loss in (
        (1, 24011.9, 24011.9, "1.192104E+01"),
        (2, 9120.4, 16566.2, "1.181333E+01"),
        (3, 9101.7, 14078.0, "1.150000E+01"),
    ):
        lines.append(
            f"[20260101 10:0{n}:00][rank-15/16][INFO ] [-----trainer.py:2561] : "
            f"iteration {n:>8}/ 300 "
            f"| consumed samples: {n * 256:>12} | elapsed time per iteration (ms): {ms}/{avg} | "
            "hip mem usage/free/total/usage_ratio: 171.20GB/84.78GB/255.98GB/66.88% | "
            "throughput per GPU (TFLOP/s/GPU): 390.2/380.0 | tokens per GPU (tokens/s/GPU): "
            "7200.1/7100.0 | learning rate: 1.000000E-05 | global batch size:   256 | "
            f"lm loss: {loss}"
            " | loss scale: 1.0 | grad norm: 1.250 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |\n"
        )
    records = timed(EventCollector().consume(parse_primus(lines, "new.log")))
    assert [r.iteration for r in records] == [1, 2, 3]
    assert records[1].step_time_s == pytest.approx(9.1204)
    assert records[2].loss == pytest.approx(11.5)
    assert records[2].consumed_samples == 768
    assert records[0].mem_device_used_gib == 171.20


def test_lines_read_as_text_find_the_triggers_an_evaluation_turns_on(tmp_path):
    """A live run's output is read line by line: the MLPerf end lines after an evaluation, which
    only an evaluation makes the parser look for once training has started, are read as the
    file reader reads them."""
    from tprimat.contract.logfile import LogFile
    from tprimat.contract.records import IterationBlock

    training = (LOGS / P21).read_text(encoding="utf-8").splitlines(keepends=True)
    end_lines = (LOGS / PR656).read_text(encoding="utf-8").splitlines(keepends=True)[2:]
    last = [line for line in training if "iteration " in line and "rank-7/8" in line][-1]
    head = last[: last.index("] : ") + 4]
    evaluation = f"{head}validation loss at iteration 10 | lm loss value: 3.300000E+00 | lm loss PPL: 2.7E+01 |\n"
    lines = [*training, evaluation, *end_lines]
    path = tmp_path / "mlperf.log"
    path.write_text("".join(lines), encoding="utf-8")

    as_text = [repr(event) for event in parse_primus(lines, "run.log")]
    from_file: list = []
    for event in parse_primus(LogFile(path), "run.log"):  # runs of iteration lines come as blocks
        from_file.extend(event.records() if isinstance(event, IterationBlock) else [event])
    assert as_text == [repr(event) for event in from_file]
    assert any("EvalRecord(iteration=None, samples=172032" in event for event in as_text)  # [EarlyStop]
    assert any("convergence_status" in event for event in as_text)  # [TimeToTrain]
