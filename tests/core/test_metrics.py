import math
import statistics
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.compiled import EXACT, compiled_or_skip
from tprimat.result import compiled as result_compiled
from tprimat.result import metrics
from tprimat.result.builder import assemble_result
from tprimat.result.flops import flops_per_token
from tprimat.result.metrics import describe, percentile, sample_stdev, select_measured, with_throughput
from tprimat.result.schema import Hardware, IterationRecord, ResultConfig, RunInfo
from tprimat.settings.models import get_model


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 5) == pytest.approx(1.2)  # numpy.percentile(values, 5)
    assert percentile(values, 95) == pytest.approx(8.8)  # numpy.percentile(values, 95)


def test_describe_by_hand():
    stats = describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert stats.mean == 5.0 and stats.median == 4.5 and stats.min == 2.0 and stats.max == 9.0
    assert stats.cv == pytest.approx(math.sqrt(32 / 7) / 5)  # sample std (n-1) / mean
    assert describe([3.0]).cv is None
    assert describe([math.nan, None]) is None


_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_FIGURES = st.one_of(_FINITE, st.integers(-(10**30), 10**30), st.sampled_from([0.0, -0.0, 0.1, 1e-300, 5e-324, 1e308]))


@pytest.fixture(params=["compiled", "python"])
def sums_form(request, monkeypatch) -> str:
    """Run a test with the compiled exact sums of floats, then with the Python ones."""
    compiled = compiled_or_skip(EXACT).scaled_sums if request.param == "compiled" else None
    monkeypatch.setattr(result_compiled, "SCALED_SUMS", compiled)
    return request.param


@pytest.mark.usefixtures("sums_form")
@given(st.lists(_FIGURES, min_size=1, max_size=40), st.integers(1, 6))
def test_the_sample_standard_deviation_is_the_standard_library_s_bit_for_bit(distinct, repeats):
    values = distinct * repeats  # repeated values, as logged figures are, and the distinct ones
    if len(values) < 2:
        values = values * 2
    for sample in (values, distinct + [1.5]):
        assert _outcome(sample_stdev, sample) == _outcome(statistics.stdev, sample)


@pytest.mark.usefixtures("sums_form")
@given(
    st.lists(st.one_of(_FINITE, st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e308, 0.4316])), min_size=2, max_size=60)
)
def test_the_standard_deviation_of_floats_alone_is_the_standard_library_s_bit_for_bit(values):
    """Floats alone are summed over one denominator for them all (or, too wide apart, not)."""
    assert _outcome(sample_stdev, values) == _outcome(statistics.stdev, values)


_NEAR = st.floats(-1e6, 1e6, allow_nan=False).filter(lambda value: value == 0 or abs(value) > 1e-6)


@given(st.lists(st.one_of(_NEAR, st.sampled_from([0.0, -0.0, 2.0**-20, -(2.0**20), 13.3513])), max_size=80))
def test_the_compiled_sums_are_exact(values):
    """Floats within 2**60 of each other: the sum and the sum of squares, to the last bit."""
    total, square, scale = compiled_or_skip(EXACT).scaled_sums(values)
    assert Fraction(total, 2**scale) == sum(map(Fraction, values))
    assert Fraction(square, 4**scale) == sum(Fraction(value) ** 2 for value in values)


@pytest.mark.parametrize(
    "values", [[1.0, 2], [1.0, math.inf], [math.nan], [1e-300, 1e300], [2.0**70, 2.0**200], [True, 1.0]]
)
def test_the_compiled_sums_leave_other_batches_to_python(values):
    """Not floats alone, not finite, or magnitudes too far apart: None (the Python form sums them)."""
    assert compiled_or_skip(EXACT).scaled_sums(values) is None


def _outcome(function, values):
    """What ``function(values)`` returns, or the type of error it raises (a deviation past the
    largest float overflows in both)."""
    try:
        return function(values)
    except OverflowError as exc:
        return type(exc)


def test_the_sample_standard_deviation_rounds_an_inexact_root_correctly():
    assert sample_stdev([0.0, 1.0]) == math.sqrt(0.5)  # correctly rounded, as math.sqrt is
    assert sample_stdev([1.0, 1.0, 1.0]) == 0.0
    assert sample_stdev([1, 2, 3, 4]) == statistics.stdev([1, 2, 3, 4])
    assert sample_stdev([1e-320, 3e-320, 2e-320]) == statistics.stdev([1e-320, 3e-320, 2e-320])


def test_throughput_is_batch_times_sequence_over_time_and_world():
    records = with_throughput(
        [IterationRecord(iteration=2, step_time_s=2.0), IterationRecord(iteration=1, step_time_s=4.0)],
        global_batch_size=128,
        seq_length=8192,
        world_size=8,
    )
    assert [r.iteration for r in records] == [1, 2]
    assert records[0].tokens == 128 * 8192
    assert records[0].tokens_per_s_per_gpu == 128 * 8192 / 4.0 / 8
    assert records[1].tokens_per_s_per_gpu == 128 * 8192 / 2.0 / 8


