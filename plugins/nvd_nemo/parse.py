"""NeMo training logs: NeMo 2's step lines, NeMo 1's DLLogger records.

NeMo 2 prints, from global rank 0::

    Training epoch 0, iteration 17/99 | lr: 2.699e-06 | global_batch_size: 128 |
    global_step: 17 | reduced_train_loss: 11.03 | train_step_timing in s: 12.64 |
    consumed_samples: 2304 [| TFLOPS_per_GPU: 865.7]

Traps handled here: values have four significant digits (``1.249e+03``);
``iteration`` is Lightning's 0-based batch index, which restarts every epoch
and repeats under gradient accumulation, so records are keyed on
``global_step`` (record iteration = global_step + 1, the number of optimizer
steps completed, which is what Megatron-LM calls the iteration and what
``consumed_samples = iteration × global batch`` counts); the first line has
no ``consumed_samples``; a run restarted from a checkpoint logs steps again
(the collector keeps the later ones); ``max_memory_reserved`` and
``max_memory_allocated`` are bytes; ``TFLOPS_per_GPU`` is NeMo's own figure
and is kept as reported.  NeMo-Launcher's end-of-run ``train_step_timing in
s: [list]`` summary is read only when the log has no per-step lines.

A run logged every step is mostly step lines, each a record: a line in one of
the forms NeMo 2 prints (its keys in NeMo's order, plain numbers) is read in
one regex match; any other is read segment by segment, which is the
definition (both give the same record).  Read from a file, a run of such
lines is read at once into one block of records (:mod:`.fastlane`).

NeMo 1 (``exp_manager``) logs and DLLogger JSON files are read by
:class:`~tprimat.plugins.nvd_nemo.nemo1.Nemo1Reader`, which this parser hands
their lines to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tprimat.contract import IterationRecord
from tprimat.contract.records import EvalRecord, LogFact, ParseEvent, ParseIssue, RankPeak
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import LineError, StreamEvents, normal_key, parse_float, parse_int
from tprimat.plugins.megatron_core.memory_lines import RankMemory
from tprimat.plugins.megatron_core.stream import iter_events
from tprimat.plugins.nvd_nemo.expconfig import MARK
from tprimat.plugins.nvd_nemo.fastlane import NemoFastLane
from tprimat.plugins.nvd_nemo.nemo1 import TFLOPS, TIMER_RESET, Nemo1Reader

Event = IterationRecord | LogFact | ParseIssue | EvalRecord

_LINE_RE = re.compile(r"Training epoch (\d+), iteration (\d+)/(\d+)\s*\|(.*)$")
_MEMBER_RE = re.compile(r"Initializing distributed: GLOBAL_RANK: \d+, MEMBER: \d+/(\d+)")
_SUMMARY_RE = re.compile(r"train_step_timing in s: \[([^\]]*)\]")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_LIST = "train_step_timing in s: ["

GIB = 1024.0**3


class NemoLogParser(StreamEvents):
    """Stateful reader of one stream of NeMo log lines."""

    name = "nemo"
    # "mem": every line a memory figure can be in (NeMo's max_memory_ fields, Megatron core's
    # allocator report, its theoretical footprint), read as the memory scan of a file reads it.
    triggers = ("Training epoch", "MEMBER:", _LIST, "DLL", MARK, TFLOPS, TIMER_RESET, "mem")
    running_triggers = ("Training epoch", _LIST, "DLL", MARK, TFLOPS, TIMER_RESET, "mem")

    def __init__(self, source: str) -> None:
        self.source = source
        self._facts: dict[str, Any] = {}
        self._seen_step_lines = False
        self.started = False
        self._summary: tuple[list[float], int] | None = None
        self._val_loss: str | None = None  # the last val_loss text seen on a step line
        self._nemo1 = Nemo1Reader(self)
        # Each rank's memory figures, from every line that holds one (see `rank_peaks`).
        self._rank_memory = RankMemory()
        # Runs of step lines read at once from the bytes of a file (see fastlane.py).
        self.fast_lane = NemoFastLane(self)

    def holds_line(self) -> bool:
        """Inside NeMo 1's configuration block, or after its TFLOPs failure line: every line is wanted."""
        return self._nemo1.block is not None or self._nemo1.awaiting_reason

    def rank_peaks(self) -> list[RankPeak]:
        """Each rank's memory peaks in the lines read since the last call (the stream's or range's):
        the result takes them instead of scanning the file for memory lines again."""
        return self._rank_memory.peaks()

    def feed(self, line: str, lineno: int) -> list[Event] | None:
        if "mem" in line:
            self._rank_memory.read_line(line)
        nemo1 = self._nemo1
        if nemo1.awaiting_reason:
            nemo1.reason(line)
            return []
        if nemo1.block is not None and nemo1.config_line(line, lineno):
            return []
        if "Training epoch" in line:
            match = _LINE_RE.search(strip_ansi(line).rstrip())
            if match is not None:
                return self._step(match, lineno)
        elif "DLL" in line:
            events = nemo1.dll(line, lineno)
            self.started = self.started or nemo1.started
            return events
        elif MARK in line:
            return nemo1.config_mark(lineno)
        elif TFLOPS in line:
            return nemo1.tflops(line, lineno)
        elif TIMER_RESET in line:
            nemo1.timer_reset(line, lineno)
            return []
        elif "MEMBER:" in line:
            match = _MEMBER_RE.search(line)
            if match is not None:
                fact = self.fact("world_size", int(match.group(1)), lineno)
                return [fact] if fact is not None else []
        elif _LIST in line:
            match = _SUMMARY_RE.search(line)
            if match is not None:
                try:
                    times = [parse_float(v) for v in match.group(1).split(",") if v.strip()]
                except LineError as exc:
                    return [self.issue(lineno, f"unreadable step-time list ({exc}); skipped")]
                self._summary = (times, lineno)
                return []
        return None

    def _step(self, match: re.Match[str], lineno: int) -> list[Event]:
        """The record of one step line, with the facts it states first (or the issue that refuses it)."""
        self._seen_step_lines = self.started = True
        events: list[Event] = []
        known = _known_form(match)
        if known is not None:
            step, fields, reported, val_loss = known
        else:
            values = _segments(match.group(4))
            try:
                step = self._step_number(values, int(match.group(2)), lineno, events)
                fields, reported = _step_values(values)
            except LineError as exc:
                return [self.issue(lineno, f"unreadable NeMo step line ({exc}); skipped")]
            val_loss = values.get("val_loss")
        step_time = fields.get("step_time_s")
        if step_time is not None and not step_time > 0:
            return [self.issue(lineno, f"train_step_timing is {step_time:g} s; line skipped")]
        if "train_iters" not in self._facts or "global_batch_size" not in self._facts:
            self._first_facts(int(match.group(3)) + 1, fields.get("global_batch_size"), lineno, events)
        try:
            record = IterationRecord(iteration=step + 1, source=self.where(lineno), reported=reported, **fields)
        except (TypeError, ValueError) as exc:
            return [*events, self.issue(lineno, f"NeMo step line rejected: {exc}")]
        events.append(record)
        if val_loss is not None:
            evaluation = self._evaluation(val_loss, step, lineno)
            if evaluation is not None:
                events.append(evaluation)
        return events

    def _first_facts(self, train_iters: int, global_batch_size: int | None, lineno: int, events: list[Event]) -> None:
        """The run's length and global batch, into ``events`` the first time a step line shows them."""
        for key, value in (("train_iters", train_iters), ("global_batch_size", global_batch_size)):
            if value is not None and key not in self._facts:
                fact = self.fact(key, value, lineno)
                if fact is not None:
                    events.append(fact)

    def _step_number(self, values: dict[str, str], batch_index: int, lineno: int, events: list[Event]) -> int:
        """The line's ``global_step`` (taken out of ``values``), else its batch index, noted once in ``events``."""
        if "global_step" in values:
            return _whole(values.pop("global_step"))
        fact = self.fact("note.nemo_no_global_step", "NeMo lines without global_step: keyed on the batch index", lineno)
        if fact is not None:
            events.append(fact)
        return batch_index

    def _evaluation(self, text: str, step: int, lineno: int) -> Event | None:
        """An evaluation where ``val_loss`` first appears or changes.

        Lightning repeats the latest ``val_loss`` on every later step line; a new
        value means a validation ran before this step, after ``step`` optimizer steps.
        Two validations giving the very same printed value read as one.
        """
        if text == self._val_loss:
            return None
        self._val_loss = text
        try:
            loss = parse_float(text)
        except LineError as exc:
            return self.issue(lineno, f"unreadable val_loss ({exc}); skipped")
        return EvalRecord(iteration=step, eval_loss=loss, source=self.where(lineno))

    def finish(self) -> list[Event]:
        nemo1 = self._nemo1
        nemo1.close_block()  # the log may end inside it
        events: list[Event] = nemo1.flush()
        if self._summary is None or self._seen_step_lines or nemo1.started:
            return events
        times, lineno = self._summary
        fact = self.fact(
            "note.nemo_step_time_list",
            f"step times read from the end-of-run list at {self.where(lineno)} (NeMo rounds them to 2 decimals); "
            f"iterations numbered from 1 in list order; {nemo1.window_note()}",
            lineno,
        )
        if fact is not None:
            events.append(fact)
        for index, seconds in enumerate(times, 1):
            if seconds > 0:
                events.append(IterationRecord(iteration=index, step_time_s=seconds, source=self.where(lineno)))
            else:
                events.append(self.issue(lineno, f"step {index} has time {seconds:g} s; skipped"))
        return events


