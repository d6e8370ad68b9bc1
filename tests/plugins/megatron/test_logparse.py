"""The shared Megatron-family line parser: values, units, traps, and no exception on garbage."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.logfixtures import LOGS, facts_of, issues_of, records_of
from tprimat.contract.records import LogFact, ParseIssue, RankPeak
from tprimat.plugins.megatron.logparse import GIB_LABEL_NOTE, MegatronLogParser
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import LineError, parse_pair, parse_units
from tprimat.plugins.megatron_core.stream import iter_events
from tprimat.result.schema import IterationRecord

LINE = (
    " [2026-03-31 14:11:14.644654] iteration        2/      15 | consumed samples:          160 |"
    " elapsed time per iteration (ms): 4258.3 | throughput per GPU (TFLOP/s/GPU): 255.7 |"
    " learning rate: 3.000000E-04 | global batch size:    80 | lm loss: 1.048269E+01 |"
    " loss scale: 1.0 | grad norm: 3.332 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |\n"
)


def parse(lines: list[str], source: str = "t.log") -> list:
    return list(iter_events(MegatronLogParser(source), lines))


def test_one_line_every_field():
    (record,) = records_of(parse([LINE]))
    assert record.iteration == 2
    assert record.step_time_s == pytest.approx(4.2583)
    assert record.lr == pytest.approx(3.0e-4)
    assert record.loss == pytest.approx(10.48269)
    assert record.grad_norm == pytest.approx(3.332)
    assert record.global_batch_size == 80
    assert record.consumed_samples == 160
    assert record.skipped == 0
    assert record.timestamp == "2026-03-31T14:11:14.644654"
    assert record.source == "t.log:1"
    assert record.reported["tflops_per_gpu"] == pytest.approx(255.7)
    assert record.tokens_per_s_per_gpu is None  # the core computes it, never a parser


def test_nan_loss_and_zero_lr_are_kept():
    line = LINE.replace("1.048269E+01", "nan").replace("3.000000E-04", "0.000000E+00")
    (record,) = records_of(parse([line]))
    assert math.isnan(record.loss)
    assert record.lr == 0.0


def test_value_that_is_not_a_number_skips_the_line_with_its_place():
    line = LINE.replace("4258.3", "42x8.3")
    events = parse(["noise\n", line])
    assert records_of(events) == []
    (issue,) = issues_of(events)
    assert issue.source == "t.log:2"
    assert "elapsed time per iteration" in issue.message


def test_pairs_and_units():
    assert parse_pair("13100.0/13240.9") == (13100.0, 13240.9)
    assert parse_pair(" 615.5 (avg 615.5)") == (615.5, 615.5)
    assert parse_pair("909.4 ") == (909.4, None)
    assert parse_units("153.81GB/102.17GB/255.98GB/60.09%", 4, (0, 1, 2, 3)) == [153.81, 102.17, 255.98, 60.09]
    with pytest.raises(LineError):
        parse_units("153.81GB/102.17GB/255.9", 4, (0, 2))
    with pytest.raises(LineError):
        parse_pair("1_000")


def test_ansi_codes_with_and_without_escape_byte():
    assert strip_ansi("\x1b[32m20251202\x1b[0m][x") == "20251202][x"
    assert strip_ansi("[[32m20251202 06:56:28[0m][[36mrank-7/8[0m]") == ("[20251202 06:56:28][rank-7/8]")
    assert strip_ansi("[Rank 0] memory (MB) | [mem") == "[Rank 0] memory (MB) | [mem"


def test_memory_line_is_mib_recorded_as_gib():
    line = (
        "[Rank 0] (after 20 iterations) memory (MB) | allocated: 48465.275390625 | "
        "max allocated: 75078.4326171875 | reserved: 75682.0 | max reserved: 75682.0\n"
    )
    (record,) = records_of(parse([line]))
    assert record.iteration == 20
    assert record.mem_allocated_gib == pytest.approx(48465.275390625 / 1024)
    assert record.mem_max_reserved_gib == pytest.approx(75682.0 / 1024)
    assert record.step_time_s is None


def test_log_interval_from_argument_dump_and_from_consecutive_lines():
    args = ["  log_interval .................................... 10\n"]
    lines = [LINE.replace("iteration        2/", f"iteration       {n}/") for n in (10, 20, 40)]
    records = records_of(parse(args + lines))
    # With a known interval, a wider gap means lines are missing (iteration 30), not a longer span.
    assert [r.covers_iterations for r in records] == [10, 10, 10]
    # Without the argument dump the first line's span is unknown: 1, the next ones from the gap.
    records = records_of(parse(lines))
    assert [r.covers_iterations for r in records] == [1, 10, 20]


def test_line_wrapped_over_several_lines_is_joined():
    head, tail = LINE.split("elapsed time")
    middle, rest = ("elapsed time" + tail).split("lm loss")
    events = parse([head + "\n", middle + "\n", "lm loss" + rest])
    (record,) = records_of(events)
    assert record.step_time_s == pytest.approx(4.2583)
    assert record.loss == pytest.approx(10.48269)
    assert record.source == "t.log:1"


def test_interleaved_partial_lines_are_skipped_not_misread():
    first, second = LINE[:150], LINE[150:]
    events = parse([first + "[rank3]: NCCL WARN something\n", second])
    assert records_of(events) == []
    assert issues_of(events)[0].source == "t.log:1"


def test_cut_off_wrapped_line_at_end_is_reported():
    head = LINE.split("elapsed time")[0]
    events = parse([head + "\n"])
    assert records_of(events) == []
    assert "cut off" in issues_of(events)[0].message


def test_gib_label_note_and_device_memory():
    line = (
        " iteration 3/ 10 | elapsed time per iteration (ms): 909.4/909.4 | "
        "global batch size: 16"
        " | number of skipped iterations: 0 | number of nan iterations: 0 |"
        " hip mem usage/free/total/usage_ratio: 23.06GB/264.93GB/287.98GB/8.01%  |"
        " rocm mem usage/free/total/usage_ratio: 25.24GB/262.74GB/287.98GB/8.76% |"
        " rank-2 rocm max mem usage/usage_ratio: 25.86GB/8.98%\n"
    )
    events = parse([line])
    (record,) = records_of(events)
    assert record.mem_device_used_gib == 23.06
    assert record.mem_device_total_gib == 287.98
    assert record.reported["rocm_smi_max_mem_used_gib_all_ranks"] == 25.86
    assert facts_of(events)["note.gib_labelled_gb"] == GIB_LABEL_NOTE


def test_versions_become_facts():
    facts = facts_of(
        parse(
            [
                "0: RCCL version : 2.20.5-develop:c246e25\n",
                "0: ROCm version : 6.1.0.0-82-5fabb4c\n",
                "NCCL version 2.27.3+cuda12.9\n",
            ]
        )
    )
    assert facts["collectives"] == "RCCL 2.20.5-develop:c246e25"
    assert facts["rocm_version"] == "6.1.0.0-82-5fabb4c"


def test_parser_yields_each_record_as_soon_as_its_line_is_read():
    fed: list[str] = []

    def live():
        for n in (1, 2, 3):
            line = LINE.replace("iteration        2/", f"iteration        {n}/")
            fed.append(line)
            yield line

    stream = iter_events(MegatronLogParser("live"), live())
    for expected in (1, 2, 3):
        event = next(e for e in stream if isinstance(e, IterationRecord))
        assert event.iteration == expected
        assert len(fed) == expected  # nothing was read ahead


# -- properties: garbage never escapes as an exception ------------------------------------

REAL_LINES = [
    line
    for name in (
        "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
        "primus/primus_AMD-AGI-Primus-SaFE_Lens-telemetry-tests_legacy-trainer-lines_MI325X_2025-10to12.log",
        "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log",
    )
    for line in (LOGS / name).read_text(encoding="utf-8", errors="replace").splitlines(True)
    if "iteration" in line or "memory (MB)" in line
]
ITERATION_LINES = [line for line in REAL_LINES if "number of nan iterations" in line]
KINDS = (IterationRecord, LogFact, ParseIssue, RankPeak)
CORE_FIELDS = (
    "iteration",
    "step_time_s",
    "loss",
    "lr",
    "grad_norm",
    "global_batch_size",
    "consumed_samples",
    "skipped",
    "mem_device_used_gib",
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(REAL_LINES), st.integers(0, 2000), st.text(max_size=20), st.integers(0, 3)),
        max_size=8,
    )
)
def test_mutated_lines_never_raise(mutations):
    lines = []
    for line, position, junk, mode in mutations:
        position %= len(line) + 1
        if mode == 0:
            lines.append(line[:position] + junk + line[position:])
        elif mode == 1:
            lines.append(line[:position])
        elif mode == 2:
            lines.append(line[:position] + line[position + len(junk) :])
        else:
            lines.append(junk + "\n")
    events = parse(lines)
    assert all(isinstance(e, KINDS) for e in events)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ITERATION_LINES), st.integers(0, 2000))
def test_truncated_line_gives_the_same_numbers_or_nothing(line, cut):
    """A cut-off line may lose values, but never yields a different number."""
    (full,) = records_of(parse([line]))
    truncated = line[: cut % len(line)]
    for record in records_of(parse([truncated])):
        for name in CORE_FIELDS:
            value = getattr(record, name)
            assert value is None or value == getattr(full, name), name


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_binary_junk_never_raises(blob):
    text = blob.decode("utf-8", errors="replace")
    events = parse(text.splitlines(True))
    assert all(isinstance(e, KINDS) for e in events)


def test_a_memory_report_ends_start_up_on_a_rank_without_iteration_lines(tmp_path):
    """A pipeline rank that logs no iterations still prints its memory report once training runs.

    From that line on only the running triggers are searched, in bytes and in text
    alike: a start-up marker printed later is not read, and a range reader learns
    that the start-up lines are behind it (``LogFile.started``).
    """
    from tprimat.contract.logfile import LogFile
    from tprimat.plugins.amd_primus.parse import PrimusLogParser

    fixture = LOGS / "primus" / "primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
    rank0 = [line for line in fixture.read_text(encoding="utf-8").splitlines(True) if "rank-7/8" not in line]
    gpu = next(line for line in rank0 if "Detected GPU model" in line)
    first_memory = next(i for i, line in enumerate(rank0) if "memory (MB)" in line)
    before = rank0[:first_memory]
    assert gpu in before
    late = gpu.replace("MI355X", "MI300X")
    log = tmp_path / "debug.log"
    log.write_text("".join([*rank0, late]), encoding="utf-8")

    lines = LogFile(log)
    events = list(iter_events(PrimusLogParser("debug.log"), lines))
    text_events = list(iter_events(PrimusLogParser("debug.log"), log.read_text(encoding="utf-8").splitlines(True)))
    assert lines.started
    for found in (events, text_events):
        stated = [e.value for e in found if isinstance(e, LogFact) and e.key == "device_name_in_log"]
        assert stated == ["MI355X"]
        assert [r.iteration for r in records_of(found)] == [1, 2]

    start_up_only = tmp_path / "start.log"
    start_up_only.write_text("".join(before), encoding="utf-8")
    lines = LogFile(start_up_only)
    list(iter_events(PrimusLogParser("start.log"), lines))
    assert not lines.started


def test_segments_are_read_between_the_bars_in_order():
    """A segment without a ":" and an empty one add nothing; a value may hold ":"; the last of a key wins."""
    line = (
        " [2026-03-31 14:11:14.644654] iteration        3/      15 | consumed samples:          240 |"
        " a note without a colon | elapsed time per iteration (ms): 4000.0 | | custom figure: 7.5 |"
        " clock: 12:30:01 | custom figure: 8.5 | lm loss: 2.0 | number of skipped iterations:   0 |"
        " number of nan iterations:   0 |\n"
    )
    (record,) = records_of(parse([line]))
    assert (record.iteration, record.consumed_samples, record.step_time_s, record.loss) == (3, 240, 4.0, 2.0)
    assert record.reported == {"custom_figure": 8.5, "nan_iterations": 0.0}


@pytest.mark.parametrize(
    ("first", "old", "new", "problem"),
    [
        (1000, "1.048269E+01", "1_0.5", "lm loss: not a number: '1_0.5'"),
        (2000, "1.048269E+01", "\u0661\u0662", "lm loss: not a number: '\u0661\u0662'"),  # digits float() takes
        (3000, "         160 |", "1_60 |", "consumed samples: not an integer: '1_60'"),
        (4000, "1.048269E+01", "1.0.4", "lm loss: not a number: '1.0.4'"),
        (5000, "1.0 |", "one |", "loss scale: not a number: 'one'"),
    ],
)
def test_a_number_reads_the_same_once_its_values_keep_changing(first, old, new, problem):
    """Segments whose values keep changing are no longer cached but read straight away: same values, same problems."""
    # Values no other test prints: segments read before, by any parser, are looked up and not counted as new.
    numbers = range(first, first + 80)
    lines = [LINE.replace("1.048269E+01", f"{n / 7:.6E}").replace(" 160 |", f" {n} |") for n in numbers]
    bad = LINE.replace(old, new)
    assert bad != LINE
    events = parse([*lines, bad])
    records = records_of(events)
    assert [r.loss for r in records] == [float(f"{n / 7:.6E}") for n in numbers]
    assert [r.consumed_samples for r in records] == list(numbers)
    alone = issues_of(parse([bad]))
    later = issues_of(events)
    assert [i.message for i in alone] == [i.message for i in later]
    assert problem in later[0].message


# The two stamps an iteration line's prefix may hold, as documented: Megatron's closing the prefix,
# else Primus's own; the reader looks for Megatron's at the last "[" only.
_MEGATRON_STAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]\s*$")
_PRIMUS_STAMP = re.compile(r"\[(\d{4})(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})\]")


_PREFIX_PIECES = [
    "[2026-05-07 13:47:46.119046]",
    "[2026-05-07T13:47:46]",
    "[20260507 13:47:46]",
    "[2026-05-07 13:47",
    "[rank-7/8]",
    "[",
    "]",
    " ",
    "\t",
    "x",
]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_PREFIX_PIECES), max_size=8).map("".join))
def test_timestamp_is_the_stamp_the_patterns_find_anywhere(prefix):
    megatron, primus = _MEGATRON_STAMP.search(prefix), _PRIMUS_STAMP.search(prefix)
    if megatron is not None:
        expected: str | None = f"{megatron.group(1)}T{megatron.group(2)}"
    elif primus is not None:
        expected = "{}-{}-{}T{}".format(*primus.groups())
    else:
        expected = None
    line = f"{prefix} iteration 3/ 10 | elapsed time per iteration (ms): 900.0 | number of nan iterations: 0 |"
    (record,) = records_of(list(iter_events(MegatronLogParser("x.log"), [line])))
    assert record.timestamp == expected
