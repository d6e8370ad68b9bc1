"""Every derived number, computed once, the same way for every backend.

Parsers and trainers deliver per-iteration measurements; this module turns
them into tokens, tokens/s/GPU, step-time statistics, TFLOP/s, MFU, memory
peaks and energy per token.  Headline throughput is

    tokens/s/GPU = global batch × sequence length / step time / world size

per iteration, summarised over the measured iterations (after warm-up and
profiled iterations are left out).  Percentiles use linear interpolation
between closest ranks (NumPy's default); CV is the sample standard deviation
(n − 1) over the mean.  See ``docs/metrics.md``.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import operator
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs

from tprimat.contract.records import MAX_STEP_TIME_S
from tprimat.result import compiled
from tprimat.result.column import Column, CountedOrder
from tprimat.result.flops import flops_per_token, formula_name
from tprimat.result.packing import figure_columns
from tprimat.result.peaks import lookup_peak
from tprimat.result.schema import DevicePartition, IterationRecord, Stats, Summary
from tprimat.result.spill import RecordSequence, record_field_blocks
from tprimat.settings.models import ModelSpec
from tprimat.workers import fork_call

_T = TypeVar("_T")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    below, above = sorted_values[low], sorted_values[high]
    found = below + (above - below) * fraction
    if math.isinf(found):  # the difference of two values near the largest float overflows
        found = below * (1 - fraction) + above * fraction
    return found


def sample_stdev(values: Iterable[float]) -> float:
    """``statistics.stdev(values)`` for two or more finite ints and floats: the same float.

    Both take the sample variance exactly, as a fraction, and return its square root
    correctly rounded; a correctly rounded result is unique, so the two agree bit for bit.
    This one sums each distinct value once, times its count: a logged figure repeats
    (a step time printed to a tenth of a millisecond, a loss scale, a memory figure), and
    the standard library spends most of its time turning every value into a fraction.
    Values are counted a batch at a time, so a long column is never held whole.
    """
    count = 0
    # Σx and Σx² as integers over each power-of-two denominator a value has.
    sums: dict[int, int] = defaultdict(int)
    squares: dict[int, int] = defaultdict(int)
    iterator = iter(values)
    while batch := list(itertools.islice(iterator, _STDEV_BATCH)):
        count += len(batch)
        if not _add_scaled(batch, sums, squares):
            _add_powers(Counter(batch), sums, squares)
    return _stdev_of_sums(count, sums, squares)


#: The bits of a float's significand: a finite float times 2**(53 - its frexp exponent) is an integer.
_SIGNIFICAND_BITS = 53


def _add_scaled(batch: list[Any], sums: dict[int, int], squares: dict[int, int]) -> bool:
    """:func:`_add_powers` of a batch of floats over one denominator for them all, in C (a
    column of distinct figures, a step time per iteration, has as many values as entries); False,
    adding nothing, where the batch holds other numbers or too wide a range for one denominator.

    Each float times 2**scale (exact: a power of two), with ``scale`` the bits below the point
    of the smallest magnitude, is an integer, exactly ``int`` of that float.  The compiled form
    (``_exact.c``, :data:`~tprimat.result.compiled.SCALED_SUMS`) sums those integers and their
    squares in fixed-size integers, where it is built; this function does it with Python's
    integers otherwise.
    """
    scaled_sums = compiled.SCALED_SUMS
    if scaled_sums is not None:
        found = scaled_sums(batch)
        if found is None:  # not floats alone, or magnitudes too far apart for the compiled form
            return False
        total, square, scale = found
        sums[1 << scale] += total
        squares[1 << scale] += square
        return True
    if set(map(type, batch)) != _FLOAT_ONLY:
        return False
    magnitudes = list(map(abs, batch))
    largest = max(magnitudes)
    scale = max(0, _SIGNIFICAND_BITS - math.frexp(min(filter(None, magnitudes)))[1]) if largest else 0
    if math.frexp(largest)[1] + scale > sys.float_info.max_exp:  # the largest would overflow
        return False
    numerators = list(map(int, map(math.ldexp, batch, itertools.repeat(scale))))
    sums[1 << scale] += sum(numerators)
    squares[1 << scale] += sum(map(operator.mul, numerators, numerators))
    return True


#: Values counted at a time by :func:`sample_stdev`.
_STDEV_BATCH = 65536
_FLOAT_ONLY = frozenset({float})


def _add_powers(counts: Mapping[float, int], sums: dict[int, int], squares: dict[int, int] | None) -> None:
    """Add Σx (and Σx², unless ``squares`` is None) of the values counted (each distinct value and
    how often it came) to ``sums`` (and ``squares``): integers by each power-of-two denominator a
    value has (few: the numerators stay small, so does the arithmetic on them)."""
    for value, times in counts.items():
        numerator, denominator = value.as_integer_ratio()
        sums[denominator] += times * numerator
        if squares is not None:
            squares[denominator] += times * numerator * numerator


def _over_largest(sums: Mapping[int, int], power: int = 1) -> tuple[int, int]:
    """The sum of :func:`_add_powers`' ``sums`` (``power`` 1) or ``squares`` (2), as
    ``(numerator, scale)``: numerator / 2**(power × scale), over the largest denominator 2**scale."""
    scale = max(sums).bit_length() - 1
    total = sum(part << power * (scale - denominator.bit_length() + 1) for denominator, part in sums.items())
    return total, scale


def _stdev_of_sums(count: int, sums: Mapping[int, int], squares: Mapping[int, int]) -> float:
    """The sample standard deviation of ``count`` values whose :func:`_add_powers` are given."""
    if count < 2:
        raise ValueError("the sample standard deviation needs two or more values")
    # variance = (n Σx² − (Σx)²) / (n (n − 1)) / 4**scale.
    total, scale = _over_largest(sums)
    square, _ = _over_largest(squares, 2)
    return _sqrt_of_fraction(count * square - total * total, count * (count - 1) << (2 * scale))


def _exact_sum(values: Iterable[float]) -> tuple[int, int]:
    """The exact sum of finite ints and floats, as ``(numerator, scale)``: numerator / 2**scale."""
    sums: dict[int, int] = defaultdict(int)
    iterator = iter(values)
    while batch := list(itertools.islice(iterator, _STDEV_BATCH)):
        _add_powers(Counter(batch), sums, None)
    if not sums:
        return 0, 0
    return _over_largest(sums)


def _exact_mean(values: Iterable[float], count: int) -> float:
    """``statistics.fmean(values)`` where a partial sum passes the largest float: the same float.

    fmean divides the correctly rounded sum (``math.fsum``) by the count; so does this, from the
    exact sum, whatever the order of the values.  When the sum itself is past the largest float,
    the mean (which never is) is the exact sum over the count, rounded once.
    """
    return _mean_of_sum(*_exact_sum(values), count)


def _mean_of_sum(numerator: int, scale: int, count: int) -> float:
    """:func:`_exact_mean` of ``count`` values whose exact sum is numerator / 2**scale."""
    try:
        return numerator / (1 << scale) / count
    except OverflowError:
        return numerator / (count << scale)


def _sqrt_of_fraction(numerator: int, denominator: int) -> float:
    """The square root of ``numerator / denominator`` (≥ 0), correctly rounded to a float.

    The integer square root of the fraction scaled by ``4**shift`` has at least 55 bits;
    its last bit is set when it is inexact (rounding to odd), so that the one rounding of
    the integer's conversion to a float is that of the exact root.
    """
    shift = max(0, (112 - numerator.bit_length() + denominator.bit_length()) // 2 + 1)
    scaled = numerator << (2 * shift)
    root = math.isqrt(scaled // denominator)
    if root * root * denominator != scaled:
        root |= 1
    return root / (1 << shift)


_NOT_NONE = functools.partial(operator.is_not, None)


def describe(values: Iterable[float | None]) -> Stats | None:
    """Mean, median, p5, p95, min, max and CV of the finite ``values`` (None if there are none)."""
    present = cast("Iterable[float]", filter(_NOT_NONE, values))
    finite: list[float] = sorted(filter(math.isfinite, present))
    return describe_sorted(finite, lambda: finite)


def describe_sorted(ordered: Sequence[float], values: Callable[[], Iterable[float]]) -> Stats | None:
    """The statistics of :func:`describe` from finite values given twice: ``ordered``, sorted
    (indexed only at the ranks the statistics need), and ``values()``, in any order (each call
    a new pass, for the mean and the standard deviation)."""
    if not ordered:
        return None
    count = len(ordered)
    try:
        mean = math.fsum(values()) / count  # statistics.fmean's value, without counting in Python
    except OverflowError:  # a partial sum past the largest float, in this order of the values
        mean = _exact_mean(values(), count)
    cv = None
    if count > 1 and mean != 0:
        try:
            cv = sample_stdev(values()) / mean
        except OverflowError:  # a spread past the largest float: no CV rather than a wrong one
            cv = None
    return _ranked_stats(ordered, mean, cv)


def describe_counted(counts: Mapping[float, int], ordered: Sequence[float] | None = None) -> Stats | None:
    """:func:`describe` of finite values given as each distinct value and how often it came
    (``ordered``: those values sorted, as :class:`~tprimat.result.column.CountedOrder` gives them),
    where equal values are written alike (all floats, their zeros of one sign, or all ints a float
    holds exactly): the same figures, from sums over the distinct values alone.

    The mean is the exact sum, rounded once, over the count: ``math.fsum``'s correctly rounded sum
    over the count, as :func:`describe_sorted` takes it; the CV is :func:`sample_stdev`'s over it.
    """
    if ordered is None:
        ordered = CountedOrder(counts)
    if not ordered:
        return None
    count = len(ordered)
    sums: dict[int, int] = defaultdict(int)
    squares: dict[int, int] = defaultdict(int)
    _add_powers(counts, sums, squares)
    mean = _mean_of_sum(*_over_largest(sums), count)
    cv = None
    if count > 1 and mean != 0:
        try:
            cv = _stdev_of_sums(count, sums, squares) / mean
        except OverflowError:  # a spread past the largest float: no CV rather than a wrong one
            cv = None
    return _ranked_stats(ordered, mean, cv)


def _ranked_stats(ordered: Sequence[float], mean: float, cv: float | None) -> Stats:
    """The statistics of :func:`describe` from the sorted values (the mean and CV given)."""
    count = len(ordered)
    middle = count // 2
    median = ordered[middle]
    if not count % 2:  # statistics.median's value, without sorting the sorted values again
        median = (ordered[middle - 1] + median) / 2
        if math.isinf(median):
            median = ordered[middle - 1] / 2 + ordered[middle] / 2
    return Stats(
        count=count,
        mean=mean,
        median=median,
        p5=percentile(ordered, 5),
        p95=percentile(ordered, 95),
        min=ordered[0],
        max=ordered[-1],
        cv=cv,
    )


def describe_column(column: Column | None) -> Stats | None:
    """:func:`describe` of a :class:`~tprimat.result.column.Column`'s values (None: no values)."""
    if column is None:
        return None
    counts = column.counts()
    if counts is not None:
        return describe_counted(counts, column.ordered())
    stats = describe_sorted(column.ordered(), column.values)
    column.drop_cache()  # described once: its blocks read are not needed again
    return stats


