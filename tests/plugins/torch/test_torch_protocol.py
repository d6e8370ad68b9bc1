"""The torch trainer's log lines and their parser (no torch needed)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tprimat.contract.records import LogFact, ParseIssue
from tprimat.plugins.torch.protocol import format_info, format_iteration, parse_lines
from tprimat.result.schema import IterationRecord

LINE = (
    '[default0]:TPRIMAT_ITER {"iteration":3,"step_time_s":0.0412,"loss":7.9,"lr":0.0003,'
    '"grad_norm":0.8,"global_batch_size":4,"consumed_samples":12,"profiled":false,'
    '"timestamp":"2026-11-22T13:16:04.387352+00:00","mem_rss_gib":0.44}'
)


def test_a_prefixed_line_becomes_a_record_with_its_source():
    (record,) = parse_lines(["noise\n", LINE + "\n"], "logs/launcher.log")
    assert record == IterationRecord(
        iteration=3,
        step_time_s=0.0412,
        loss=7.9,
        lr=0.0003,
        grad_norm=0.8,
        global_batch_size=4,
        consumed_samples=12,
        profiled=False,
        timestamp="2026-11-22T13:16:04.387352+00:00",
        mem_rss_gib=0.44,
        source="logs/launcher.log:2",
    )
    assert record.tokens is None and record.tokens_per_s_per_gpu is None  # the core's job


def test_info_line_gives_facts_and_bad_lines_give_issues():
    info = format_info({"torch_version": "2.13.0", "world_size": 2, "collectives": None})
    events = list(
        parse_lines(
            [
                info,
                "TPRIMAT_ITER {not json",
                'TPRIMAT_ITER {"loss": 1}',
                'TPRIMAT_ITER {"iteration": 1, "step_time_s": 0}',
            ],
            "x",
        )
    )
    assert events[:2] == [
        LogFact(key="torch_version", value="2.13.0", source="x:1"),
        LogFact(key="world_size", value=2, source="x:1"),
    ]
    assert [type(e) for e in events[2:]] == [ParseIssue] * 3
    assert events[4].source == "x:4" and "step_time_s" in events[4].message


def test_non_finite_loss_is_kept():
    (record,) = parse_lines([format_iteration({"iteration": 1, "step_time_s": 0.1, "loss": math.nan})], "x")
    assert math.isnan(record.loss)


finite = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False)


@given(
    iteration=st.integers(min_value=0, max_value=10**9),
    step=finite,
    loss=finite,
    profiled=st.booleans(),
    prefix=st.sampled_from(["", "[default0]:", "[rank0]: "]),
)
def test_round_trip(iteration, step, loss, profiled, prefix):
    line = prefix + format_iteration({"iteration": iteration, "step_time_s": step, "loss": loss, "profiled": profiled})
    (record,) = parse_lines([line], "s")
    assert (record.iteration, record.step_time_s, record.loss, record.profiled) == (iteration, step, loss, profiled)


@given(st.lists(st.text(max_size=200), max_size=20))
def test_arbitrary_text_never_raises(lines):
    for event in parse_lines(lines, "s"):
        assert isinstance(event, IterationRecord | LogFact | ParseIssue)


def test_eval_lines_and_the_run_clock():
    from tprimat.contract.records import EvalRecord
    from tprimat.plugins.torch.protocol import format_eval

    line = format_eval({"iteration": 8, "samples": 64, "time_s": 2.5, "eval_loss": 5.18, "eval_sequences": 16})
    clock = format_info({"init_time_s": 2.7, "run_time_s": 3.0, "convergence_status": "success"})
    events = list(parse_lines(["[default0]:" + line, clock, 'TPRIMAT_EVAL {"samples": 8}'], "x"))
    assert events[0] == EvalRecord(iteration=8, samples=64, time_s=2.5, eval_loss=5.18, eval_sequences=16, source="x:1")
    assert [(e.key, e.value) for e in events[1:4]] == [
        ("init_time_s", 2.7),
        ("run_time_s", 3.0),
        ("convergence_status", "success"),
    ]
    assert isinstance(events[4], ParseIssue) and "eval_loss" in events[4].message
