"""Validation lines of the framework logs become evaluation records (real logs only)."""

from __future__ import annotations

import json
import operator

import pytest
from click.testing import CliRunner

from tests.plugins.logfixtures import LOGS, events_of
from tprimat.cli import cli
from tprimat.contract.records import EvalRecord
from tprimat.plugins.megatron.logparse import validation_record
from tprimat.plugins.nvd_megatron.parse import parse_megatron
from tprimat.plugins.nvd_nemo.parse import parse_nemo
from tprimat.result.convergence import STEP_CLOCK

MEGATRON = LOGS / "megatron" / "mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
NEMO = LOGS / "nemo" / "nemo2_2024-11_peft_lora_llama3-8b_cell20_finetune.log"


def evaluations(events):
    return [e for e in events if isinstance(e, EvalRecord)]


def test_megatron_validation_line():
    lines = MEGATRON.read_text().splitlines()
    line = next(x for x in lines if "validation loss at iteration 1000" in x)
    record = validation_record(line, "log:387")
    assert record == EvalRecord(iteration=1000, eval_loss=6.319978, source="log:387")
    end = next(x for x in lines if "validation loss at the end of training for val data" in x)
    assert validation_record(end, "log:413") is None  # no iteration: not a point on the curve


def test_megatron_log_yields_its_two_evaluations():
    found = evaluations(events_of(parse_megatron, MEGATRON))
    assert [(e.iteration, e.eval_loss) for e in found] == [(1000, 6.319978), (2000, 6.237787)]


def test_parse_gives_time_to_target_from_step_times():
    result = CliRunner().invoke(
        cli,
        [
            "parse",
            str(MEGATRON),
            "--backend",
            "nvd_megatron",
            "--json",
            "--set",
            "convergence.enabled=true",
            "--set",
            "convergence.target_log_perplexity=6.3",
            "--set",
            "training.seq_length=1024",
            "--set",
            "training.global_batch_size=8",
            "--set",
            "launch.nproc_per_node=4",
            "--set",
            "parallel.tensor=4",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    first, second = data["evaluations"]
    # consumed samples at iteration 1000 is 8000 in the log: iteration x global batch 8
    assert (first["samples"], first["tokens"]) == (8000, 8000 * 1024)
    columns = data["iterations"]  # one array per field of a record
    whole_run = sum(map(operator.mul, columns["step_time_s"], columns["covers_iterations"]))
    assert second["time_s"] == pytest.approx(whole_run) and 0 < first["time_s"] < second["time_s"]
    summary = data["convergence"]
    assert summary["reached"] and summary["samples_to_target"] == 16000
    assert summary["time_to_target_s"] == second["time_s"] and summary["clock"] == STEP_CLOCK


def test_nemo_val_loss_where_it_changes():
    found = evaluations(events_of(parse_nemo, NEMO))
    assert [(e.iteration, e.eval_loss) for e in found[:4]] == [(2, 0.3142), (4, 0.1524), (6, 0.1952), (8, 0.1372)]
    assert len({e.iteration for e in found}) == len(found)


def test_primus_mlperf_end_lines():
    from tprimat.contract.records import LogFact
    from tprimat.plugins.amd_primus.parse import parse_primus

    path = LOGS / "primus" / "primus_AMD-AGI-Primus_PR656_mlperf_llama3.1_8b_MI355X_2026-04-06_excerpt.log"
    events = events_of(parse_primus, path)
    (stop,) = evaluations(events)
    assert (stop.samples, stop.time_s, stop.eval_loss) == (172032, 5877.2, 3.292395)
    facts = {e.key: e.value for e in events if isinstance(e, LogFact)}
    assert facts["convergence_status"] == "success" and facts["run_time_s"] == 5877.2


def test_primus_mlperf_end_lines_after_the_start_up_part_of_a_long_log(tmp_path, monkeypatch):
    """During training only the iteration trigger is searched; an evaluation turns on the end lines'."""
    import tprimat.plugins.megatron_core.stream as stream
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.amd_primus.parse import parse_primus

    monkeypatch.setattr(stream, "STARTUP_BYTES", 1)  # the running triggers from the first chunk on
    training = LOGS / "primus" / "primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
    validation = next(
        line
        for line in (LOGS / "megatron" / "mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log")
        .read_text(encoding="utf-8")
        .splitlines(True)
        if "validation loss at iteration" in line
    )
    end = (LOGS / "primus" / "primus_AMD-AGI-Primus_PR656_mlperf_llama3.1_8b_MI355X_2026-04-06_excerpt.log").read_text(
        encoding="utf-8"
    )
    for with_evaluation in (True, False):
        log = tmp_path / f"run_{with_evaluation}.log"
        log.write_text(training.read_text(encoding="utf-8") + (validation if with_evaluation else "") + end)
        found = [e for e in parse_primus(LogFile(log, chunk_bytes=4096), log.name) if type(e).__name__ == "EvalRecord"]
        assert [e.samples for e in found if e.samples] == ([172032] if with_evaluation else [])
