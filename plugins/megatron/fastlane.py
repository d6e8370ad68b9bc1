"""Runs of iteration lines read at once: what a dense log (``--log-interval 1``) is made of.

A log written with ``--log-interval 1`` is mostly iteration lines, and reading each
through :class:`~tprimat.plugins.megatron.logparse.MegatronLogParser` costs tens of
microseconds.  Lines of one *shape* (the same bytes but for their digits, each digit
run of the same length: ``line.translate`` of every digit to "0") read alike: every
step of the line reader (stripping colour codes, finding the iteration, splitting
the segments, choosing each segment's reader, finding a timestamp or a rank tag)
depends only on which characters are digits, so each value lies at the same byte
offsets and reads with the same ``float`` or ``int``.

A shape is learned from a line the line reader has just read into one record: its
values' offsets and readers are worked out as the reader works out that line, and
the shape is kept only when reading that line by its shape gives the very record
the reader gave.  Then, while the stream is steady (training started, no held line
or pending values, the facts an iteration line states already stated), a run of
lines of known shapes, of one shape or several in turn, is read into one column per
slot (:mod:`~tprimat.plugins.megatron.runrows`, one compiled call where built) and
yielded as one :class:`~tprimat.contract.records.IterationBlock`.  Anything the columns
cannot take exactly (a step time out of range, an iteration not above the one
before, which may be another rank's copy) ends the run there: that line is read by
the line reader, which yields what it always does.
"""

from __future__ import annotations

import bisect
import operator
import struct
from collections.abc import Callable
from itertools import repeat
from typing import Any

from tprimat.contract.records import (
    ITERATION_FIELDS,
    IterationBlock,
    IterationRecord,
    iteration_values,
)
from tprimat.plugins.megatron.runrows import Slots, known_run, layout, read_rows, run_columns
from tprimat.plugins.megatron_core.colour import _ANSI_RE, strip_ansi
from tprimat.plugins.megatron_core.compiled import iso_compact_stamp, iso_stamp
from tprimat.plugins.megatron_core.memory_lines import _HIP_RE, _PRIMUS_RANK_TAG_RE, _hip_figures
from tprimat.plugins.megatron_core.runs import DIGITS, run_block, window_lines
from tprimat.plugins.megatron_core.stream import repeat_key

#: Shapes kept per stream (a log prints few; widths that grow add some); then it starts afresh.
_SHAPES_HELD = 1024
#: Lines looked at in one go: from the first, doubled while every line has a known shape.
_FIRST_WINDOW, _LAST_WINDOW = 8, 4096
#: The fewest lines read at once: each shape of a run costs tens of microseconds, more than a
#: line or two read one by one.
_SHORTEST_RUN = 4
_DEFAULTS = dict(zip(ITERATION_FIELDS, iteration_values(IterationRecord(iteration=0)), strict=True))


class _Refused(Exception):
    """A line whose shape cannot be read by offsets (its lines are left to the line reader)."""