def test_owned_records_are_filled_in_place_with_the_copies_values():
    def made():
        return [IterationRecord(iteration=2, step_time_s=2.0), IterationRecord(iteration=1, step_time_s=4.0)]

    sizes = {"global_batch_size": 128, "seq_length": 8192, "world_size": 8}
    owned = made()
    filled = with_throughput(owned, **sizes, owned=True)
    assert filled == with_throughput(made(), **sizes)
    assert [id(r) for r in filled] == [id(owned[1]), id(owned[0])]  # the same objects, sorted
    with pytest.raises(ValueError, match="tokens"):  # the check a copy's constructor makes
        with_throughput(made(), global_batch_size=-1, seq_length=8, world_size=1, owned=True)


def test_unknown_world_size_gives_no_throughput():
    (record,) = with_throughput(
        [IterationRecord(iteration=1, step_time_s=1.0)], global_batch_size=8, seq_length=16, world_size=None
    )
    assert record.tokens == 128 and record.tokens_per_s_per_gpu is None


def test_warmup_profiled_and_untimed_are_left_out_with_notes():
    records = [IterationRecord(iteration=i, step_time_s=1.0, profiled=(i == 5)) for i in range(1, 8)]
    records.append(IterationRecord(iteration=8))
    records[3] = IterationRecord(iteration=4, step_time_s=1.0, skipped=1)
    measured, notes = select_measured(records, warmup_iterations=2)
    assert [r.iteration for r in measured] == [3, 4, 6, 7]
    assert notes == [
        "warm-up: left out iterations 1-2",
        "profiled: left out iterations 5",
        "no step time: left out iterations 8",
        "optimizer skipped steps in measured iterations 4 (timed, kept)",
    ]


def test_warmup_counts_iterations_covered_by_interval_lines():
    records = [IterationRecord(iteration=i, step_time_s=1.0, covers_iterations=10) for i in (10, 20, 30)]
    measured, _ = select_measured(records, warmup_iterations=2)
    assert [r.iteration for r in measured] == [20, 30]


def test_zero_based_logs_drop_their_first_two():
    records = [IterationRecord(iteration=i, step_time_s=1.0) for i in range(0, 5)]
    measured, _ = select_measured(records, warmup_iterations=2)
    assert [r.iteration for r in measured] == [2, 3, 4]


def _run(**kw) -> RunInfo:
    return RunInfo(
        id="x",
        backend="nvd_megatron",
        platform="nvidia",
        framework="megatron-lm",
        model="llama3.1-8b",
        dataset="mock",
        status="completed",
        started_at=None,
        finished_at=None,
        tprimat_version="0.1.0",
        **kw,
    )


def _config(**kw) -> ResultConfig:
    values = dict(
        model="llama3.1-8b",
        seq_length=8192,
        global_batch_size=128,
        micro_batch_size=2,
        world_size=8,
        precision="bf16",
        methodology="iso",
    )
    values.update(kw)
    return ResultConfig(**values)


def test_assembled_summary_by_hand():
    steps = [20.0, 11.0, 10.0, 10.5, 9.5, 10.0, math.nan]
    records = [
        IterationRecord(
            iteration=i + 1,
            step_time_s=s if not math.isnan(s) else None,
            loss=12.0 - i,
            mem_max_reserved_gib=60.0 + i,
            reported={"tflops_per_gpu": 400.0 + i},
        )
        for i, s in enumerate(steps)
    ]
    records[-1] = IterationRecord(iteration=7, loss=math.nan)
    result = assemble_result(
        run=_run(), config=_config(), records=records, hardware=Hardware(device_name="NVIDIA H100 80GB HBM3")
    )
    s = result.summary
    assert s.measured_iterations == 4  # 3..6: warm-up 1-2, 7 untimed
    assert s.step_time_s.median == 10.0
    tokens = 128 * 8192
    assert s.tokens_per_s_per_gpu.median == pytest.approx(tokens / 10.0 / 8)
    assert s.tokens_per_s.median == pytest.approx(tokens / 10.0)
    per_token = flops_per_token(get_model("llama3.1-8b"), 8192)
    assert s.flops_per_token == per_token
    assert s.tflops_per_gpu == pytest.approx(per_token * tokens / 10.0 / 8 / 1e12)
    assert s.peak_tflops == 989.4 and "H100-SXM bf16" in s.peak_source
    assert s.mfu == pytest.approx(s.tflops_per_gpu / 989.4)
    assert s.mem_max_reserved_gib == 65.0  # peak over every record
    assert math.isnan(s.final_loss)  # the last loss is NaN and is reported as such
    assert s.reported["tflops_per_gpu"].median == pytest.approx(403.5)  # secondary, iterations 3-6