#: A number as :func:`parse_float` reads it: ASCII, no "_" (float() may still refuse one, such as "1.2.3").
_FLOAT = r"([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf))"
#: A number as :data:`_NUMBER_RE` finds one, in ASCII digits.
_PLAIN = r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
#: The segments of the step lines NeMo 2 prints (every form of the fixtures), after the "|" that
#: follows the iteration: known keys in NeMo's order, one space around each "|" and after each
#: ":", the numbers plain.  Such a line is read in one match (see :func:`_known_form`).
_KNOWN_FORM_RE = re.compile(
    rf" lr: {_FLOAT} \| (?:consumed_samples: ([0-9]+) \| )?global_batch_size: ([0-9]+) \| global_step: ([0-9]+) \| "
    rf"(?:max_memory_reserved: {_FLOAT} \| max_memory_allocated: {_FLOAT} \| )?reduced_train_loss: {_FLOAT}"
    rf"(?: \| train_step_timing in s: {_FLOAT})?(?: \| TFLOPS_per_GPU: {_FLOAT})?"
    rf"(?: \| consumed_samples: ([0-9]+))?(?: \| val_loss: {_PLAIN})?"
)
_VAL_LOSS = normal_key("val_loss")  # its name among the reported figures


def _known_form(match: re.Match[str]) -> tuple[int, dict[str, Any], dict[str, float | str | None], str | None] | None:
    """The step number, record fields, reported figures and ``val_loss`` text of a step line in a
    form NeMo 2 prints (:data:`_KNOWN_FORM_RE`), as :func:`_segments` and :func:`_step_values` read
    them; None for any other line (or a number float() refuses), which they read.

    ``match`` is :data:`_LINE_RE`'s; its last group, the segments, runs to the end of the text.
    """
    known = _KNOWN_FORM_RE.fullmatch(match.string, match.start(4))
    if known is None:
        return None
    lr, samples_first, batch, step, reserved, allocated, loss, seconds, tflops, samples, val_loss = known.groups()
    if samples is None:
        samples = samples_first
    elif samples_first is not None:
        return None  # printed twice: the general reader says which is kept
    try:
        fields = {
            "step_time_s": float(seconds) if seconds is not None else None,
            "loss": float(loss),
            "lr": float(lr),
            "global_batch_size": int(batch),
            "consumed_samples": int(samples) if samples is not None else None,
            "mem_max_reserved_gib": float(reserved) / GIB if reserved is not None else None,
            "mem_max_allocated_gib": float(allocated) / GIB if allocated is not None else None,
        }
        reported: dict[str, float | str | None] = {} if tflops is None else {"tflops_per_gpu": float(tflops)}
    except ValueError:
        return None
    if val_loss is not None:
        reported[_VAL_LOSS] = float(val_loss)
    return int(step), fields, reported, val_loss


