"""The workload a run was told (global batch, sequence length, world size) against what its log says.

A log whose batch or sequence length differs from the workload gives another
throughput than the one computed from the workload, so both ``tprimat run``
(live output) and ``tprimat parse`` (finished logs) check the two with these
functions and name both values and their sources.
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Collection, Iterable
from typing import Any, Protocol

import attrs

from tprimat.contract.records import IterationRecord
from tprimat.errors import TprimatError
from tprimat.result.spill import record_field_blocks
from tprimat.settings.config import INT_LIMITS, MAX_BATCH_SIZE, MAX_PARALLEL, MAX_PROCS_PER_NODE, MAX_SEQ_LENGTH

#: The most GPUs a run may have: the config's limits on nodes and processes per node.
MAX_WORLD_SIZE = MAX_PARALLEL * MAX_PROCS_PER_NODE

#: The greatest value of each size a workload holds or a log may state (the config's limits).
SIZE_LIMITS: dict[str, int] = {
    "seq_length": MAX_SEQ_LENGTH,
    "global_batch_size": MAX_BATCH_SIZE,
    "micro_batch_size": MAX_BATCH_SIZE,
    "world_size": MAX_WORLD_SIZE,
    "tensor_parallel": MAX_PARALLEL,
    "warmup_iterations": INT_LIMITS["benchmark.warmup_iterations"][1],
}


def _within_limit(_: Any, attribute: Any, value: int | None) -> None:
    """A workload value from the command line: a whole number up to its limit (never past it)."""
    if value is None:
        return
    least = 0 if attribute.name == "warmup_iterations" else 1
    greatest = SIZE_LIMITS[attribute.name]
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= greatest:
        option = "--" + attribute.name.replace("_", "-")
        raise TprimatError(f"{option} {value!r}: must be a whole number from {least} to {greatest}")


@attrs.frozen(kw_only=True)
class Workload:
    """What the user says the run was, from the command line (each may be unknown)."""

    model: str | None = None
    seq_length: int | None = attrs.field(default=None, validator=_within_limit)
    global_batch_size: int | None = attrs.field(default=None, validator=_within_limit)
    world_size: int | None = attrs.field(default=None, validator=_within_limit)
    precision: str | None = None
    warmup_iterations: int | None = attrs.field(default=None, validator=_within_limit)


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_size(key: str, value: Any) -> int | None:
    """``value`` when it is a size ``key`` can have (a whole number from 1 to its
    :data:`SIZE_LIMITS` entry), else None: a log that states ``seq_length -1`` or a sequence
    length past any real run's states nothing usable."""
    size = as_int(value)
    return size if size is not None and 0 < size <= SIZE_LIMITS[key] else None


def _samples_off(records: Collection[IterationRecord], gbs: int) -> Iterable[tuple[IterationRecord, IterationRecord]]:
    """The consecutive pairs of the records that count consumed samples, to check one by one:
    none when every pair's samples are the global batch times its iterations (compared all at
    once, in C, over the iterations and samples alone, a block of records at a time: a long
    run's are never held whole), else all of them (``records`` read again)."""
    every_pair = itertools.pairwise(r for r in records if r.consumed_samples is not None)  # lazy: read if needed
    # The last pair of the block before, compared with the next one's first.
    last: tuple[list[Any], list[Any]] = ([], [])
    for iterations, samples in record_field_blocks(records, "iteration", "consumed_samples"):
        if None in samples:
            kept = list(map(operator.is_not, samples, itertools.repeat(None)))
            iterations, samples = list(itertools.compress(iterations, kept)), list(itertools.compress(samples, kept))
        if not samples:
            continue
        try:
            steps, counts = array("q", [*last[0], *iterations]), array("q", [*last[1], *samples])
        except (OverflowError, TypeError):  # not a 64-bit integer: compared pair by pair
            return every_pair
        batches = map(operator.mul, map(operator.sub, steps[1:], steps), itertools.repeat(gbs))
        if list(map(operator.sub, counts[1:], counts)) != list(batches):
            return every_pair
        last = ([iterations[-1]], [samples[-1]])
    return ()


def _batch_sizes(records: Collection[IterationRecord]) -> list[Any]:
    """The global batch sizes the records state, each once, in order."""
    found: set[Any] = set()
    for (sizes,) in record_field_blocks(records, "global_batch_size"):
        found.update(sizes)
    found.discard(None)
    return sorted(found)


class DeclaredSizes(Protocol):
    """The sizes checked against a log: a :class:`Workload`, or the result's config built from one."""

    @property
    def global_batch_size(self) -> int | None: ...
    @property
    def seq_length(self) -> int | None: ...
    @property
    def world_size(self) -> int | None: ...


def check_workload_declared(
    workload: DeclaredSizes,
    records: Collection[IterationRecord],
    facts: dict[str, Any],
    declared: dict[str, str],
) -> list[str]:
    """Disagreements between the workload and the log, each naming both values and their source.

    ``declared`` names where each workload value came from ("config run.toml",
    "the command line", "the log"); values read from the log are
    still checked against the log's own iteration lines.
    """
    problems: list[str] = []
    gbs = workload.global_batch_size
    if gbs is not None:
        by = declared.get("global_batch_size", "the log")
        logged = _batch_sizes(records)
        fact = as_int(facts.get("global_batch_size"))
        if fact is not None and not logged:
            logged = [fact]
        if any(v != gbs for v in logged):
            problems.append(
                f"global batch size: {by} says {gbs}, the log's iteration lines say {', '.join(str(v) for v in logged)}"
            )
        for before, after in _samples_off(records, gbs):
            steps = after.iteration - before.iteration
            expected = steps * gbs
            got = after.consumed_samples - before.consumed_samples  # type: ignore[operator]
            if steps > 0 and got != expected:
                problems.append(
                    f"consumed samples: global batch {gbs} ({by}) gives {expected} samples over "
                    f"iterations {before.iteration}-{after.iteration}, the log counts {got} "
                    f"({before.source} -> {after.source})"
                )
                break
    for key, value in (("seq_length", workload.seq_length), ("world_size", workload.world_size)):
        fact = as_int(facts.get(key))
        if value is not None and fact is not None and fact != value:
            label = key.replace("_", " ")
            problems.append(f"{label}: {declared.get(key, 'the log')} says {value}, the log says {fact}")
    return problems


def check_workload(
    workload: Workload, records: Collection[IterationRecord], facts: dict[str, Any], declared_by: str
) -> list[str]:
    """Where a log disagrees with ``workload`` (global batch, sequence length, world size).

    ``declared_by`` names where the workload comes from (e.g. "the config");
    ``tprimat run`` checks a live job's output with this, as ``tprimat parse`` does.
    """
    declared = dict.fromkeys(("global_batch_size", "seq_length", "world_size"), declared_by)
    return check_workload_declared(workload, records, facts, declared)
