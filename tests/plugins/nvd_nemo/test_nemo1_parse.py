"""NeMo 1 logs (DLLogger records on stdout, DLLogger JSON files) on real runs, and the step-timing window."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import collect, events_of, facts_of, timed
from tests.plugins.nvd_nemo.nemologs import GPT175B, LLAMA8B, LLAMA70B, QWEN, RESNET
from tprimat.contract.records import EvalRecord, LogFact, ParseIssue
from tprimat.plugins.nvd_nemo import BACKEND
from tprimat.plugins.nvd_nemo.parse import parse_nemo
from tprimat.result.collect import EventCollector
from tprimat.result.schema import IterationRecord


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines(True)


def _collect(lines, name="t.log") -> EventCollector:
    return EventCollector().consume(parse_nemo(lines, name))


def _notes(collector: EventCollector) -> list[str]:
    return [str(f.value) for k, f in sorted(collector.facts.items()) if k.startswith("note.")]


def _dll_means(path) -> list[float]:
    """train_step_timing as NeMo printed it in each DLL stdout record."""
    return [
        float(line.split("train_step_timing in s : ")[1].split()[0])
        for line in _lines(path)
        if "train_step_timing in s : " in line
    ]


# -- the DLL stdout records ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "first", "last"),
    [
        # (iteration, loss, lr, grad_norm, consumed_samples) at full precision, as the DLL records print them
        (
            LLAMA8B,
            (1, 11.026606559753418, 0.0, 8.775321006774902, 128),
            (20, 7.468292236328125, 1.4250000504034688e-06, 28.077587127685547, 2560),
        ),
        (
            LLAMA70B,
            (1, 11.162065505981445, 0.0, 36.295318603515625, 128),
            (20, 0.4783056378364563, 1.4250000504034688e-06, 4.150116443634033, 2560),
        ),
        (
            QWEN,
            (1, 12.339681625366211, 0.0, None, 256),
            (20, 12.159055709838867, 1.4250000504034688e-06, None, 5120),
        ),
    ],
    ids=["llama3-8b", "llama3-70b-cr", "qwen3-30b-no-grad-norm"],
)  # fmt: skip
def test_golden_values_are_the_dll_records_not_the_rounded_bar(path, first, last):
    records = timed(collect(parse_nemo, path))
    assert len(records) == 20
    for record, (iteration, loss, lr, grad_norm, consumed) in ((records[0], first), (records[-1], last)):
        assert (record.iteration, record.loss, record.lr, record.grad_norm) == (iteration, loss, lr, grad_norm)
        assert record.consumed_samples == consumed
    # The bar shows reduced_train_loss=11.00 for step 0 of the 8B run; the record 11.026606559753418.
    assert records[0].step_time_s == _dll_means(path)[0]


@pytest.mark.parametrize("path", [LLAMA8B, LLAMA70B, QWEN], ids=["llama3-8b", "llama3-70b-cr", "qwen3-30b"])
def test_five_step_means_are_undone_into_the_step_times_they_average(path):
    records = timed(collect(parse_nemo, path))
    times = [r.step_time_s for r in records]
    means = _dll_means(path)
    assert [r.reported["train_step_timing_in_s"] for r in records] == means  # NeMo's figure, kept
    for n, mean in enumerate(means):
        window = times[max(0, n - 4) : n + 1]
        assert sum(window) / len(window) == pytest.approx(mean, abs=1e-9)
    # Each step fits in the wall time between its record and the previous (the logger prints after the step).
    stamps = [datetime.fromisoformat(r.timestamp) for r in records]
    for before, after, seconds in zip(stamps, stamps[1:], times[1:], strict=False):
        assert seconds <= (after - before).total_seconds()


def test_the_8b_runs_step_times():
    records = timed(collect(parse_nemo, LLAMA8B))
    # Steps 2..5: the printed means fall from 12.8 to 7.7 s while every step took about 4.3 s.
    assert records[1].step_time_s == pytest.approx(2 * 12.817503690719604 - 21.367358684539795, abs=1e-9)
    assert [round(r.step_time_s, 3) for r in records[1:5]] == [4.268, 4.303, 4.314, 4.319]
    assert records[-1].step_time_s == pytest.approx(4.326806, abs=1e-6)
    collector = collect(parse_nemo, LLAMA8B)
    (note,) = [n for n in _notes(collector) if n.startswith("iterations ")]
    assert note.startswith("iterations 1-20: train_step_timing is NeMo's mean over the last 5 steps")
    assert "buffer_size 5 (" + LLAMA8B.name + ":495)" in note and "per-step times recovered" in note


def test_the_exp_manager_schema_defaults_are_not_the_runs_window():
    # The log also prints exp_manager's schema with 'buffer_size': 1: a default, not this run's value.
    assert any("'buffer_size': 1}" in line for line in _lines(LLAMA8B))
    assert "over the last 5 steps" in " ".join(_notes(collect(parse_nemo, LLAMA8B)))


def test_a_dll_record_glued_to_the_progress_bar_is_read():
    line = next(line for line in _lines(LLAMA8B) if "]DLL 2025-06-12 00:02:17" in line)
    assert line.startswith("Epoch 0: :  10%")
    (record,) = timed(_collect([line]))
    assert (record.iteration, record.loss, record.step_time_s) == (2, 11.026390075683594, 12.817503690719604)
    assert record.timestamp == "2025-06-12T00:02:17.820969"


def test_carriage_return_redraws_on_one_physical_line_are_read():
    (raw,) = [line for line in LLAMA70B.read_bytes().decode().split("\n") if "01:56:01.007935" in line]
    assert raw.count("\r") == 2 and raw.startswith("\rEpoch 0: :  10%")  # two bar redraws, then the record
    (record,) = timed(_collect([raw + "\n"]))
    assert record.iteration == 2 and record.loss == 11.159525871276855


def test_parameters_record_gives_the_model_config():
    facts = facts_of(events_of(parse_nemo, LLAMA70B))
    expected = {"global_batch_size": 128, "micro_batch_size": 1, "seq_length": 8192, "tensor_parallel": 2}
    assert {k: facts[k] for k in expected} == expected
    assert facts["pipeline_parallel"] == 4 and facts["virtual_pipeline_parallel"] == 5 and facts["fp8"] is True
    assert facts["world_size"] == 64  # Lightning's MEMBER: 1/64


# -- NeMo's TFLOP/s ------------------------------------------------------------------------


def test_nemos_tflops_is_kept_as_reported():
    collector = collect(parse_nemo, LLAMA8B)
    assert collector.fact("reported.tflops_per_gpu") == 1753.06
    assert collector.facts["reported.tflops_per_gpu"].source.endswith(":1072")


def test_minus_one_tflops_is_a_failure_never_a_value():
    collector = collect(parse_nemo, QWEN)
    assert collector.fact("reported.tflops_per_gpu") is None
    (note,) = [n for n in _notes(collector) if "TFLOPs" in n]
    assert "'TFLOPs per sec per GPU=-1.00'" in note and "calculation fails" in note
    assert "Failed to extract valid model name" in note  # the reason NeMo logged on the next line


# -- the step-timing window: when the means are kept ------------------------------------------


def _kept_note(collector: EventCollector) -> str:
    (note,) = [n for n in _notes(collector) if n.startswith("iterations ")]
    assert "kept" in note
    return note


def test_a_missing_step_record_keeps_the_means():
    lines = [line for line in _lines(LLAMA8B) if "- 7 reduced_train_loss" not in line]
    collector = _collect(lines)
    note = _kept_note(collector)
    assert "not undone: no step record between iterations 7 and 9" in note
    assert [r.step_time_s for r in timed(collector)] == [m for i, m in enumerate(_dll_means(LLAMA8B)) if i != 7]


def test_a_step_longer_than_its_records_interval_keeps_the_means():
    # Step 3's record written 1 s earlier: the undone step 3 would not fit in the time since step 2's.
    lines = [line.replace("00:02:22.127812", "00:02:21.127812") for line in _lines(LLAMA8B)]
    note = _kept_note(_collect(lines))
    assert "not undone: iteration 3 it gives 4.303445 s, longer than the 3.306843 s" in note


@pytest.mark.parametrize(
    ("setting", "replacement", "reason"),
    [
        ("      log_every_n_steps: 1\n", "      log_every_n_steps: 2\n", "trainer.log_every_n_steps is 2"),
        (
            "        buffer_size: 5\n",
            "        buffer_size: 5\n        reduction: max\n",
            "reduction is max, not a mean",
        ),
    ],
)
def test_settings_that_make_the_window_irreversible_keep_the_means(setting, replacement, reason):
    lines = [new for line in _lines(LLAMA8B) for new in (replacement.splitlines(True) if line == setting else [line])]
    assert lines != _lines(LLAMA8B)
    assert reason in _kept_note(_collect(lines))


def test_a_timer_reset_keeps_the_means():
    warning = (
        "[NeMo W 2025-06-12 00:02:30 nemo_logging:405] Timer `train_step_timing` was not correctly stopped, "
        "suggesting a possible issue. The timer will be reset for now.\n"
    )
    lines = _lines(LLAMA8B)
    at = next(i for i, line in enumerate(lines) if "- 4 reduced_train_loss" in line)
    assert "NeMo reset its step timer at t.log:" in _kept_note(_collect([*lines[:at], warning, *lines[at:]]))


def test_window_one_is_per_step():
    lines = [line.replace("buffer_size: 5", "buffer_size: 1") for line in _lines(LLAMA8B)]
    collector = _collect(lines)
    assert [r.step_time_s for r in timed(collector)] == _dll_means(LLAMA8B)
    assert any("is the time of each step (exp_manager.step_timing_kwargs.buffer_size 1" in n for n in _notes(collector))


def test_without_the_configuration_the_window_is_unknown_and_said_so():
    start = next(i for i, line in enumerate(_lines(LLAMA8B)) if "DLL " in line)
    collector = _collect(_lines(LLAMA8B)[start:])
    assert [r.step_time_s for r in timed(collector)] == _dll_means(LLAMA8B)
    note = _kept_note(collector)
    assert "the log prints no NeMo experiment configuration before these records" in note
    # The data shows it: step 2's printed 12.8 s cannot fit in the 4.27 s since step 1's record.
    assert "They are not all per-step times: at iteration 2 the value (12.8175 s)" in note


def test_a_restart_starts_a_new_window():
    collector = _collect(_lines(LLAMA8B) * 2)  # the same run twice: a fresh timer after the second configuration
    notes = [n for n in _notes(collector) if "per-step times recovered" in n]
    assert len(notes) == 2
    assert len(timed(collector)) == 20 and collector.duplicates == 20


# -- DLLogger JSON files -------------------------------------------------------------------


def test_a_nemo_dllogger_file_is_read():
    collector = collect(parse_nemo, GPT175B)
    records = timed(collector)
    assert len(records) == 50
    first, last = records[0], records[-1]
    assert (first.iteration, first.step_time_s, first.loss, first.lr) == (1, 107.35490417480469, 11.06281852722168, 0.0)
    assert first.grad_norm == 59.281246185302734 and first.consumed_samples == 2048
    assert (last.iteration, last.step_time_s, last.loss) == (50, 32.8956184387207, 7.972373008728027)
    assert last.lr == 3.8347825466189533e-05 and last.timestamp == "2024-09-28T01:53:37.883186"
    facts = {k: f.value for k, f in collector.facts.items()}
    assert facts["global_batch_size"] == 2048 and facts["seq_length"] == 2048 and facts["micro_batch_size"] == 1
    assert (facts["tensor_parallel"], facts["pipeline_parallel"], facts["context_parallel"]) == (4, 8, 1)
    assert facts["fp8"] is True and facts["bf16"] is True  # cfg/precision bf16-mixed
    assert "world_size" not in facts
    notes = " ".join(_notes(collector))
    assert "the number of GPUs (trainer.devices × trainer.num_nodes) is not in it; give --world-size" in notes
    assert "a DLLogger file does not record it (only the model config)" in notes
    assert "at iteration 2 the value (66.4215 s) is longer than the 25.6382 s" in notes


def test_a_dllogger_file_from_another_program_gives_nothing():
    events = events_of(parse_nemo, RESNET)
    assert not [e for e in events if isinstance(e, IterationRecord | LogFact)]


def test_a_cut_json_record_is_an_issue_not_a_crash():
    line = _lines(GPT175B)[5]
    events = list(parse_nemo([line[:200] + "\n"], "cut.json"))
    (issue,) = events
    assert isinstance(issue, ParseIssue) and issue.source == "cut.json:1"


def test_a_validation_record_is_an_evaluation():
    step = '{"timestamp": "1.0", "datetime": "x", "type": "LOG", "step": 10, "data": {"val_loss": 7.04}}'
    (evaluation,) = list(parse_nemo([f"DLLL {step}\n"], "v.json"))
    assert isinstance(evaluation, EvalRecord) and (evaluation.iteration, evaluation.eval_loss) == (10, 7.04)


REAL = [line for line in _lines(LLAMA8B) if "DLL " in line] + _lines(GPT175B)[:6]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(REAL), st.integers(0, 2000), st.text(max_size=12)),
        max_size=6,
    )
)
def test_mutated_records_never_raise(mutations):
    lines = [line[: cut % (len(line) + 1)] + junk for line, cut, junk in mutations]
    events = list(parse_nemo(lines, "m.log"))
    assert all(isinstance(e, IterationRecord | LogFact | ParseIssue | EvalRecord) for e in events)


# -- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "evidence"),
    [
        (LLAMA8B, "NeMo DLLogger step record at"),
        (QWEN, "NeMo DLLogger step record at"),
        (GPT175B, "NeMo DLLogger JSON step record at"),
    ],
)
def test_sniffed_as_nemo(path, evidence):
    match = BACKEND.sniff(_lines(path), path.name)
    assert match is not None and evidence in match.evidence


def test_another_programs_dllogger_file_is_not_sniffed():
    assert BACKEND.sniff(_lines(RESNET), RESNET.name) is None
