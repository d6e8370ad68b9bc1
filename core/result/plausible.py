"""Whether a record, or a block of records given as columns, can be a physical measurement.

A record that cannot be physical (:func:`implausible`: a step time that is not finite or
longer than a day, a negative or absurd count, a memory or energy figure that is negative or
not finite) is refused by the collector (:mod:`tprimat.result.collect`), whichever parser read
it, and noted as a skipped line: one bad number never becomes a result that looks valid.
:func:`plausible_columns` answers the same for a whole block, a column at a time.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, MAX_STEP_TIME_S, MEMORY_FIELDS, IterationRecord
from tprimat.result import compiled
from tprimat.settings.config import MAX_BATCH_SIZE, MAX_ITERATIONS, MAX_SEQ_LENGTH

_get_memory = operator.attrgetter(*MEMORY_FIELDS)

#: The most a memory figure may hold, in GiB: 2**20 GiB (1 PiB), above any device or host.
MAX_MEMORY_GIB = float(2**20)
#: The most energy one iteration may take, in J: 10**12 (a thousand 1 kW GPUs for a day use 8.64e10).
MAX_ENERGY_J = 1e12
_MAX_CONSUMED = MAX_ITERATIONS * MAX_BATCH_SIZE
_MAX_TOKENS = MAX_BATCH_SIZE * MAX_SEQ_LENGTH
#: Count fields of a record, and the least and greatest each may hold (the record's own
#: validators hold the least of iteration, covers_iterations and skipped).
_COUNT_LIMITS = (
    ("iteration", 0, MAX_ITERATIONS),
    ("covers_iterations", 1, MAX_ITERATIONS),
    ("skipped", 0, MAX_ITERATIONS),
    ("global_batch_size", 1, MAX_BATCH_SIZE),
    ("consumed_samples", 0, _MAX_CONSUMED),
    ("tokens", 0, _MAX_TOKENS),
)
_get_counts = operator.attrgetter(*(name for name, _, _ in _COUNT_LIMITS))
_NO_MEMORY = (None,) * len(MEMORY_FIELDS)


def implausible(record: IterationRecord) -> str | None:
    """Why ``record`` cannot be a physical measurement, or None when it can.

    Refused: a step time that is not finite or longer than :data:`MAX_STEP_TIME_S`; a count
    (iteration, iterations covered, skipped steps, global batch, consumed samples, tokens) that
    is negative, not whole or past its limit (the config's limits, :mod:`tprimat.settings.config`);
    a memory or energy figure that is negative, not finite or past its limit.  Losses, learning
    rates and gradient norms are kept as they are (a NaN loss is a real measurement), and so are
    the framework's own ``reported`` figures (secondary, never used for tprimat's numbers).
    """
    # Called for every record a log gives: the usual record passes a few comparisons, unrolled.
    step = record.step_time_s
    if step is not None and not 0 < step <= MAX_STEP_TIME_S:
        what = "longer than a day" if math.isfinite(step) else "not a finite number"
        return f"step time {step:g} s is {what}: not a physical step time"
    iteration, covers, skipped, batch, consumed, tokens = _get_counts(record)
    if (
        type(iteration) is not int
        or not iteration <= MAX_ITERATIONS
        or type(covers) is not int
        or not covers <= MAX_ITERATIONS
        or type(skipped) is not int
        or not skipped <= MAX_ITERATIONS
        or (batch is not None and (type(batch) is not int or not 0 < batch <= MAX_BATCH_SIZE))
        or (consumed is not None and (type(consumed) is not int or not 0 <= consumed <= _MAX_CONSUMED))
        or (tokens is not None and (type(tokens) is not int or not 0 <= tokens <= _MAX_TOKENS))
    ):
        for (name, least, greatest), value in zip(_COUNT_LIMITS, _get_counts(record), strict=True):
            if value is not None and (type(value) is not int or not least <= value <= greatest):
                return f"{name.replace('_', ' ')} {value!r} is not a count from {least} to {greatest}"
    memory = _get_memory(record)
    if memory != _NO_MEMORY:
        for name, value in zip(MEMORY_FIELDS, memory, strict=True):
            if value is not None and not 0 <= value <= MAX_MEMORY_GIB:
                return f"{name} {value!r} is not a memory figure from 0 to {MAX_MEMORY_GIB:g} GiB"
    energy = record.energy_j
    if energy is not None and not 0 <= energy <= MAX_ENERGY_J:
        return f"energy {energy!r} J is not an energy from 0 to {MAX_ENERGY_J:g} J"
    return None


_PLACE = {name: place for place, name in enumerate(ITERATION_FIELDS)}
_STEP_TIME = _PLACE["step_time_s"]
#: The types of a column of counts.
INTS = frozenset({int})
_NUMBERS = frozenset({int, float})
#: The checks of :func:`implausible` as limits on a block's columns: each checked column's place,
#: the least and greatest value it may hold, the types it may hold and whether it may hold None.
_COLUMN_LIMITS = (
    *(
        (_PLACE[name], least, greatest, INTS, name not in ("iteration", "covers_iterations", "skipped"))
        for name, least, greatest in _COUNT_LIMITS
    ),
    *((_PLACE[name], 0, MAX_MEMORY_GIB, _NUMBERS, True) for name in MEMORY_FIELDS),
    (_PLACE["energy_j"], 0, MAX_ENERGY_J, _NUMBERS, True),
)
_not_none = functools.partial(operator.is_not, None)
#: The least step time a record may hold: the least float above 0 (:func:`implausible` wants more than 0).
_LEAST_STEP = math.ulp(0.0)


def plausible_columns(columns: Sequence[Sequence[Any]]) -> bool:
    """Whether :func:`implausible` finds nothing to refuse in any record of an iteration block
    whose columns are ``columns``, and no record is a memory line alone, checked a column at a time.

    False also where the answer is not certain from the columns' types, least and greatest
    values (a bool, a None step time): such a block is taken a record at a time.
    """
    if not _within(columns[_STEP_TIME], _NUMBERS, _LEAST_STEP, MAX_STEP_TIME_S):
        return False
    return all(
        _within(columns[place], kinds, least, greatest, optional)
        for place, least, greatest, kinds, optional in _COLUMN_LIMITS
    )


def _within(
    values: Sequence[Any], kinds: frozenset[type], least: float, greatest: float, optional: bool = False
) -> bool:
    """Whether ``values`` (not empty) are all of ``kinds`` (a bool is not an int here), none NaN,
    and all from ``least`` to ``greatest``, or (``optional``) None: in one compiled pass where
    built (:data:`~tprimat.result.compiled.WITHIN`)."""
    within = compiled.WITHIN
    if within is not None and type(values) in _SEQUENCES:
        found = within(values, *_float_bounds(least, greatest), float in kinds, optional)
        if found is not None:
            return found
    return within_in_python(values, kinds, least, greatest, optional)


def within_in_python(
    values: Sequence[Any], kinds: frozenset[type], least: float, greatest: float, optional: bool = False
) -> bool:
    """:func:`_within` in Python (what the compiled ``within`` stands for)."""
    if optional:
        nones = values.count(None)
        if nones == len(values):
            return True
        if nones:
            values = list(filter(_not_none, values))
    types = set(map(type, values))
    if not types <= kinds:
        return False
    if float in types:
        total = sum(values)  # NaN if any is NaN (or if inf and -inf are, which min and max find)
        if total != total:
            return False
    return least <= min(values) and max(values) <= greatest


_SEQUENCES = frozenset({list, tuple})


@functools.cache
def _float_bounds(least: float, greatest: float) -> tuple[float, float]:
    """The bounds as the floats they are equal to (every bound here is one: checked once each)."""
    bounds = float(least), float(greatest)
    if bounds != (least, greatest) or not all(map(math.isfinite, bounds)):
        raise ValueError(f"bounds {least!r} and {greatest!r} are not finite floats exactly")
    return bounds