class Shape:
    """How the lines of one shape read: byte slices, their readers, and where each value goes.

    ``items`` are the byte slices of the values (read with ``readers``: ``int``, ``float``,
    a timestamp's (:data:`~tprimat.plugins.megatron_core.compiled.KINDS`) or None for bytes
    kept as they are); ``fields`` and ``reported`` map a record field or reported name to
    ``(item, post)``, ``post`` being "ms" (milliseconds to seconds), "count" (an integer count
    kept as a float) or None.
    """

    __slots__ = (
        "items",
        "getter",
        "unpack",
        "order",
        "readers",
        "varying",
        "iteration",
        "fields",
        "reported",
        "hip",
        "batch",
        "label",
        "placed",
        "layout",
    )

    def __init__(self) -> None:
        self.items: list[slice] = []
        self.readers: list[Callable[[Any], Any] | None] = []
        self.iteration = 0
        self.fields: dict[str, tuple[int, str | None]] = {}
        self.reported: dict[str, tuple[int, str | None]] = {}
        # The rank, used and total items (None, None: those of the record's memory segment).
        self.hip: tuple[int, int | None, int | None] | None = None
        self.batch = False  # the line prints a global batch size (a fact its first line states)
        self.label = False  # the line prints GiB labelled GB (a note its first line states)

    def item(self, start: int, end: int, reader: Callable[[Any], Any] | None) -> int:
        self.items.append(slice(start, end))
        self.readers.append(reader)
        return len(self.items) - 1

    def seal(self, size: int) -> None:
        """Make the reader of the items of lines of ``size`` bytes (every line of a shape has its size)."""
        if len(self.items) < 2:
            raise _Refused("too few values")
        self.varying: list[list[bool]] = [[] for _ in self.items]  # see `_read`
        # Items that do not overlap are unpacked from the lines by one struct (half the time of slicing).
        ordered = sorted(range(len(self.items)), key=lambda item: self.items[item].start)
        ends = [0, *(self.items[item].stop for item in ordered)]
        if all(self.items[item].start >= end for item, end in zip(ordered, ends, strict=False)):
            gaps = (
                f"{self.items[item].start - end}x{self.items[item].stop - self.items[item].start}s"
                for item, end in zip(ordered, ends, strict=False)
            )
            self.unpack: struct.Struct | None = struct.Struct("".join(gaps) + f"{size - ends[-1]}x")
            self.order = [ordered.index(item) for item in range(len(self.items))]
        else:
            self.unpack = None
            self.getter = operator.itemgetter(*self.items)

    def python_values(self, lines: list[bytes]) -> list[Any]:
        """The values of each item in ``lines`` (each a line of this shape), read in Python as the
        compiled ``read_rows`` reads them."""
        return list(map(_read, self.texts(lines), self.readers, self.varying))

    def texts(self, lines: list[bytes]) -> list[tuple[bytes, ...]]:
        """The texts of each item in ``lines`` (each a line of this shape)."""
        if self.unpack is None:
            return list(zip(*map(self.getter, lines), strict=True))
        unpacked = list(zip(*self.unpack.iter_unpack(b"".join(lines)), strict=True))
        return list(map(unpacked.__getitem__, self.order))


def _core(text: str, start: int) -> tuple[int, int]:
    """Where ``text`` (at ``start``) lies without surrounding whitespace, which float() and int() ignore."""
    lead = len(text) - len(text.lstrip())
    core = text.strip()
    if not core:
        raise _Refused("empty value")
    return start + lead, start + lead + len(core)


class _Learner:
    """Works out one line's shape, the way the line reader reads that line."""

    def __init__(self, parser: Any, text: str) -> None:
        self.parser = parser
        self.shape = Shape()
        cuts = [m.span() for m in _ANSI_RE.finditer(text)] if ("\x1b" in text or "[0m" in text) else []
        # Where each cut lies in the clean text, and the raw characters cut up to and with it.
        self.cut_at: list[int] = []
        self.cut_before: list[int] = [0]
        for start, end in cuts:
            self.cut_at.append(start - self.cut_before[-1])
            self.cut_before.append(self.cut_before[-1] + end - start)
        bounds = [0, *(bound for cut in cuts for bound in cut), len(text)]
        self.clean = "".join(map(text.__getitem__, map(slice, bounds[::2], bounds[1::2])))
        self.hip_span: tuple[int, int] | None = None  # where the memory segment's figures lie
        if self.clean != strip_ansi(text):
            raise _Refused("colour codes cut otherwise")

    def raw(self, position: int) -> int:
        """Where the clean text's character at ``position`` lies in the line."""
        return position + self.cut_before[bisect.bisect_right(self.cut_at, position)]

    def value(self, start: int, end: int, reader: Callable[[Any], Any] | None) -> int:
        """An item for the clean text's ``[start, end)``, which must lie in the line without a cut."""
        if end <= start:
            raise _Refused("an empty value")
        raw_start, raw_end = self.raw(start), self.raw(end - 1) + 1
        if raw_end - raw_start != end - start:
            raise _Refused("colour codes inside a value")
        return self.shape.item(raw_start, raw_end, reader)

    def number(self, text: str, start: int, reader: Callable[[Any], Any] = float) -> int:
        return self.value(*_core(text, start), reader)

    def pair(self, text: str, start: int) -> tuple[int, int | None]:
        """``parse_pair``'s instant and average values, as items."""
        if "(avg" in text:
            first, _, rest = text.partition("(avg")
            rest_start = start + len(first) + 4
            lead = len(rest) - len(rest.lstrip())
            second = rest.strip().rstrip(")")
            return self.number(first, start), self.number(second, rest_start + lead)
        if "/" in text:
            parts = text.split("/")
            if len(parts) != 2:
                raise _Refused("not a pair")
            return self.number(parts[0], start), self.number(parts[1], start + len(parts[0]) + 1)
        return self.number(text, start), None

    def units(self, text: str, start: int, count: int, wanted: tuple[int, ...]) -> list[int]:
        """``parse_units``'s values, as items."""
        parts = text.split("/")
        if len(parts) != count:
            raise _Refused("not a unit list")
        found = []
        for index in wanted:
            offset = start + sum(len(part) + 1 for part in parts[:index])
            part = parts[index]
            lead = len(part) - len(part.lstrip())
            found.append(self.number(part.strip().rstrip("GiB%"), offset + lead))
        return found