def with_throughput(
    records: Iterable[IterationRecord],
    *,
    global_batch_size: int | None,
    seq_length: int | None,
    world_size: int | None,
    owned: bool = False,
) -> Sequence[IterationRecord]:
    """Records sorted by iteration, with ``tokens`` and ``tokens_per_s_per_gpu`` filled in.

    Tokens per iteration are global batch × sequence length from the config,
    never a batch size a framework printed.  A record without a step time
    keeps a null throughput.  ``owned``: the records are the caller's alone (just
    parsed, shown to nothing else yet), so they are filled in where they are instead of
    copied: a log of 240 000 steps then holds one record per step, not two, and skips
    building 240 000 new ones.  Records kept in a file (a
    :class:`~tprimat.result.spill.RecordSequence`, in order already) are filled in as they
    are read back.
    """
    tokens = global_batch_size * seq_length if global_batch_size and seq_length else None
    if owned or isinstance(records, RecordSequence):
        field = attrs.fields(IterationRecord).tokens
        field.validator(None, field, tokens)  # type: ignore[misc]  # what a copy's __init__ would check
    if isinstance(records, RecordSequence):  # each pass reads new rows: they are filled in as read
        fill_columns = functools.partial(_filled_columns, tokens=tokens, world_size=world_size)
        return records.map_columns(fill_columns, reads=("step_time_s",), changes=("tokens", "tokens_per_s_per_gpu"))
    fill = functools.partial(_fill_throughput, tokens=tokens, world_size=world_size)
    ordered = sorted(records, key=lambda r: r.iteration)
    if owned:
        return list(map(fill, ordered))
    return [
        attrs.evolve(r, tokens=tokens, tokens_per_s_per_gpu=_per_gpu(r.step_time_s, tokens, world_size))
        for r in ordered
    ]