def test_no_mfu_without_a_known_device():
    records = [IterationRecord(iteration=i, step_time_s=1.0) for i in range(1, 6)]
    result = assemble_result(run=_run(), config=_config(), records=records)
    assert result.summary.tflops_per_gpu is not None
    assert result.summary.mfu is None and result.summary.peak_tflops is None
    assert any("device unknown" in note for note in result.provenance.notes)


def test_fp8_runs_use_the_fp8_peak():
    records = [IterationRecord(iteration=i, step_time_s=1.0) for i in range(1, 6)]
    result = assemble_result(
        run=_run(),
        config=_config(precision="fp8"),
        records=records,
        hardware=Hardware(device_name="AMD Instinct MI300X"),
    )
    assert result.summary.peak_tflops == 2614.9


def test_energy_per_token_only_when_every_measured_iteration_has_energy():
    records = [IterationRecord(iteration=i, step_time_s=1.0, energy_j=700.0 * 8) for i in range(1, 6)]
    result = assemble_result(run=_run(), config=_config(), records=records)
    assert result.summary.energy_per_token_j == pytest.approx(700.0 * 8 / (128 * 8192))
    records[3] = IterationRecord(iteration=4, step_time_s=1.0)
    assert assemble_result(run=_run(), config=_config(), records=records).summary.energy_per_token_j is None


def test_unknown_model_gives_no_flops_with_a_note():
    records = [IterationRecord(iteration=i, step_time_s=1.0) for i in range(1, 6)]
    result = assemble_result(run=_run(), config=_config(model="mixtral-8x7b"), records=records)
    assert result.summary.flops_per_token is None
    assert any("model architecture unknown" in n for n in result.provenance.notes)


def test_unknown_precision_gives_no_mfu_rather_than_a_guessed_peak():
    records = [IterationRecord(iteration=i, step_time_s=1.0) for i in range(1, 6)]
    result = assemble_result(
        run=_run(),
        config=_config(precision=None),
        records=records,
        hardware=Hardware(device_name="NVIDIA H100 80GB HBM3"),
    )
    assert result.summary.tflops_per_gpu is not None and result.summary.mfu is None
    assert any("precision unknown" in note for note in result.provenance.notes)


def test_mamf_utilisation_against_a_measured_ceiling():
    records = [IterationRecord(iteration=i, step_time_s=10.0) for i in range(1, 6)]
    ceiling = {"mamf_tflops": {"bf16": 650.0}, "path": "microbench-h100.json"}
    result = assemble_result(
        run=_run(),
        config=_config(),
        records=records,
        hardware=Hardware(device_name="NVIDIA H100 80GB HBM3"),
        ceiling=ceiling,
    )
    s = result.summary
    assert s.mamf_tflops == 650.0 and s.mamf_source == "microbench-h100.json"
    assert s.mamf_utilisation == pytest.approx(s.tflops_per_gpu / 650.0)
    assert s.mfu == pytest.approx(s.tflops_per_gpu / 989.4)  # the datasheet MFU stays


def test_no_ceiling_for_the_precision_is_noted():
    records = [IterationRecord(iteration=i, step_time_s=10.0) for i in range(1, 6)]
    result = assemble_result(
        run=_run(),
        config=_config(precision="fp8"),
        records=records,
        ceiling={"mamf_tflops": {"bf16": 650.0}, "path": "m.json"},
    )
    assert result.summary.mamf_utilisation is None
    assert any("no fp8 matmul ceiling" in n for n in result.provenance.notes)


def test_the_reported_figures_summarised_by_a_forked_child_are_those_summarised_here(monkeypatch):
    from tprimat.result.spill import ColdRecords

    originals = [
        IterationRecord(
            iteration=i,
            step_time_s=1.0 + (i % 5) / 10,
            tokens=4096,
            profiled=i == 20,
            reported={
                "tflops": 300.0 + i % 9,
                "count": i,
                "name": "x",
                "nan": math.nan,
                **({"odd": 1.5} if i % 2 else {}),
            },
        )
        for i in range(1, 60)
    ]
    options = dict(model=None, seq_length=4096, world_size=8, precision="bf16", device_name=None, warmup_iterations=3)
    here = metrics.summarize(originals, **options)
    forks = []
    real_fork = metrics.fork_call
    monkeypatch.setattr(metrics, "fork_call", lambda call, fork: forks.append(fork) or real_fork(call, fork=fork))
    monkeypatch.setattr(metrics, "FORKED_RECORDS", 10)
    forked = metrics.summarize(ColdRecords().finish(list(originals)), **options)
    assert forks == [True]
    assert forked == here
    assert set(forked[0].reported) == {"tflops", "count", "odd"}
    assert forked[1] == here[1] and any("profiled" in note for note in forked[1])  # notes made once, here