def learn(parser: Any, line: bytes) -> Shape:
    """The shape of ``line``, read by ``parser``'s line reader into one record (or _Refused)."""
    from tprimat.plugins.megatron.logparse import _find_iteration

    if not line.isascii() or b"tps:" in line:
        raise _Refused("not ASCII, or a TorchTitan line")
    text = line.decode("ascii")
    if "memory" in text and (
        "Theoretical memory footprints" in text or "max_memory_" in text or "memory (MB)" in strip_ansi(text)
    ):
        raise _Refused("memory reports")
    learner = _Learner(parser, text)
    clean = learner.clean
    match = _find_iteration(clean)
    if match is None:
        raise _Refused("no iteration")
    shape = learner.shape
    shape.iteration = learner.value(*match.span(1), int)
    _segments(learner, clean, match.end())
    if "step_time_s" not in shape.fields:
        raise _Refused("no step time")
    _stamp(learner, clean[: match.start()])
    if "mem" in text:
        _hip(learner, text)
    shape.seal(len(line))
    return shape


def _segments(learner: _Learner, clean: str, position: int) -> None:
    """The items of an iteration line's segments (see ``MegatronLogParser._read_segments``)."""
    from tprimat.plugins.megatron.logparse import _RANK_PREFIX_RE

    parser = learner.parser
    for segment in clean[position:].split("|"):
        start = position
        position += len(segment) + 1
        key, colon, value = segment.partition(":")
        if not colon:
            continue
        entry = parser._keys.get(key) or parser._key_entry(key)
        handler, shown = entry[0], entry[1]
        if handler is None:
            continue
        if any(map(str.isdigit, _RANK_PREFIX_RE.sub("", shown))):
            raise _Refused("a name with digits")
        _segment(learner, handler, value, start + len(key) + 1)


def _segment(learner: _Learner, handler: Any, value: str, start: int) -> None:
    """The items one segment's ``handler`` reads, and where they go."""
    from tprimat.plugins.megatron import logparse

    shape = learner.shape
    cls = logparse.MegatronLogParser
    func = getattr(handler, "func", None)
    if func is logparse._read_number:
        name, parse, into_reported = handler.args
        reader = logparse._UNCHECKED[parse]
        (shape.reported if into_reported else shape.fields)[name] = (learner.number(value, start, reader), None)
        shape.batch = shape.batch or (name == "global_batch_size" and not into_reported)
    elif func is logparse._other_number:
        if logparse._NUMBER_RE.fullmatch(value.strip()) is not None:
            shape.reported[handler.args[0]] = (learner.number(value, start), None)
    elif handler is cls._elapsed:
        instant, average = learner.pair(value, start)
        shape.fields["step_time_s"] = (instant, "ms")
        if average is not None:
            shape.reported["elapsed_time_per_iteration_ms_avg"] = (average, None)
    elif handler is cls._nan_iterations:
        shape.reported["nan_iterations"] = (learner.number(value, start, int), "count")
    elif handler is cls._tflops or func is logparse.read_tokens:
        instant, average = learner.pair(value, start)
        name = "tflops_per_gpu" if func is None else "tokens_per_s_per_gpu"
        shape.reported[name] = (instant, None)
        if average is not None:
            shape.reported[name + "_avg" if func is None else handler.args[0]] = (average, None)
    else:
        _memory_segment(learner, handler, value, start)