def _per_gpu(step_time_s: float | None, tokens: int | None, world_size: int | None) -> float | None:
    """tokens/s/GPU of one iteration: global batch × sequence length / step time / world size."""
    if tokens is not None and world_size and step_time_s:
        return tokens / step_time_s / world_size
    return None


def _fill_throughput(record: IterationRecord, *, tokens: int | None, world_size: int | None) -> IterationRecord:
    """``record`` itself, its ``tokens`` and ``tokens_per_s_per_gpu`` set (it is the caller's alone)."""
    object.__setattr__(record, "tokens", tokens)
    object.__setattr__(record, "tokens_per_s_per_gpu", _per_gpu(record.step_time_s, tokens, world_size))
    return record


def _filled_columns(columns: list[Sequence[Any]], *, tokens: int | None, world_size: int | None) -> list[Sequence[Any]]:
    """The ``tokens`` and ``tokens_per_s_per_gpu`` columns of :func:`_fill_throughput`'s records,
    for a block of records read back from a file, from its ``step_time_s`` column."""
    (steps,) = columns
    if tokens is None or not world_size:
        return [[tokens] * len(steps), [None] * len(steps)]
    if all(steps):  # every record timed: the whole column in C
        per_gpu = list(
            map(operator.truediv, map(operator.truediv, itertools.repeat(tokens), steps), itertools.repeat(world_size))
        )
        return [[tokens] * len(steps), per_gpu]
    return [[tokens] * len(steps), [tokens / step / world_size if step else None for step in steps]]


