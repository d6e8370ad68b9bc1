"""Iteration records as compact bytes: how log readers hand records between processes; and
records made again from their values (:func:`record_from`, also for the rows a long run
keeps on disk, :mod:`tprimat.result.spill`).

Pickle stores an attrs record as a dict of its fields' names and values; here a record is the
tuple of its values, and is made again by a generated function that sets each slot directly
(its values were checked when the record was first made).

Between processes, the records of a batch of events go as one list of those tuples (and
:class:`~tprimat.contract.records.IterationBlock` events as their columns) by :mod:`marshal`,
which reads them back faster than pickle and, unlike pickle, keeps a value
that several records share (a memory figure, a loss scale: one float object in the reader)
one object on the other side; the other events are pickled as pickle does.
"""

from __future__ import annotations

import io
import marshal
import pickle
from typing import Any

from tprimat.contract.records import ITERATION_FIELDS, IterationBlock, IterationRecord, iteration_values


class _EventPickler(pickle.Pickler):
    """Pickles an iteration record as the tuple of its fields' values; any other object as pickle does."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is IterationRecord:
            return record_from, (iteration_values(obj),)
        return NotImplemented


def _record_maker() -> Any:
    """A function that makes a record from the tuple of its values, setting each slot directly.

    Generated with one statement per field: a loop over the fields took twice as long, and
    a collector takes in a record per iteration of the run.
    """
    slots = {f"set_{name}": IterationRecord.__dict__[name].__set__ for name in ITERATION_FIELDS}
    lines = [f"    set_{name}(record, values[{index}])" for index, name in enumerate(ITERATION_FIELDS)]
    source = "\n".join(["def record_from(values):", "    record = new(IterationRecord)", *lines, "    return record"])
    # __name__: the function is pickled by reference, as this module's record_from.
    namespace = {"__name__": __name__, "new": object.__new__, "IterationRecord": IterationRecord, **slots}
    exec(source, namespace)  # noqa: S102  (text built above from the record's own field names)
    return namespace["record_from"]


#: The record whose values are ``values`` (a tuple in ``ITERATION_FIELDS`` order).
record_from = _record_maker()


def pack(events: list[Any]) -> bytes:
    """``events`` (iteration records and blocks, any other picklable events) as bytes, for a
    process forked from this one (:func:`unpack`).

    A record goes as the tuple of its values and an :class:`IterationBlock` as its columns,
    all by one :mod:`marshal` call (which writes the ``reported`` dicts as dicts, equal when
    read back); only if marshal refuses a value (an instance of a subclass of a built-in
    type) does the whole batch go by pickle.
    """
    rows, blocks, block_places, others, places = [], [], [], [], []
    for place, event in enumerate(events):
        kind = type(event)
        if kind is IterationRecord:
            rows.append(iteration_values(event))
        elif kind is IterationBlock:
            blocks.append(event.columns)
            block_places.append(place)
        else:
            others.append(event)
            places.append(place)
    try:
        marshalled: bytes | None = marshal.dumps((rows, blocks))
    except ValueError:  # a value marshal does not write: all pickled
        marshalled, others, places, block_places = None, events, [], []
    buffer = io.BytesIO()
    _EventPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((marshalled, others, places, block_places))
    return buffer.getvalue()


def unpack(data: bytes) -> list[Any]:
    """The events :func:`pack` made ``data`` of, in their order (a block as a block)."""
    marshalled, others, places, block_places = pickle.loads(data)  # noqa: S301  (bytes this process's own workers wrote)
    if marshalled is None:
        return list(others)
    rows, blocks = marshal.loads(marshalled)  # noqa: S302  (likewise)
    records = list(map(record_from, rows))
    if not others and not blocks:
        return records
    events: list[Any] = [None] * (len(records) + len(blocks) + len(others))
    for place, event in zip(places, others, strict=True):
        events[place] = event
    for place, columns in zip(block_places, blocks, strict=True):
        events[place] = IterationBlock(columns=columns)
    taken = {*places, *block_places}
    for place, record in zip((p for p in range(len(events)) if p not in taken), records, strict=True):
        events[place] = record
    return events