def _memory_segment(learner: _Learner, handler: Any, value: str, start: int) -> None:
    from tprimat.plugins.megatron.logparse import MegatronLogParser as cls

    shape = learner.shape
    if handler is cls._hip_memory:  # used/free/total/ratio, as read_hip_usage reads them
        used, total = learner.units(value, start, 4, (0, 2))
        low, high = _core(value, start)
        learner.hip_span = (learner.raw(low), learner.raw(high - 1) + 1)
        shape.fields["mem_device_used_gib"] = (used, None)
        shape.fields["mem_device_total_gib"] = (total, None)
    elif handler is cls._rocm_memory:
        used, total = learner.units(value, start, 4, (0, 2))
        shape.reported["rocm_smi_mem_used_gib"] = (used, None)
        shape.reported["rocm_smi_mem_total_gib"] = (total, None)
    elif handler is cls._rocm_max_memory:
        (used,) = learner.units(value, start, 2, (0,))
        shape.reported["rocm_smi_max_mem_used_gib_all_ranks"] = (used, None)
    else:
        raise _Refused("a segment reader without columns")
    shape.label = True


def _stamp(learner: _Learner, prefix: str) -> None:
    """The timestamp's item, read into its ISO text (see ``MegatronLogParser._timestamp``)."""
    from tprimat.plugins.megatron.logparse import _MEGATRON_TS_RE, _PRIMUS_TS_RE

    last = prefix.rfind("[")
    found = _MEGATRON_TS_RE.match(prefix, last) if last >= 0 else None
    if found is not None:  # date, one character ("T" or a space), time
        learner.shape.fields["timestamp"] = (learner.value(found.start(1), found.end(2), iso_stamp), None)
        return
    found = _PRIMUS_TS_RE.search(prefix)
    if found is not None:  # YYYYMMDD, a space, the time
        learner.shape.fields["timestamp"] = (learner.value(found.start(1), found.end(4), iso_compact_stamp), None)


def _hip(learner: _Learner, text: str) -> None:
    """The rank and figures ``RankMemory.read_line`` takes from the line's ``hip mem usage`` field."""
    field = text.find("hip mem usage")
    if field < 0:
        return
    if _hip_figures(text, field) is None:
        return  # none of its lines gives figures (whether one does depends on its characters' kinds)
    match = _HIP_RE.search(text, field)
    tag = _PRIMUS_RANK_TAG_RE.search(text, 0, match.start()) if match is not None else None
    if match is None or tag is None:
        raise _Refused("a memory field read otherwise")
    shape = learner.shape
    if learner.hip_span == match.span(1):  # the figures of the record's own memory segment
        shape.hip = (shape.item(*tag.span(1), int), None, None)
        return
    values = match.group(1)
    parts = values.split("/")
    offset_total = match.start(1) + len(parts[0]) + len(parts[1]) + 2
    used = shape.item(*_core(parts[0].rstrip("GiB%"), match.start(1)), float)
    total = shape.item(*_core(parts[2].rstrip("GiB%"), offset_total), float)
    shape.hip = (shape.item(*tag.span(1), int), used, total)


def _read(texts: tuple[bytes, ...], reader: Callable[[Any], Any] | None, varying: list[bool]) -> Any:
    """The values of one item's ``texts``.  The texts of most items repeat from line to line (a batch
    size, a memory figure): each distinct text is read once, into one object shared by every record
    that holds it (see `_KNOWN`), unless the item's texts keep changing (``varying``: a flag per item
    of a shape, set when most texts of a run of 16 lines or more differ)."""
    if reader is None:
        return texts
    if not varying:
        if texts.count(texts[0]) == len(texts):
            return [_known(reader, {texts[0]})[texts[0]]] * len(texts)
        distinct = set(texts)
        if len(texts) < 16 or 2 * len(distinct) <= len(texts):
            return list(map(_known(reader, distinct).__getitem__, texts))
        varying.append(True)
    return list(map(reader, texts))


#: Reader -> text -> the value read, kept to be shared (a pure function of the text, as the line
#: reader's cached segments are, which also put their values in): 4096 texts at most per reader.
_KNOWN: dict[Any, dict[bytes, Any]] = {float: {}, int: {}, iso_stamp: {}, iso_compact_stamp: {}}


def _known(reader: Callable[[Any], Any], texts: set[bytes]) -> dict[bytes, Any]:
    """The values of ``texts`` read by ``reader``, among the values kept."""
    known = _KNOWN[reader]
    missing = texts.difference(known)
    if missing:
        if len(known) + len(missing) > 4096:
            known.clear()
            missing = texts
        known.update(zip(missing, map(reader, missing), strict=True))
    return known