def follows(iterations: Sequence[int], covers: Sequence[int], previous: int) -> bool:
    """Whether a block's records (their ``iterations`` and ``covers_iterations`` columns, not
    empty) each cover one iteration, the one after the record before (the first: after
    ``previous``): checked over whole columns, without a step per record."""
    count = len(iterations)
    return (
        count > 0
        and iterations[0] == previous + 1
        and iterations[-1] == previous + count
        and covers.count(1) == count
        and list(iterations) == list(range(previous + 1, previous + count + 1))
    )


def _scan(blocks: Iterable[Sequence[Sequence[int]]]) -> tuple[int | None, list[tuple[int, int]]]:
    """The first iteration any record covers, and the iterations no record covers (see
    :func:`iteration_gaps`), from the ``iteration`` and ``covers_iterations`` columns of each
    block of records, in order.

    A record that says how many iterations it covers (a line logged every k iterations
    covers k) must start right after the one before; a record that says nothing (covers 1)
    is one log interval after the one before, the interval being the most common distance
    between such records (1 when every iteration is logged).  An iteration logged again
    (a restart from an earlier checkpoint) overlaps and is no gap.  One pass, so that the
    records a summary reads anyway (:class:`_Selection`) cost little more to check.
    """
    first: int | None = None
    previous = 0
    ones = 0  # consecutive records that say nothing and are one iteration apart
    jumps: list[tuple[int, int, int]] = []  # (previous, iteration, covers) past previous + 1
    for iterations, all_covers in blocks:
        if first is None and iterations:
            previous, first = iterations[0], iterations[0] - all_covers[0] + 1
            iterations, all_covers = iterations[1:], all_covers[1:]
        if follows(iterations, all_covers, previous):  # each one iteration after the one before
            ones += len(iterations)
            previous = iterations[-1]
            continue
        for iteration, covers in zip(iterations, all_covers, strict=True):
            start = iteration - covers + 1
            if start < first:  # type: ignore[operator]  # set by the first record
                first = start
            if iteration > previous:
                if start > previous + 1:
                    jumps.append((previous, iteration, covers))
                elif covers == 1:
                    ones += 1
                previous = iteration
    if first is None:
        return None, []
    distances = Counter(iteration - before for before, iteration, covers in jumps if covers == 1)
    if ones:
        distances[1] = ones
    interval = min(distances, key=lambda d: (-distances[d], d)) if distances else 1
    gaps = []
    for before, iteration, covers in jumps:
        last = iteration - (covers if covers > 1 else interval)
        if last > before:
            gaps.append((before + 1, last))
    return first, gaps


def iteration_gaps(records: Iterable[IterationRecord]) -> list[tuple[int, int]]:
    """``(first, last)`` of each range of iterations missing between the records (in iteration
    order): lines cut out of an excerpt, or lost when a job died and was restarted later on.

    With a log interval of k, consecutive records 100 and 200 (each covering 100 iterations,
    or both covering 1 and the log interval 100) leave nothing out; 100 and 400 leave out
    201-300 (k = 100, covers 1) or 101-300 (covers 100).  Figures break their lines there.
    """
    return _scan(record_field_blocks(records, "iteration", "covers_iterations"))[1]


