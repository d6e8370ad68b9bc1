"""Iteration records regrouped as :class:`IterationBlock` events: what a parser that reads runs
of iteration lines at once yields, made from the records a parser yields one by one."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, IterationRecord, iteration_values


def block_of(records: Sequence[IterationRecord]) -> IterationBlock:
    """The block that stands for ``records`` (each ``reported`` dict copied: a block shares none)."""
    rows = [iteration_values(record) for record in records]
    columns = tuple(list(column) for column in zip(*rows, strict=True)) or tuple([] for _ in ITERATION_FIELDS)
    reported = columns[ITERATION_FIELDS.index("reported")]
    reported[:] = [dict(figures) for figures in reported]
    return IterationBlock(columns=columns)


def blockified(events: Iterable[Any], sizes: Sequence[int]) -> Iterator[Any]:
    """``events`` with consecutive iteration records grouped into blocks of ``sizes`` records
    (taken in turn, again from the first when used up; a block ends early where another event
    comes), every other event as it is."""
    turn = itertools.cycle(sizes)
    size = next(turn)
    run: list[IterationRecord] = []
    for event in events:
        if type(event) is IterationRecord:
            run.append(event)
            if len(run) == size:
                yield block_of(run)
                run, size = [], next(turn)
            continue
        if run:
            yield block_of(run)
            run, size = [], next(turn)
        yield event
    if run:
        yield block_of(run)