class FastLane:
    """A parser's shapes, and the reading of runs of lines of known shapes (see the module)."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.shapes: dict[bytes, Shape] = {}
        self.refused: set[bytes] = set()
        self.slots = Slots()
        self.window = _FIRST_WINDOW

    def learn(self, line: bytes, record: IterationRecord) -> None:
        """Keep the shape of ``line``, which the line reader has just read into ``record`` alone,
        from a steady state (no held line or pending values)."""
        key = line.translate(DIGITS)
        if key in self.shapes or key in self.refused:
            return
        if len(self.shapes) >= _SHAPES_HELD or len(self.refused) >= _SHAPES_HELD:
            self.shapes.clear()
            self.refused.clear()
            self.slots = Slots()
        try:
            shape = learn(self.parser, line)
            layout(shape, self.slots)
            agrees = self._agrees(shape, key, line, record)
        except Exception:  # noqa: BLE001 (a line this module cannot take is read line by line)
            agrees = False
        if agrees:
            self.shapes[key] = shape
            _share(shape, line, record)
        else:
            self.refused.add(key)

    def steady(self) -> bool:
        """Whether the next iteration line reads from its own text alone (see the module)."""
        parser = self.parser
        return (
            parser.started
            and parser._pending is None
            and not parser._pending_reported
            and parser._previous_iteration is not None
            and "train_iters" in parser._facts
        )

    def read_run(
        self, chunk: bytes, spans: list[tuple[int, int]], index: int, counted: int, counted_to: int
    ) -> tuple[IterationBlock, int, int, int, int] | None:
        """The lines of ``spans`` from ``index`` on that read by their shape, as one block.

        ``counted``: the lines of the stream before offset ``counted_to`` of ``chunk``.  Returns
        the block, the next span's index, the lines before the last line read and its offset, and
        the end of the last line read; or None when the line at ``index`` must be read line by line.
        """
        if not self.shapes or not self.steady():
            return None
        size = self.window
        previous = self.parser._previous_iteration
        shapes = self._usable()
        # A run of a line or two (another rank's copy after each) costs more than it saves: the
        # first lines are looked at before the run is read.
        _, first = known_run(window_lines(chunk, spans, index, _SHORTEST_RUN)[1], shapes, previous)
        rows = (
            read_rows(chunk, spans, index, size, shapes, len(self.slots), previous) if first == _SHORTEST_RUN else [[]]
        )
        count = len(rows[0])
        window = spans[index : index + size]
        if count == len(window) == self.window:
            self.window = min(2 * self.window, _LAST_WINDOW)
        elif count < len(window):
            self.window = max(_FIRST_WINDOW, count)
        if count < _SHORTEST_RUN:
            return None
        found = run_columns(rows, self.slots, _DEFAULTS)
        columns = None if found is None else _advance(self.parser, *found)
        if columns is None:
            return None
        count = len(columns["iteration"])
        start, end = window[count - 1]
        self._remember_last(chunk[start:end], columns)
        return run_block(columns, self.parser.source, (chunk, window, index, count), (counted, counted_to))

    def _remember_last(self, line: bytes, columns: dict[str, list]) -> None:
        """What ``MegatronLogParser.remember`` keeps of the run's last line, the one line of it whose
        copy (another rank's, next) can repeat the last record: the copy then gives REPEATED_LINE."""
        key = repeat_key(line)
        if key is None:
            return
        parser = self.parser
        records = parser._line_records
        if len(records) >= 256:
            records.clear()
        iteration = columns["iteration"][-1]
        hip = columns["_hip"]  # what RankMemory.read_line gave the line
        memory = None if hip is None or hip[0][-1] is None else ((hip[1][-1], hip[2][-1]), None)
        records[key] = (iteration, columns["covers_iterations"][-1], parser._generations[iteration], memory)

    def _usable(self) -> dict[bytes, Shape]:
        """The shapes whose lines state no fact that is not stated yet (a run ends before such a line)."""
        facts = self.parser._facts
        batch = "global_batch_size" in facts
        label = facts.get("note.gib_labelled_gb") == _gib_note()
        if batch and label:
            return self.shapes
        return {
            key: shape
            for key, shape in self.shapes.items()
            if not ((shape.batch and not batch) or (shape.label and not label))
        }

    def _agrees(self, shape: Shape, key: bytes, line: bytes, record: IterationRecord) -> bool:
        """Whether reading ``line`` by ``shape`` gives ``record`` (but for its interval and source),
        value for value and type for type, reported names in the same order, and the memory
        figures the line gives."""
        rows = read_rows(line, [(0, len(line))], 0, 1, {key: shape}, len(self.slots), -1)
        found = run_columns(rows, self.slots, _DEFAULTS) if rows[0] else None
        if found is None:
            return False
        columns, hip = found
        for name, expected in zip(ITERATION_FIELDS, iteration_values(record), strict=True):
            if name not in ("covers_iterations", "source", "reported") and not _same(
                columns[name][0] if name in columns else _DEFAULTS[name], expected
            ):
                return False
        figures = dict(zip(columns["reported"].names, columns["reported"].columns, strict=True))
        if list(shape.reported) != list(record.reported) or set(figures) != set(shape.reported):
            return False
        if not all(_same(figures[name][0], value) for name, value in record.reported.items()):
            return False
        if shape.hip is not None:
            text = line.decode("ascii")
            return hip is not None and _hip_figures(text, text.find("hip mem usage")) == tuple(c[0] for c in hip)
        return True


def _gib_note() -> str:
    from tprimat.plugins.megatron.logparse import GIB_LABEL_NOTE

    return GIB_LABEL_NOTE


def _advance(parser: Any, columns: dict[str, Any], hip: tuple[list[Any], ...] | None) -> dict[str, Any] | None:
    """Cut the run before an iteration not above the one before (a copy, a restart), then move the
    parser's state past it as reading each line would; the run's full columns, or None if none is left."""
    iterations = columns["iteration"]
    covers = list(map(operator.sub, iterations, [parser._previous_iteration, *iterations[:-1]]))
    if min(covers) < 1:
        count = next(row for row, step in enumerate(covers) if step < 1)
        if not count:
            return None
        for name, column in columns.items():
            columns[name] = column[:count]
        iterations, covers = columns["iteration"], covers[:count]
        hip = None if hip is None else tuple(column[:count] for column in hip)
    interval = parser.log_interval
    if interval and max(covers) > interval:
        covers = list(map(min, covers, repeat(interval)))  # lines are missing in between (see `_covers`)
    parser._previous_iteration = iterations[-1]
    parser._previous_covers = covers[-1]
    skipped = columns.get("skipped")
    if skipped is not None and max(skipped) > 1:  # an interval holds at least the iterations it skipped
        columns["covers_iterations"] = list(map(max, covers, skipped))
    else:
        columns["covers_iterations"] = covers
    _generations(parser, iterations)
    if hip is not None:
        ranks, used, totals = hip
        if None in ranks:  # lines of a shape without the field
            kept = [row for row, rank in enumerate(ranks) if rank is not None]
            ranks, used, totals = ([column[row] for row in kept] for column in hip)
        parser._rank_memory.read_hip_run(ranks, used, totals)
    columns["_hip"] = hip
    for name in ITERATION_FIELDS:
        if name not in columns and name != "source":
            columns[name] = [_DEFAULTS[name]] * len(iterations)
    return columns


def _generations(parser: Any, iterations: list[int]) -> None:
    """Each record's generation, as ``MegatronLogParser.remember`` numbers them (a later copy of a
    line is then told from one of an earlier record), with its bound."""
    generations = parser._generations
    start = parser._generation
    if len(generations) + len(iterations) < 4096:  # no clearing on the way
        generations.update(zip(iterations, range(start + 1, start + 1 + len(iterations)), strict=True))
        parser._generation = start + len(iterations)
        return
    for iteration in iterations:
        if len(generations) >= 4096:
            generations.clear()
            parser._line_records.clear()
        parser._generation += 1
        generations[iteration] = parser._generation


def _share(shape: Shape, line: bytes, record: IterationRecord) -> None:
    """Keep the values of ``record`` as those of their texts (see `_KNOWN`): the records read by
    shape then share the objects of the line reader's records (which its cached segments share)."""
    texts = [column[0] for column in shape.texts([line])]
    for name, (item, post) in shape.fields.items():
        reader = shape.readers[item]
        if post is None and reader is not None:
            known = _KNOWN[reader]
            if len(known) < 4096:
                known.setdefault(texts[item], getattr(record, name))


def _same(value: Any, expected: Any) -> bool:
    return type(value) is type(expected) and (value == expected or (value != value and expected != expected))