def gaps_note(gaps: Sequence[tuple[int, int]]) -> str:
    """The provenance note naming the iterations no record covers."""
    spans = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in gaps)
    return (
        f"gap in the iterations: no record of iterations {spans} (an excerpt, or a restart that lost "
        "them); the statistics use the iterations recorded, figures leave the gap blank"
    )


class _Selection:
    """Which records count for statistics, and what was left out and why (see :func:`select_measured`)."""

    def __init__(self, records: Iterable[IterationRecord], *, warmup_iterations: int, exclude_profiled: bool) -> None:
        first, self.gaps = _scan(record_field_blocks(records, "iteration", "covers_iterations"))
        self.first = 0 if first is None else first
        self.warmup_end = self.first + warmup_iterations
        self.exclude_profiled = exclude_profiled
        self.warmup: list[int] = []
        self.profiled: list[int] = []
        self.untimed: list[int] = []
        self.implausible: list[int] = []
        self.skipped: list[int] = []

    def counts(self, record: IterationRecord) -> bool:
        """Whether ``record`` is measured; if not, it is noted as left out."""
        return self.counted(
            record.iteration, record.covers_iterations, record.profiled, record.step_time_s, record.skipped
        )

    def counted(self, iteration: int, covers: int, profiled: bool, step_time_s: float | None, skipped: int) -> bool:
        """:meth:`counts` of the record with these values."""
        if iteration - covers + 1 < self.warmup_end:
            self.warmup.append(iteration)
        elif self.exclude_profiled and profiled:
            self.profiled.append(iteration)
        elif step_time_s is None:
            self.untimed.append(iteration)
        elif not step_time_s <= MAX_STEP_TIME_S:  # not finite, or longer than a day
            self.implausible.append(iteration)
        else:
            if skipped:
                self.skipped.append(iteration)
            return True
        return False

    def counted_block(
        self,
        iterations: Sequence[int],
        covers: Sequence[int],
        profiled: Sequence[bool],
        steps: Sequence[float | None],
        skipped: Sequence[int],
    ) -> Sequence[int]:
        """The positions of the records of a block, given by its columns, that :meth:`counted` keeps.

        A block in which every record counts (past warm-up: nearly every block) is found by checks
        of whole columns, without a call per record.
        """
        if (
            iterations
            and min(map(operator.sub, iterations, covers)) + 1 >= self.warmup_end
            and not (self.exclude_profiled and any(profiled))
            and None not in steps
            and max(steps) <= MAX_STEP_TIME_S  # type: ignore[type-var,operator]  # no None, checked above
            and (total := sum(steps)) == total  # type: ignore[arg-type]  # not NaN: max is then sound
            and not any(skipped)
        ):
            return range(len(iterations))
        kept = map(self.counted, iterations, covers, profiled, steps, skipped)
        return list(itertools.compress(range(len(iterations)), list(kept)))

    def notes(self) -> list[str]:
        notes = [gaps_note(self.gaps)] if self.gaps else []
        if self.warmup:
            notes.append(f"warm-up: left out iterations {_ranges(self.warmup)}")
        if self.profiled:
            notes.append(f"profiled: left out iterations {_ranges(self.profiled)}")
        if self.untimed:
            notes.append(f"no step time: left out iterations {_ranges(self.untimed)}")
        if self.implausible:
            notes.append(
                f"step time not finite or longer than a day ({MAX_STEP_TIME_S:g} s), not physical: "
                f"left out iterations {_ranges(self.implausible)}"
            )
        if self.skipped:
            notes.append(f"optimizer skipped steps in measured iterations {_ranges(self.skipped)} (timed, kept)")
        return notes


def select_measured(
    records: Sequence[IterationRecord], *, warmup_iterations: int, exclude_profiled: bool = True
) -> tuple[list[IterationRecord], list[str]]:
    """The records that count for statistics, and notes saying what was left out and why.

    Warm-up is counted in iterations from the first one recorded: a record is
    warm-up if any iteration it covers lies within the first
    ``warmup_iterations`` (so a log line covering iterations 1–10 is warm-up
    when warm-up is 2).
    """
    selection = _Selection(records, warmup_iterations=warmup_iterations, exclude_profiled=exclude_profiled)
    measured = [record for record in records if selection.counts(record)]
    return measured, selection.notes()