def _segments(text: str) -> dict[str, str]:
    """``k: v | k: v`` -> {k: v}, keys and values stripped; a segment without ":" is left out."""
    values: dict[str, str] = {}
    for segment in text.split("|"):
        key, sep, value = segment.partition(":")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _gib(text: str) -> float:
    """A byte count as NeMo's memory callback prints it, in GiB."""
    return parse_float(text) / GIB


def _step_values(values: dict[str, str]) -> tuple[dict[str, Any], dict[str, float | str | None]]:
    """The record fields and the reported figures of a step line's ``values`` (each field read is
    taken out of ``values``): the known keys by :data:`_STEP_FIELDS`, NeMo's ``TFLOPS_per_GPU``
    as reported, and any other key whose value is one number under its normalised name.

    A known value that cannot be read is a :class:`LineError`.
    """
    fields: dict[str, Any] = {}
    for key, field, read in _STEP_FIELDS:
        if key in values:
            fields[field] = read(values.pop(key))
    reported: dict[str, float | str | None] = {}
    if "TFLOPS_per_GPU" in values:
        reported["tflops_per_gpu"] = parse_float(values.pop("TFLOPS_per_GPU"))
    for key, value in values.items():
        if _NUMBER_RE.fullmatch(value) and len(key) < 60:
            reported[normal_key(key)] = float(value)
    return fields, reported


