"""Golden tests over the NeMo fixtures, and the NeMo traps one by one."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS, collect, events_of, facts_of, issues_of, timed
from tprimat.contract.records import LogFact, ParseIssue
from tprimat.plugins.nvd_nemo.parse import parse_nemo
from tprimat.result.collect import EventCollector
from tprimat.result.schema import IterationRecord

CELL14 = "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"
CELL22 = "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log"
CELL46 = "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell46_preemption_sigterm_step4.log"
PEFT = "nemo/nemo2_2024-11_peft_lora_llama3-8b_cell20_finetune.log"
AWS = "nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log"
RUN12 = "nemo/cloudai-test_nemo-run_12iter_snippet.log"
LAUNCHER = "nemo/cloudai-test_nemo-launcher_2025-03-04_perf_metrics_utils_snippet.log"

GOLDEN = [
    (CELL14, 20, (1, 10.31, 11.03), (20, 7.592, 11.03)),
    (CELL22, 20, (1, 10.51, 11.03), (20, 7.592, 11.03)),
    (CELL46, 3, (1, 10.43, 11.03), (3, 7.599, 11.03)),
    (PEFT, 20, (1, None, 1.956), (20, None, 0.2591)),
    (AWS, 3, (75, 8.768, 11.87), (77, 8.756, 11.87)),
    (RUN12, 12, (18, 12.64, 11.03), (29, 12.65, 11.03)),
    (LAUNCHER, 50, (1, 11.85, None), (50, 2.13, None)),
]


@pytest.mark.parametrize(("name", "count", "first", "last"), GOLDEN, ids=[g[0].split("/")[1][:40] for g in GOLDEN])
def test_golden(name, count, first, last):
    records = timed(collect(parse_nemo, LOGS / name))
    assert len(records) == count
    for record, (iteration, step, loss) in ((records[0], first), (records[-1], last)):
        assert record.iteration == iteration
        assert record.step_time_s == (pytest.approx(step) if step is not None else None)
        assert record.loss == (pytest.approx(loss) if loss is not None else None)


def test_zero_based_steps_and_first_line_without_consumed_samples():
    records = timed(collect(parse_nemo, LOGS / CELL14))
    assert records[0].iteration == 1 and records[0].consumed_samples is None
    # consumed_samples = iteration × global batch once steps are counted from 1.
    assert all(r.consumed_samples == r.iteration * 512 for r in records[1:])
    assert facts_of(events_of(parse_nemo, LOGS / CELL14))["world_size"] == 8


def test_restart_repeats_steps_and_the_later_run_is_kept():
    collector = collect(parse_nemo, LOGS / CELL22)
    assert sorted(set(collector.replaced)) == [11, 12, 13, 14, 15, 16]  # global steps 10-15
    records = {r.iteration: r for r in timed(collector)}
    assert records[11].step_time_s == pytest.approx(10.26)  # first step after the restart
    assert records[16].step_time_s == pytest.approx(7.593)
    assert records[11].source.endswith(":763")


def test_key_is_global_step_when_the_batch_counter_repeats():
    # Under gradient accumulation (and across epochs) Lightning's batch index repeats.
    lines = [
        "Training epoch 0, iteration 0/3 | lr: 1e-05 | global_batch_size: 64 | global_step: 4 "
        "| reduced_train_loss: 9.1 | train_step_timing in s: 1.249e+00 | consumed_samples: 320\n",
        "Training epoch 1, iteration 0/3 | lr: 1e-05 | global_batch_size: 64 | global_step: 5 "
        "| reduced_train_loss: 9.0 | train_step_timing in s: 1.251 | consumed_samples: 384\n",
    ]
    collector = EventCollector().consume(parse_nemo(lines, "ga.log"))
    assert [r.iteration for r in timed(collector)] == [5, 6]
    assert collector.replaced == []
    assert timed(collector)[0].step_time_s == pytest.approx(1.249)


def test_tflops_and_memory_bytes():
    record = timed(collect(parse_nemo, LOGS / AWS))[0]
    assert record.reported["tflops_per_gpu"] == 865.7
    assert record.mem_max_reserved_gib == pytest.approx(64286097408 / 2**30)
    assert record.mem_max_allocated_gib == pytest.approx(62777982976 / 2**30)


def test_preempted_run_and_val_loss():
    assert facts_of(events_of(parse_nemo, LOGS / CELL46))["train_iters"] == 20
    records = timed(collect(parse_nemo, LOGS / PEFT))
    assert records[2].reported["val_loss"] == pytest.approx(0.3142)


def test_nan_loss_is_kept_and_bad_values_are_reported():
    lines = [
        "Training epoch 0, iteration 3/9 | lr: 0 | global_batch_size: 8 | global_step: 3 | "
        "reduced_train_loss: nan | train_step_timing in s: 2.5 | consumed_samples: 32\n",
        "Training epoch 0, iteration 4/9 | lr: 1e-4 | global_batch_size: 8 | global_step: 4 | "
        "reduced_train_loss: 2.1 | train_step_timing in s: 2.x | consumed_samples: 40\n",
    ]
    events = list(parse_nemo(lines, "n.log"))
    (record,) = [e for e in events if isinstance(e, IterationRecord)]
    assert math.isnan(record.loss) and record.lr == 0.0
    (issue,) = issues_of(events)
    assert issue.source == "n.log:2"


REAL = (LOGS / CELL22).read_text(encoding="utf-8").splitlines(True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([line for line in REAL if "Training epoch" in line]),
            st.integers(0, 400),
            st.text(max_size=12),
        ),
        max_size=6,
    )
)
def test_mutated_lines_never_raise(mutations):
    lines = [line[: cut % (len(line) + 1)] + junk for line, cut, junk in mutations]
    events = list(parse_nemo(lines, "m.log"))
    assert all(isinstance(e, IterationRecord | LogFact | ParseIssue) for e in events)


def test_a_nemo_log_never_seen_in_the_same_format():
    """A NeMo 2 run written for this test (values varied by hand, fields in another order)."""
    text = """\