def nothing_measured(summary: Summary | None) -> str | None:
    """Why a result measured nothing (no iteration left after warm-up, profiled, untimed and
    implausible ones are left out), or None when it measured something.

    Such a result is never ``completed``: a run that finished is ``failed``, a parsed log is
    ``partial`` (see ``docs/run.md`` and ``docs/parsing.md``).
    """
    if summary is not None and summary.measured_iterations > 0:
        return None
    warmup = summary.warmup_iterations if summary is not None else 0
    return (
        f"nothing measured: no iteration is left for the statistics after the {warmup} warm-up "
        "iterations and the profiled, untimed and implausible ones are left out (see the notes)"
    )


def _ranges(numbers: Iterable[int]) -> str:
    ordered = sorted(set(numbers))
    spans: list[str] = []
    start = previous = ordered[0]
    for n in ordered[1:] + [None]:
        if n is not None and n == previous + 1:
            previous = n
            continue
        spans.append(str(start) if start == previous else f"{start}-{previous}")
        if n is not None:
            start = previous = n
    return ", ".join(spans)


def mamf_utilisation(tflops_per_gpu: float | None, mamf_tflops: float | None) -> float | None:
    """Achieved model TFLOP/s per GPU ÷ the measured maximum achievable matmul TFLOP/s.

    A fraction (0.5 is half of the ceiling), like MFU.  None when either
    figure is missing, not finite, or the ceiling is not positive; a negative
    achieved figure is an error upstream and gives None too.
    """
    if tflops_per_gpu is None or mamf_tflops is None:
        return None
    if not (math.isfinite(tflops_per_gpu) and math.isfinite(mamf_tflops)):
        return None
    if mamf_tflops <= 0 or tflops_per_gpu < 0:
        return None
    return tflops_per_gpu / mamf_tflops


def _against_ceiling(
    ceiling: Mapping[str, Any] | None, tflops: float | None, precision: str | None, notes: list[str]
) -> dict[str, Any]:
    """MAMF and MAMF utilisation from a microbench summary, or nothing with a note."""
    if not ceiling:
        return {}
    mamf = (ceiling.get("mamf_tflops") or {}).get(precision or "")
    if not isinstance(mamf, int | float):
        notes.append(f"microbench {ceiling.get('path', '')} has no {precision} matmul ceiling")
        return {}
    utilisation = mamf_utilisation(tflops, float(mamf))
    return {
        "mamf_tflops": float(mamf),
        "mamf_utilisation": utilisation,
        "mamf_source": str(ceiling.get("path") or ceiling.get("created_at") or "microbench"),
    }


def _peak(values: Iterable[float | None], known: float | None = None) -> float | None:
    """The largest finite value, after ``known`` (the peak so far), as ``max`` picks it (the first of equal ones)."""
    present = _present(values)
    found: float | None
    if present and math.isfinite(sum(present)):  # no NaN nor infinity: max of them all, in C
        found = max(present)
    else:
        found = max((v for v in present if math.isfinite(v)), default=None)
    if found is None or (known is not None and not found > known):
        return known
    return found


def _present(values: Iterable[_T | None]) -> Sequence[_T]:
    """The values that are not None, in order (``values`` itself when none is)."""
    column = values if isinstance(values, list | tuple) else list(values)
    if None not in column:
        return column  # type: ignore[return-value]
    return list(itertools.compress(column, map(operator.is_not, column, itertools.repeat(None))))


class _Columns(dict[str, Column]):
    """Columns by name, in the order first added to."""

    def extend(self, name: str, values: list[Any]) -> None:
        """Add the numbers among ``values`` to the column ``name``."""
        column = self.get(name)
        if column is None:
            column = self[name] = Column()
        column.extend(values)


@attrs.define
class _Gathered:
    """What the summary is computed from, gathered in one pass over the records."""

    measured: int = 0
    figures: _Columns = attrs.Factory(_Columns)  # step times and throughput of the measured records
    peaks: dict[str, float | None] = attrs.Factory(
        lambda: dict.fromkeys(("mem_max_allocated_gib", "mem_max_reserved_gib", "mem_device_used_gib", "mem_rss_gib"))
    )
    all_energy: bool = True  # every measured record has a finite energy
    energy: Column = attrs.Factory(Column)  # of the measured records, while all_energy
    total_tokens: int = 0  # of the measured records, while all_energy
    final: tuple[int, float] | None = None  # the last iteration with a loss, and its loss