def _whole(text: str) -> int:
    """An integer NeMo may print as a float (``5120.0``); a fraction is an error."""
    try:
        return parse_int(text)
    except LineError:
        value = parse_float(text)
        if value != int(value):
            raise LineError(f"not a whole number: {text[:40]!r}") from None
        return int(value)


#: Step-line keys read into a record's fields: (key, field, reader), in the order they are read.
_STEP_FIELDS: tuple[tuple[str, str, Callable[[str], float | int]], ...] = (
    ("train_step_timing in s", "step_time_s", parse_float),
    ("reduced_train_loss", "loss", parse_float),
    ("lr", "lr", parse_float),
    ("global_batch_size", "global_batch_size", _whole),
    ("consumed_samples", "consumed_samples", _whole),
    ("max_memory_reserved", "mem_max_reserved_gib", _gib),
    ("max_memory_allocated", "mem_max_allocated_gib", _gib),
)


class Nemo2LogParser(NemoLogParser):
    """The reader of a log file that holds no NeMo 1 line (no DLLogger record, configuration
    block, TFLOPs line or timer reset anywhere in it): it reports its state, so a large file is
    read in ranges on every core (see :mod:`tprimat.parse.parallel`).

    Its state is what decides how the rest of the file reads: the facts stated, the last
    ``val_loss`` text and the end-of-run list.  NeMo 1's records are held until their run ends
    and their notes name lines, so a file with NeMo 1 lines is read whole, by
    :class:`NemoLogParser`.
    """

    def state(self) -> tuple:
        """What decides how the rest of the stream is read (compared to split a file safely)."""
        return (
            self.started,
            self._seen_step_lines,
            sorted(self._facts.items(), key=lambda item: item[0]),
            self._summary,
            self._val_loss,
        )

    def resume(self, state: tuple) -> None:
        """Continue a stream from :meth:`state` (the reading of a file's range begins there)."""
        self.started, self._seen_step_lines, facts, self._summary, self._val_loss = state
        self._facts = dict(facts)


#: The NeMo 1 lines' triggers, as bytes (see :class:`~tprimat.plugins.nvd_nemo.nemo1.Nemo1Reader`).
_NEMO1_TRIGGERS = tuple(trigger.encode() for trigger in ("DLL", MARK, TFLOPS, TIMER_RESET))
#: Whether a file holds NeMo 1 lines, by (path, size, modification time): each range of a file
#: read on every core asks again.
_HOLDS_NEMO1: dict[tuple[str, int, int], bool] = {}


def _holds_nemo1(path: Path) -> bool:
    """Whether the file at ``path`` holds a NeMo 1 trigger anywhere (searched at C speed, a block
    at a time: a map of the whole file would count it all in the process's memory)."""
    status = path.stat()
    key = (str(path), status.st_size, status.st_mtime_ns)
    known = _HOLDS_NEMO1.get(key)
    if known is None:
        known = _search(path, _NEMO1_TRIGGERS)
        if len(_HOLDS_NEMO1) >= 256:
            _HOLDS_NEMO1.clear()
        _HOLDS_NEMO1[key] = known
    return known


def _search(path: Path, needles: tuple[bytes, ...], block_bytes: int = 1 << 20) -> bool:
    """Whether any of ``needles`` occurs in the file at ``path`` (also across two blocks)."""
    overlap = max(map(len, needles)) - 1
    tail = b""
    with path.open("rb") as file:
        while block := file.read(block_bytes):
            data = tail + block
            if any(needle in data for needle in needles):
                return True
            tail = data[-overlap:]
    return False


def parse_nemo(lines: Iterable[str], source: str) -> Iterator[ParseEvent]:
    """Events from a NeMo 2 log, yielded as each line is read.

    A log file without NeMo 1 lines is read by :class:`Nemo2LogParser`, which a large file's
    ranges can start from; anything else (a live stream, a NeMo 1 log) by :class:`NemoLogParser`.
    """
    path = getattr(lines, "path", None)
    if isinstance(path, Path) and callable(getattr(lines, "byte_chunks", None)) and not _holds_nemo1(path):
        return iter_events(Nemo2LogParser(source), lines)
    return iter_events(NemoLogParser(source), lines)