[NeMo I 2025-09-14 08:01:55 nemo_logging:393] Experiments will be logged at /results/llama31_8b
pretrain/0 [default0]:Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16
pretrain/0 [default0]:Training epoch 0, iteration 0/49 | lr: 1.5e-07 | global_batch_size: 256 | global_step: 0 | reduced_train_loss: 12.07 | train_step_timing in s: 21.93 | TFLOPS_per_GPU: 402.1
pretrain/0 [default0]:Training epoch 0, iteration 1/49 | lr: 3e-07 | global_batch_size: 256 | global_step: 1 | reduced_train_loss: 12.06 | train_step_timing in s: 6.012 | TFLOPS_per_GPU: 1.466e+03 | consumed_samples: 512
pretrain/0 [default0]:Training epoch 0, iteration 2/49 | consumed_samples: 768 | lr: 4.5e-07 | global_batch_size: 256 | global_step: 2 | max_memory_allocated: 60129542144 | reduced_train_loss: 11.98 | train_step_timing in s: 5.987 | TFLOPS_per_GPU: 1.472e+03
"""  # noqa: E501
    events = list(parse_nemo(text.splitlines(True), "new.log"))
    records = timed(EventCollector().consume(events))
    assert [r.iteration for r in records] == [1, 2, 3]
    assert records[1].reported["tflops_per_gpu"] == 1466.0
    assert records[2].consumed_samples == 768 == records[2].iteration * 256
    assert records[2].mem_max_allocated_gib == 56.0
    assert records[0].step_time_s == pytest.approx(21.93)
    assert facts_of(events)["world_size"] == 16


# -- step lines in the forms NeMo 2 prints are read in one match; the general reader is the reference --


def _general_reading(lines):
    """The events of ``lines`` when no line is taken for a known form (every line read segment by segment)."""
    from tprimat.plugins.nvd_nemo import parse

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parse, "_known_form", lambda match: None)
        return [repr(e) for e in parse_nemo(lines, "k.log")]


def test_every_fixture_step_line_is_in_a_known_form_and_reads_as_the_general_reader_reads_it():
    from tprimat.plugins.nvd_nemo import parse

    for name in (
        CELL14,
        CELL22,
        CELL46,
        PEFT,
        AWS,
        RUN12,
        "nemo/nemo2_2025-08-26_e5-finetune_1gpu_starting-with-1-processes_cell16.log",
    ):
        lines = (LOGS / name).read_text(encoding="utf-8").splitlines(True)
        for line in lines:
            match = parse._LINE_RE.search(line.rstrip()) if "Training epoch" in line else None
            if match is not None:
                assert parse._known_form(match) is not None, line
        assert [repr(e) for e in parse_nemo(lines, "k.log")] == _general_reading(lines), name


#: Number texts a step line may hold: plain, odd, and not numbers at all.
_NUMBERS = st.one_of(
    st.from_regex(r"\A[-+]?[0-9]{1,4}(\.[0-9]{0,4})?([eE][-+]?[0-9]{1,3})?\Z"),
    st.sampled_from(["nan", "inf", "-inf", "1.2.3", ".", "+.5", "1_0", "\u0663.5", "0", "-0", "1e400", "5120.0", "x"]),
)
#: Counts as NeMo prints them (global batch, step, consumed samples), and some that it does not.
_COUNTS = st.one_of(st.integers(0, 10**7).map(str), st.sampled_from(["5120.0", "12.5", "-3", "+7", "\u0665", "1_0"]))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(_NUMBERS, min_size=6, max_size=6),
            st.lists(_COUNTS, min_size=4, max_size=4),
            st.lists(st.booleans(), min_size=7, max_size=7),
            st.sampled_from(["", "\x1b[32m", "nemo/0 [default0]:", "a Training epoch 1, iteration 2/3 x "]),
            st.sampled_from(["\n", "  \n", "\t\n", " | note\n", " | other_key: 3\n"]),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_known_forms_read_as_the_general_reader_reads_them(shapes):
    """Lines built like NeMo's (optional segments, odd numbers, prefixes, endings): the same events."""
    lines = []
    for numbers, counts, present, prefix, ending in shapes:
        lr, reserved, allocated, loss, seconds, tflops = numbers
        first, batch, step, samples = counts
        val_loss = tflops if present[6] else loss
        segments = [f" lr: {lr} |"]
        if present[0]:
            segments.append(f" consumed_samples: {first} |")
        segments.append(f" global_batch_size: {batch} | global_step: {step} |")
        if present[1]:
            segments.append(f" max_memory_reserved: {reserved} | max_memory_allocated: {allocated} |")
        segments.append(f" reduced_train_loss: {loss}")
        for shown, segment in zip(
            present[2:5],
            (f"train_step_timing in s: {seconds}", f"TFLOPS_per_GPU: {tflops}", f"consumed_samples: {samples}"),
            strict=True,
        ):
            if shown:
                segments.append(f" | {segment}")
        if present[5]:
            segments.append(f" | val_loss: {val_loss}")
        lines.append(f"{prefix}Training epoch 0, iteration 3/9 |{''.join(segments)}{ending}")
    assert [repr(e) for e in parse_nemo(lines, "k.log")] == _general_reading(lines)