#: The fields the summary reads of each record (see :func:`_gather`).
_GATHERED = (
    "iteration",
    "covers_iterations",
    "profiled",
    "step_time_s",
    "skipped",
    "tokens_per_s_per_gpu",
    "tokens",
    "energy_j",
    "loss",
    "mem_max_allocated_gib",
    "mem_allocated_gib",
    "mem_max_reserved_gib",
    "mem_reserved_gib",
    "mem_device_used_gib",
    "mem_rss_gib",
)


def _gather(records: Iterable[IterationRecord], selection: _Selection) -> _Gathered:
    """One pass over ``records``' fields a block at a time, each field a column of the block
    (:func:`record_field_blocks`: the columns of records read back from a file are taken as read,
    no record or tuple is made): only numbers are kept."""
    found = _Gathered()
    peaks = found.peaks
    for columns in record_field_blocks(records, *_GATHERED):
        iterations, covers, profiled, steps, skipped, per_gpu, tokens, energies, losses = columns[:9]
        max_allocated, allocated, max_reserved, reserved, device, rss = columns[9:]
        del columns
        peaks["mem_max_allocated_gib"] = _peak(_either_column(max_allocated, allocated), peaks["mem_max_allocated_gib"])
        peaks["mem_max_reserved_gib"] = _peak(_either_column(max_reserved, reserved), peaks["mem_max_reserved_gib"])
        peaks["mem_device_used_gib"] = _peak(device, peaks["mem_device_used_gib"])
        peaks["mem_rss_gib"] = _peak(rss, peaks["mem_rss_gib"])
        found.final = _final_loss(iterations, losses, found.final)
        counted = selection.counted_block(iterations, covers, profiled, steps, skipped)
        if len(counted) < len(iterations):
            steps, per_gpu, tokens, energies = (
                tuple([column[i] for i in counted]) for column in (steps, per_gpu, tokens, energies)
            )
        found.measured += len(counted)
        found.figures.extend("step", list(steps))
        found.figures.extend("per_gpu", list(per_gpu))
        if all(tokens) and all(steps):  # every record has both: no test per record
            found.figures.extend("job", list(map(operator.truediv, tokens, steps)))
        else:
            found.figures.extend("job", [t / s for t, s in zip(tokens, steps, strict=True) if t and s])
        if found.all_energy and counted:
            found.all_energy = all(energy is not None and math.isfinite(energy) for energy in energies)
            if found.all_energy:
                found.energy.extend(list(energies))
                found.total_tokens += sum(filter(None, tokens))
    return found


#: The fields that decide whether a record is measured (see :meth:`_Selection.counted_block`).
_SELECTED = ("iteration", "covers_iterations", "profiled", "step_time_s", "skipped")

#: From this many records kept in a file, the framework's own figures (``reported``) are
#: summarised by a forked child while this process summarises the others.
FORKED_RECORDS = 32768


def _reported_stats(records: Iterable[IterationRecord], selection: _Selection) -> dict[str, Stats]:
    """The statistics of each numeric figure the framework reported, over the measured records
    (chosen by ``selection``, a copy of its own: its notes are those of :func:`_gather`'s)."""
    columns = _Columns()
    for iterations, covers, profiled, steps, skipped, reported in record_field_blocks(records, *_SELECTED, "reported"):
        counted = selection.counted_block(iterations, covers, profiled, steps, skipped)
        for name, values in figure_columns(reported).items():  # None where a record has none
            columns.extend(name, values if len(counted) == len(iterations) else [values[i] for i in counted])
    described = {key: describe_column(columns[key]) for key in sorted(columns)}
    return {key: stats for key, stats in described.items() if stats is not None}


def _either(value: float | None, otherwise: float | None) -> float | None:
    """``value``, or ``otherwise`` where it is None (a peak figure, else the current one)."""
    return value if value is not None else otherwise


def _either_column(values: Sequence[float | None], otherwise: Sequence[float | None]) -> Sequence[float | None]:
    """:func:`_either` of each pair of a block's two columns (one of them whole where it can be)."""
    if None not in values:
        return values
    if values.count(None) == len(values):
        return otherwise
    return list(map(_either, values, otherwise))


