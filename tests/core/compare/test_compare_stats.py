"""Aggregation over runs: values checked against what the bootstrap must give by construction."""

from __future__ import annotations

import pytest

from tprimat.compare.stats import aggregate, bootstrap_median_ci, ratio_of_medians


def test_single_run_has_no_interval():
    agg = aggregate([6942.2])
    assert agg.single_run and agg.median == agg.min == agg.max == 6942.2
    assert agg.ci_low is None and agg.ci_high is None


def test_two_runs_interval_is_their_range():
    # Resampling two runs: (a,a) 1/4 -> a, (b,b) 1/4 -> b, mixed 1/2 -> (a+b)/2.  The 2.5th and
    # 97.5th percentiles therefore fall in the a and b blocks: the interval is [a, b].
    agg = aggregate([5000.0, 5200.0])
    assert agg.median == 5100.0
    assert (agg.ci_low, agg.ci_high) == (5000.0, 5200.0)
    assert agg.interval == "range of 2 runs"  # so it is never called a confidence interval


def test_only_an_interval_narrower_than_the_range_is_called_a_95_percent_ci():
    few = aggregate([10.0, 11.0, 12.5])
    assert few.interval == "range of 3 runs" and (few.ci_low, few.ci_high) == (few.min, few.max)
    many = aggregate([10.0, 11.0, 12.5, 9.5, 10.2, 10.8, 11.4, 9.9, 10.5, 10.1, 12.0, 9.7])
    assert many.interval == "95% CI" and many.min < many.ci_low <= many.ci_high < many.max
    ratio = ratio_of_medians([110.0, 112.0], [100.0, 101.0])
    assert ratio.interval == "range of the runs' ratios (2 vs 2 runs)"
    assert ratio.ci_low == pytest.approx(110.0 / 101.0) and ratio.ci_high == pytest.approx(112.0 / 100.0)


def test_interval_lies_within_range_and_is_reproducible():
    values = [10.0, 11.0, 12.5, 9.5, 10.2]
    first = bootstrap_median_ci(values)
    assert first == bootstrap_median_ci(values)
    assert min(values) <= first[0] <= 10.2 <= first[1] <= max(values)
    assert aggregate([float("nan"), 3.0]).n == 1  # non-finite values are not runs


def test_ratio_interval_two_by_two():
    # Each side's resampled median is low (1/4), mid (1/2) or high (1/4).  The extreme ratios
    # low/high and high/low each have probability 1/16 = 6.25% > 2.5%, so they are the bounds.
    top, bottom = [6900.0, 7000.0], [5000.0, 5200.0]
    ratio = ratio_of_medians(top, bottom)
    assert ratio.value == pytest.approx(6950.0 / 5100.0)
    assert ratio.ci_low == pytest.approx(6900.0 / 5200.0)
    assert ratio.ci_high == pytest.approx(7000.0 / 5000.0)


def test_ratio_with_a_single_run_side_has_no_interval():
    ratio = ratio_of_medians([6942.2], [5000.0, 5200.0])
    assert ratio.value == pytest.approx(6942.2 / 5100.0)
    assert ratio.ci_low is None and "single run for the compared system" in ratio.note
    assert ratio_of_medians([], [1.0]) is None


def test_platform_colours_are_stable_across_reports():
    from tprimat.compare.model import PLATFORM_COLOURS, assign_colours

    two = assign_colours([("8× MI300X · Primus", "amd"), ("8× H100-SXM · NeMo", "nvidia")])
    three = assign_colours(
        [("8× MI300X · Primus", "amd"), ("8× H100-SXM · NeMo", "nvidia"), ("8× H100-SXM · Megatron-LM", "nvidia")]
    )
    assert two["8× MI300X · Primus"] == three["8× MI300X · Primus"] == PLATFORM_COLOURS["amd"]
    assert len(set(three.values())) == 3