def _final_loss(
    iterations: Sequence[int], losses: Sequence[float | None], final: tuple[int, float] | None
) -> tuple[int, float] | None:
    """The last iteration with a loss, and its loss, after a block's columns (``final``: so far).

    Of the records with a loss, the one of the highest iteration (the later of equal ones)
    replaces ``final`` unless that one's iteration is higher.
    """
    if None in losses:
        kept = list(map(operator.is_not, losses, itertools.repeat(None)))
        iterations, losses = list(itertools.compress(iterations, kept)), list(itertools.compress(losses, kept))
    if not iterations:
        return final
    highest = max(iterations)
    if final is not None and highest < final[0]:
        return final
    position = len(iterations) - 1 - iterations[::-1].index(highest)
    return highest, losses[position]  # type: ignore[return-value]  # None left out above


def summarize(
    records: Sequence[IterationRecord],
    *,
    model: ModelSpec | None,
    seq_length: int | None,
    world_size: int | None,
    precision: str | None,
    device_name: str | None,
    warmup_iterations: int,
    exclude_profiled: bool = True,
    tensor_parallel: int = 1,
    ceiling: Mapping[str, Any] | None = None,
    partition: DevicePartition | None = None,
) -> tuple[Summary, list[str]]:
    """The run's summary from its (throughput-filled) records, plus notes for provenance.

    ``ceiling`` is a ``tprimat microbench`` summary of the same device: when it
    has a maximum achievable matmul figure for the run's precision, the
    summary reports achieved TFLOP/s against it too ("MAMF utilisation").

    Reads ``records`` twice (the first iteration, then everything else), keeping numbers
    only, so that records read back from a file (:mod:`tprimat.result.spill`) are never
    all in memory; a long figure's numbers go to a file too (:mod:`tprimat.result.column`).
    """
    selection = _Selection(records, warmup_iterations=warmup_iterations, exclude_profiled=exclude_profiled)
    many = isinstance(records, RecordSequence) and len(records) >= FORKED_RECORDS
    with fork_call(functools.partial(_reported_stats, records, copy.deepcopy(selection)), fork=many) as reported_call:
        found = _gather(records, selection)
        reported = reported_call.result()
    measured, figures, peaks = found.measured, found.figures, found.peaks
    notes = selection.notes()
    step = describe_column(figures.get("step"))
    per_gpu = describe_column(figures.get("per_gpu"))
    job = describe_column(figures.get("job"))
    if measured and per_gpu is None:
        notes.append("no tokens/s: global batch, sequence length or world size unknown")

    per_token = tflops = peak = mfu = None
    formula = peak_source = None
    if model is not None and seq_length:
        per_token = flops_per_token(model, seq_length, tensor_parallel=tensor_parallel)
        formula = formula_name(causal=True)
        if per_gpu is not None:
            tflops = per_token * per_gpu.median / 1e12
            lookup = lookup_peak(device_name, precision, partition) if precision else None
            if lookup is None:
                notes.append("precision unknown: no MFU (the peak depends on the dtype)")
            elif lookup.tflops is not None:
                peak = lookup.tflops
                peak_source = f"{lookup.device_key} {lookup.dtype} (peaks table {lookup.table_version})"
                mfu = tflops / peak
            else:
                notes.append(lookup.note or "no peak: no MFU")
    elif model is None:
        notes.append("model architecture unknown: no FLOPs, TFLOP/s or MFU")

    energy = None
    if measured and found.all_energy and found.total_tokens:
        try:
            energy = math.fsum(found.energy.values()) / found.total_tokens
        except OverflowError:
            notes.append("energy per token left out: the energies add up past the largest float")

    summary = Summary(
        warmup_iterations=warmup_iterations,
        measured_iterations=measured,
        step_time_s=step,
        tokens_per_s=job,
        tokens_per_s_per_gpu=per_gpu,
        flops_per_token=per_token,
        flops_formula=formula,
        tflops_per_gpu=tflops,
        peak_tflops=peak,
        peak_source=peak_source,
        mfu=mfu,
        **_against_ceiling(ceiling, tflops, precision, notes),
        mem_max_allocated_gib=peaks["mem_max_allocated_gib"],
        mem_max_reserved_gib=peaks["mem_max_reserved_gib"],
        mem_device_used_gib=peaks["mem_device_used_gib"],
        mem_rss_gib=peaks["mem_rss_gib"],
        energy_per_token_j=energy,
        final_loss=found.final[1] if found.final is not None else None,
        reported=reported,
    )
    return summary, notes
