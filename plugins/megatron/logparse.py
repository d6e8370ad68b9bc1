"""Megatron-LM's per-iteration log lines, as every Megatron-family backend prints them.

One streaming parser reads the line ``training_log`` prints every
``--log-interval`` iterations::

     [2026-03-31 14:11:11.448457] iteration        1/      15 | consumed samples: 80 |
     elapsed time per iteration (ms): 5320.8 | throughput per GPU (TFLOP/s/GPU): 204.6 |
     learning rate: 1.500000E-04 | global batch size: 80 | lm loss: 1.048310E+01 | ... |
     number of skipped iterations:   0 | number of nan iterations:   0 |

across Megatron-LM versions (with or without timestamp and throughput, with
MoE, energy and any other ``key: value`` segments), the memory report
``[Rank R] (after N iterations) memory (MB) | allocated: ... | max reserved: ...``
and the argument dump ``  global_batch_size ........ 128``.  The Primus,
ROCm-fork and Megatron-Bridge variants subclass :class:`MegatronLogParser`
in their own plugins.

Everything here is a pure function of the lines: nothing is imported from a
framework, and a line that cannot be read becomes a
:class:`~tprimat.contract.records.ParseIssue`, never an exception.  The value
readers and the streaming of a log through the parser, which NeMo 2's parser
uses too, are :mod:`tprimat.plugins.megatron_core.lines` and
:mod:`tprimat.plugins.megatron_core.stream`; runs of iteration lines in a
file's bytes are read at once, as this parser reads each of them, by
:mod:`tprimat.plugins.megatron.fastlane`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from tprimat.contract.records import (
    MAX_STEP_TIME_S,
    REPEATED_LINE,
    EvalRecord,
    IterationRecord,
    LogFact,
    ParseIssue,
    RankPeak,
    is_memory_only,
)
from tprimat.contract.values import typed_value
from tprimat.plugins.megatron.fastlane import FastLane
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import (
    Event,
    LineError,
    StreamEvents,
    normal_key,
    parse_float,
    parse_int,
    parse_pair,
    parse_units,
)
from tprimat.plugins.megatron_core.memory_lines import (
    HIP_FIELD,
    MIB_PER_GIB,
    RankMemory,
    read_allocator,
    read_hip_usage,
)
from tprimat.plugins.megatron_core.stream import repeat_key

_ITERATION_RE = re.compile(r"(?<![A-Za-z_])iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
# The same without the look-behind, which would stop the regex engine from scanning for the
# literal "iteration" at C speed; `_find_iteration` checks the character before instead.
_ITERATION_AT_RE = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_MEGATRON_TS_RE = re.compile(r"\[(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]\s*$")
_PRIMUS_TS_RE = re.compile(r"\[(\d{4})(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})\]")
_VALIDATION_RE = re.compile(r"validation loss at iteration\s+(\d+)\s*\|\s*lm loss value:\s*([-+0-9.eEnaNinf]+)")
_ARG_RE = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*) \.{2,} (\S.*?)\s*$")
_RANK_PREFIX_RE = re.compile(r"^rank-\d+\s+")
_VERSION_RE = re.compile(r"\b(NCCL|RCCL|HIP|ROCm) version\s*:?\s+(\S+)")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity)", re.IGNORECASE)

#: Note recorded when Primus prints GiB values with a "GB" label.
GIB_LABEL_NOTE = "Primus prints 'GB' after values it computes as bytes / 1024**3: recorded as GiB (2**30 bytes)"

#: Arguments from Megatron's argument dump that are reported as facts (log name -> fact key).
FACT_ARGUMENTS: dict[str, str] = {
    "global_batch_size": "global_batch_size",
    "micro_batch_size": "micro_batch_size",
    "seq_length": "seq_length",
    "world_size": "world_size",
    "train_iters": "train_iters",
    "log_interval": "log_interval",
    "tensor_model_parallel_size": "tensor_parallel",
    "pipeline_model_parallel_size": "pipeline_parallel",
    "context_parallel_size": "context_parallel",
    "expert_model_parallel_size": "expert_parallel",
    "data_parallel_size": "data_parallel",
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_query_groups": "num_query_groups",
    "rampup_batch_size": "rampup_batch_size",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
}

#: Segment keys of the iteration line that a continuation line may start with.
KNOWN_KEYS = frozenset(
    {
        "consumed samples",
        "skipped samples",
        "elapsed time per iteration (ms)",
        "throughput per GPU (TFLOP/s/GPU)",
        "compute per GPU (TFLOP/s/GPU)",
        "tokens per GPU (tokens/s/GPU)",
        "tokens/s/GPU inst/harmonic mean",
        "tokens/sec/gpu",
        "learning rate",
        "global batch size",
        "lm loss",
        "loss scale",
        "grad norm",
        "num zeros",
        "params norm",
        "number of skipped iterations",
        "number of nan iterations",
        "load_balancing_loss",
        "mem usages",
        HIP_FIELD,
        "rocm mem usage/free/total/usage_ratio",
        "rocm max mem usage/usage_ratio",
    }
)


def _find_iteration(text: str) -> re.Match[str] | None:
    """The first ``iteration N/M |`` in ``text`` not preceded by a letter or "_" (as _ITERATION_RE)."""
    match = _ITERATION_AT_RE.search(text)
    while match is not None and match.start() and text[match.start() - 1] in _WORD_CHARS:
        match = _ITERATION_AT_RE.search(text, match.start() + 1)
    return match


def _other_number(name: str, value: str, fields: dict, reported: dict) -> None:
    """A segment no handler knows: kept as ``reported[name]`` when its value is one number."""
    number = _NUMBER_RE.fullmatch(value.strip())
    if number is not None:
        reported[name] = float(number.group(0))


def validation_record(line: str, source: str) -> EvalRecord | ParseIssue | None:
    """``validation loss at iteration N | lm loss value: X | lm loss PPL: Y |`` as an evaluation.

    The end-of-training lines (``... for val data``/``for test data``) carry no
    iteration and are not read.  The perplexity is exp(loss) and is not kept.
    """
    match = _VALIDATION_RE.search(strip_ansi(line))
    if match is None:
        return None
    try:
        loss = parse_float(match.group(2))
    except LineError as exc:
        return ParseIssue(source=source, message=f"unreadable validation loss ({exc}); skipped")
    return EvalRecord(iteration=int(match.group(1)), eval_loss=loss, source=source)


# What a copy of a line gives (see MegatronLogParser.copy_of): shared, never changed.
_NOTHING: list[Event] = []
_REPEATED: list[Event] = [REPEATED_LINE]


def _read_number(
    name: str, parse: Callable[[str], Any], into_reported: bool, value: str, fields: dict, reported: dict
) -> None:
    """A segment whose value is one number: ``fields[name]``, or ``reported[name]``."""
    (reported if into_reported else fields)[name] = parse(value)


def read_tokens(average_name: str, value: str, fields: dict, reported: dict) -> None:
    """A tokens-per-GPU segment, ``X/Y``: the instant figure, and the average as ``average_name``."""
    instant, average = parse_pair(value)
    reported["tokens_per_s_per_gpu"] = instant
    if average is not None:
        reported[average_name] = average


#: Segments whose value is one number: label -> (record field or reported name, reader, reported or not).
_NUMBER_SEGMENTS: dict[str, tuple[str, Callable[[str], Any], bool]] = {
    "consumed samples": ("consumed_samples", parse_int, False),
    "learning rate": ("lr", parse_float, False),
    "global batch size": ("global_batch_size", parse_int, False),
    "lm loss": ("loss", parse_float, False),
    "grad norm": ("grad_norm", parse_float, False),
    "number of skipped iterations": ("skipped", parse_int, False),
    "loss scale": ("loss_scale", parse_float, True),
    # Forks that add their own throughput segment (Pai-Megatron-Patch's "tokens/sec/gpu").
    "tokens/sec/gpu": ("tokens_per_s_per_gpu", parse_float, True),
    "mem usages": ("mem_usage_ratio", parse_float, True),
}
# What parse_float and parse_int come to for a value that is ASCII and free of "_" (the two
# things they check before calling float() or int()), but for a ValueError instead of a LineError.
_UNCHECKED: dict[Callable[[str], Any], Callable[[str], Any]] = {parse_float: float, parse_int: int}

# What one segment of an iteration line reads as: its fields, its reported values (two dicts,
# shared and never changed: they are only merged into a line's own), and its problem or None.
_SegmentRead = tuple[dict[str, Any], dict[str, Any], str | None]
# Segment text -> what it reads as (a pure function of the text, shared by every stream).  Only
# segments whose values repeat are kept: those of a key whose values keep changing (loss, learning
# rate, step time) are read afresh each time, by their key's reader (see `MegatronLogParser._segment`).
_SEGMENTS: dict[str, _SegmentRead] = {}
#: Entries of `_SEGMENTS` at most; then it starts afresh.
_SEGMENTS_HELD = 8192
#: A key whose segments were read this many times with a value not seen before is no longer cached.
_NEW_VALUES_CACHED = 32
_NO_VALUES: dict[str, Any] = {}  # never changed
_NOTHING_READ: _SegmentRead = (_NO_VALUES, _NO_VALUES, None)
# How the segments of one key are read: its handler or None, the key shown in a problem, whether
# its segments are cached, and for a number segment (see _NUMBER_SEGMENTS) its name, its reader
# for a value that is ASCII without "_", and whether it is reported.
_KeyEntry = tuple[Callable[[str, dict, dict], None] | None, str, bool, tuple[str, Callable[[str], Any], bool] | None]


class MegatronLogParser(StreamEvents):
    """Stateful reader of one stream of Megatron-family log lines.

    Call :meth:`feed` with each complete line and :meth:`finish` at the end;
    both return events (or None when a line holds nothing).  The stream is
    one file or one process's output: ``covers_iterations`` is worked out
    from consecutive iteration lines of the same stream.
    """

    name = "megatron-lm"
    #: Substrings that make a line worth reading (see :func:`iter_events`).
    triggers: tuple[str, ...] = ("iteration", " ....", "version")
    #: Once training has started (see ``started``) only these are looked for.
    running_triggers: tuple[str, ...] = ("iteration",)

    def __init__(self, source: str) -> None:
        self.source = source
        self.log_interval: int | None = None
        # The training loop has logged: an iteration line or a memory report was read (or a
        # variant's own step line, see PrimusLogParser).  Both come after the start-up lines (a
        # rank that prints no iteration lines, Megatron's non-last pipeline ranks, still prints
        # its memory report after the first interval).
        self.started = False
        self._previous_iteration: int | None = None
        self._previous_covers = 1
        self._facts: dict[str, Any] = {}
        self._pending: tuple[str, int] | None = None  # an iteration line continued on the next
        self._pending_reported: dict[str, float | str | None] = {}
        # Repeated lines (see `copy_of`): line key -> (iteration, covers or None for a memory
        # line, generation); an iteration's generation changes with each record of it but memory.
        # The last element: what a copy of the line needs to count its rank's memory figures.
        self._line_records: dict[bytes, tuple[int, int | None, int | None, Any]] = {}
        # Each rank's memory figures, from the lines read and their copies (see `rank_peaks`).
        self._rank_memory = RankMemory()
        self._line_memory: Any = None  # what the line just read gave `_rank_memory`
        self._segments = _SEGMENTS
        # A segment's key text as the line prints it -> how its segments are read (see `_key_entry`);
        # new values read per key (see `_segment`).
        self._keys: dict[str, _KeyEntry] = {}
        self._new_values: dict[str, int] = {}
        self._quiet: set[bytes] = set()
        self._generations: dict[int, int] = {}
        self._generation = 0
        self._handlers: dict[str, Callable[[str, dict, dict], None]] = {
            **{label: functools.partial(_read_number, *how) for label, how in _NUMBER_SEGMENTS.items()},
            "elapsed time per iteration (ms)": self._elapsed,
            "number of nan iterations": self._nan_iterations,
            "throughput per GPU (TFLOP/s/GPU)": self._tflops,
            "compute per GPU (TFLOP/s/GPU)": self._tflops,
            "tokens per GPU (tokens/s/GPU)": functools.partial(read_tokens, "tokens_per_s_per_gpu_avg"),
            "tokens/s/GPU inst/harmonic mean": functools.partial(read_tokens, "tokens_per_s_per_gpu_harmonic_mean"),
            HIP_FIELD: self._hip_memory,
            "rocm mem usage/free/total/usage_ratio": self._rocm_memory,
            "rocm max mem usage/usage_ratio": self._rocm_max_memory,
        }
        # Runs of iteration lines read at once from the bytes of a file (see fastlane.py).
        self.fast_lane: Any = FastLane(self)  # a variant may read other runs of lines too

    # -- helpers --------------------------------------------------------------------------

    def fact(self, key: str, value: Any, lineno: int) -> LogFact | None:
        """A fact, or None if this stream already stated the same value; a log interval is kept."""
        fact = super().fact(key, value, lineno)
        if fact is not None and key == "log_interval" and isinstance(value, int) and value > 0:
            self.log_interval = value
        return fact

    # -- the stream -----------------------------------------------------------------------

    def state(self) -> tuple:
        """What decides how the rest of the stream is read (compared to split a file safely)."""
        return (
            self.started,
            self.log_interval,
            self._previous_iteration,
            self._previous_covers,
            sorted(self._facts.items(), key=lambda item: item[0]),
            self._pending,
            sorted(self._pending_reported.items(), key=lambda item: item[0]),
        )

    def resume(self, state: tuple) -> None:
        """Continue a stream from :meth:`state` (the reading of a file's range begins there)."""
        (
            self.started,
            self.log_interval,
            self._previous_iteration,
            self._previous_covers,
            facts,
            self._pending,
            pending_reported,
        ) = state
        self._facts = dict(facts)
        self._pending_reported = dict(pending_reported)

    def state_is_clean(self) -> bool:
        """Nothing is held from earlier lines that a line's record would take in."""
        return self._pending is None and not self._pending_reported

    def copy_of(self, line: bytes) -> tuple[list[Event] | None, bytes | None]:
        """What reading ``line`` again would give, when it is a copy of a line already read.

        ``(events, key)``: ``events`` is None when the line must be read (with
        ``key``, its :func:`repeat_key` or None, for :meth:`remember`).  A copy of
        a line that gave nothing and changed nothing gives nothing, until a fact
        is stated (a copy could then state its value again).  Once training has
        started, a copy of an iteration line gives
        :data:`~tprimat.contract.records.REPEATED_LINE` when this stream's last
        record for that iteration came from a line with the same key and reading
        it again would give the same record (no held line, same previous
        iteration and interval); a copy of a memory line gives nothing when no
        other record for that iteration came since.  A copy from another rank
        adds that rank's memory figures (see :meth:`rank_peaks`).
        """
        if line in self._quiet:
            return _NOTHING, None
        if not self.started:
            return None, None
        key = repeat_key(line)
        if key is None:
            return None, None
        known = self._line_records.get(key)
        if known is None:
            return None, key
        iteration, covers, generation, memory = known
        if self._generations.get(iteration) != generation:
            return None, key
        if covers is None:
            copied = _NOTHING
        elif (
            self._pending is None
            and not self._pending_reported
            and self._previous_iteration == iteration
            and self._previous_covers == covers
        ):
            copied = _REPEATED
        else:
            return None, key
        if memory is not None:
            self._rank_memory.read_copy(line, memory)
        return copied, key

    def rank_peaks(self) -> list[RankPeak]:
        """Each rank's memory peaks in the lines read since the last call (the stream's or range's)."""
        return self._rank_memory.peaks()

    def remember(self, key: bytes | None, events: list[Event], clean_before: bool, line: bytes | None = None) -> None:
        """Note which line gave the records in ``events`` (``key`` None: not repeatable).

        ``clean_before``: the parser held nothing (no unfinished line, no pending
        values) when the line was read, so a copy of it reads the same.  A
        ``line`` that gave nothing and left nothing held gives nothing again
        (see :meth:`copy_of`), until a fact is stated.  Subclasses that keep
        state of their own, beyond facts and pending values, must extend
        :meth:`state_is_clean`.
        """
        if not events:
            if line is not None and clean_before and self.state_is_clean():
                if len(self._quiet) >= 4096:
                    self._quiet.clear()
                self._quiet.add(line)
            return
        one_record = len(events) == 1 and type(events[0]) is IterationRecord  # an iteration line's
        if self._quiet and not one_record and any(isinstance(e, LogFact) for e in events):
            self._quiet.clear()
        self._remember_records(key, events, clean_before, one_record)

    def _remember_records(self, key: bytes | None, events: list[Event], clean_before: bool, one_record: bool) -> None:
        """`remember` for ``events`` that hold records (``one_record``: only one, an :class:`IterationRecord`)."""
        if one_record:
            records: list[IterationRecord] = events  # type: ignore[assignment]  # the usual line: one record
        else:
            records = [e for e in events if isinstance(e, IterationRecord)]
            if not records:
                return
        generations = self._generations
        if len(generations) >= 4096:
            # Bounded like the line keys: a line key whose iteration's generation is gone is read again.
            generations.clear()
            self._line_records.clear()
        # A record with a step time is not memory-only (is_memory_only says so first): the usual one.
        full = [r for r in records if r.step_time_s is not None or not is_memory_only(r)]
        for record in full:
            self._generation += 1
            generations[record.iteration] = self._generation
        if key is None or len(events) != 1:
            return
        if len(self._line_records) >= 256:
            self._line_records.clear()
        record = records[0]
        memory = self._line_memory
        if full:
            if clean_before:
                self._line_records[key] = (
                    record.iteration,
                    record.covers_iterations,
                    generations[record.iteration],
                    memory,
                )
        else:
            self._line_records[key] = (record.iteration, None, generations.get(record.iteration), memory)

    def holds_line(self) -> bool:
        """Whether an iteration line continued on the next line is being held."""
        return self._pending is not None

    def feed(self, line: str, lineno: int) -> list[Event] | None:
        """Events read from one complete line (its memory figures go to :meth:`rank_peaks`)."""
        self._line_memory = self._rank_memory.read_line(line) if "mem" in line else None
        held: list[Event] | None = None
        if self._pending is not None:
            held, consumed = self._continue_pending(line, lineno)
            if consumed:
                return held
        found = self._read(line, lineno)
        if held:
            return held + (found or [])
        return found

    def _read(self, line: str, lineno: int) -> list[Event] | None:
        if "iteration" in line:
            found = self._iteration_or_memory(line, lineno)
            if found is not None:
                return found
            if "validation loss at iteration" in line:
                evaluation = validation_record(line, self.where(lineno))
                if evaluation is not None:
                    return [evaluation]
        if " ...." in line:
            found = self._argument(line, lineno)
            if found is not None:
                return found
        return self.extra_line(line, lineno)

    def finish(self) -> list[Event]:
        """Events still held at the end of the stream (an unfinished iteration line)."""
        if self._pending is not None:
            _, lineno = self._pending
            self._pending = None
            return [self.issue(lineno, "iteration line cut off at the end of the log; skipped")]
        return []

    def extra_line(self, line: str, lineno: int) -> list[Event] | None:
        """Other lines worth a fact: library versions.  Subclasses add their variant's lines."""
        if "version" in line:
            match = _VERSION_RE.search(line)
            if match is not None:
                name, value = match.group(1), match.group(2)
                if name in ("NCCL", "RCCL"):
                    fact = self.fact("collectives", f"{name} {value}", lineno)
                else:
                    fact = self.fact(f"{name.lower()}_version", value, lineno)
                return [fact] if fact is not None else []
        return None

    # -- iteration and memory lines ---------------------------------------------------------

    def _iteration_or_memory(self, line: str, lineno: int) -> list[Event] | None:
        if "|" not in line:
            return None  # both lines have a "|" after their key (stripping colour adds none)
        clean = strip_ansi(line)
        match = _find_iteration(clean)
        if match is not None:
            body = clean[match.end() :]
            if body.rfind("number of nan iterations") < 0:  # from the end, where the segment is
                if body.rstrip().endswith("|"):
                    self._pending = (clean.rstrip("\r\n"), lineno)
                    return []
                return [
                    self.issue(
                        lineno, "iteration line is incomplete (cut off or interleaved with another line); skipped"
                    )
                ]
            return self._iteration(clean, match, lineno, body)
        if "memory (MB)" in clean:
            return self._memory(clean, lineno)
        return None

    def _continue_pending(self, line: str, lineno: int) -> tuple[list[Event] | None, bool]:
        assert self._pending is not None
        text, start = self._pending
        clean = strip_ansi(line).strip()
        key = clean.split(":", 1)[0].strip()
        if clean and key in KNOWN_KEYS:
            joined = f"{text.rstrip()} {clean}"
            if "number of nan iterations" in joined:
                self._pending = None
                match = _find_iteration(joined)
                assert match is not None
                return self._iteration(joined, match, start), True
            self._pending = (joined, start)
            return None, True
        if not clean:
            return None, True  # a blank line inside a wrapped iteration line
        self._pending = None
        return [
            self.issue(start, "iteration line is incomplete (cut off or interleaved with another line); skipped")
        ], False

    def _iteration(self, clean: str, match: re.Match[str], lineno: int, body: str | None = None) -> list[Event]:
        """The record of an iteration line (``body``: its text after ``match``, if already cut)."""
        events: list[Event] = []
        try:
            iteration = int(match.group(1))
            total = int(match.group(2))
        except ValueError:  # thousands of digits: no iteration count
            return [self.issue(lineno, "iteration number too long to be a count; line skipped")]
        fields, reported, problems = self._read_segments(clean[match.end() :] if body is None else body)
        if problems:
            # A value that does not read as its label says: keep nothing from this line.
            return [self.issue(lineno, "unreadable iteration line (" + "; ".join(problems) + "); skipped")]
        step = fields.get("step_time_s")
        if step is not None and not 0 < step <= MAX_STEP_TIME_S:
            why = "" if step <= 0 else ", not a physical step time (not finite, or longer than a day)"
            return [self.issue(lineno, f"elapsed time per iteration is {step * 1000:g} ms{why}; line skipped")]
        if self._pending_reported:
            reported = {**self._pending_reported, **reported}
            self._pending_reported = {}
        # An interval holds at least the iterations it skipped (first line of an excerpt).
        covers = max(self._covers(iteration), fields.get("skipped", 0))
        timestamp = self._timestamp(clean[: match.start()])
        events.extend(self._line_facts(total, fields, lineno))
        try:
            record = IterationRecord(
                iteration=iteration,
                covers_iterations=covers,
                timestamp=timestamp,
                source=self.where(lineno),
                reported=reported,
                **fields,
            )
        except (TypeError, ValueError) as exc:
            return [*events, self.issue(lineno, f"iteration line rejected: {exc}")]
        events.append(record)
        self.started = True
        return events

    def _read_segments(self, tail: str) -> tuple[dict[str, Any], dict[str, float | str | None], list[str]]:
        """The fields, reported values and problems of an iteration line's segments.

        The segments are the text between the "|"s after the iteration count; one without a ":"
        reads as nothing.  In the order of the line: a later segment's value replaces an earlier one's.
        A segment read before is looked up (see `_segment`).  The segment of a key whose values
        keep changing is read here: a number by float() or int() when its value is ASCII without
        "_" (all that parse_float and parse_int check first), anything else by its handler.
        """
        cache = self._segments
        keys = self._keys
        fields: dict[str, Any] = {}
        reported: dict[str, float | str | None] = {}
        problems: list[str] = []
        for segment in tail.split("|"):
            read = cache.get(segment)
            if read is None:
                key, colon, value = segment.partition(":")
                entry = keys.get(key) if colon else None
                if entry is not None and not entry[2]:  # a key whose values keep changing
                    number = entry[3]
                    if number is not None and value.isascii() and "_" not in value:
                        try:
                            (reported if number[2] else fields)[number[0]] = number[1](value)
                            continue
                        except ValueError:
                            pass  # its handler tells why
                    try:
                        entry[0](value, fields, reported)  # type: ignore[misc]  # not cached: a handler
                    except LineError as exc:
                        problems.append(f"{entry[1]}: {exc}")
                    continue
                read = self._segment(segment)
            fields_read, reported_read, problem = read
            if fields_read:
                fields.update(fields_read)
            if reported_read:
                reported.update(reported_read)
            if problem is not None:
                problems.append(problem)
        return fields, reported, problems

    def _line_facts(self, total: int, fields: dict[str, Any], lineno: int) -> list[Event]:
        """Facts an iteration line states the first time: the run's length, its global batch, and
        that its memory figures are GiB labelled GB (the label is taken out of ``fields``)."""
        stated = self._facts
        facts: list[Event] = []
        if "train_iters" not in stated or "global_batch_size" not in stated:  # else stated already
            for key, value in (("train_iters", total), ("global_batch_size", fields.get("global_batch_size"))):
                if value is not None and key not in stated:
                    fact = self.fact(key, value, lineno)
                    if fact is not None:
                        facts.append(fact)
        if "_gib_label" in fields:
            del fields["_gib_label"]
            if stated.get("note.gib_labelled_gb") != GIB_LABEL_NOTE:  # else `fact` gives None
                fact = self.fact("note.gib_labelled_gb", GIB_LABEL_NOTE, lineno)
                if fact is not None:
                    facts.append(fact)
        return facts

    def _segment(self, segment: str) -> _SegmentRead:
        """What one ``key: value`` segment adds to the fields and reported values, or its problem.

        A pure function of the text: kept in `_SEGMENTS` and looked up while its key's values
        repeat from line to line; a key whose values keep changing (loss, learning rate, step
        time) is no longer cached (`_read_segments` reads its segments).  The key ends at the
        first ":"; a segment without one adds nothing.
        """
        key, colon, value = segment.partition(":")
        if not colon:
            read = _NOTHING_READ
        else:
            entry = self._keys.get(key)
            if entry is None:
                entry = self._key_entry(key)
            handler, shown, _, number = entry  # cached: `_read_segments` reads the others
            if handler is None:
                read = _NOTHING_READ
            else:
                own_fields: dict[str, Any] = {}
                own_reported: dict[str, float | str | None] = {}
                try:
                    handler(value, own_fields, own_reported)
                    read = (own_fields, own_reported, None)
                except LineError as exc:
                    read = (_NO_VALUES, _NO_VALUES, f"{shown}: {exc}")
                new = self._new_values[key] = self._new_values.get(key, 0) + 1
                if new > _NEW_VALUES_CACHED:
                    self._keys[key] = (handler, shown, False, number)  # its values keep changing
        cache = self._segments
        if len(cache) >= _SEGMENTS_HELD:
            cache.clear()
        cache[segment] = read
        return read

    def _key_entry(self, key: str) -> _KeyEntry:
        """How the segments of ``key`` (as the line prints it) are read: see `_segment`."""
        if len(self._keys) >= 1024:  # keys a log prints are few; junk keys must not pile up
            self._keys.clear()
            self._new_values.clear()
        shown = key.strip()
        handler = self._handlers.get(shown)
        if handler is None:
            shown = _RANK_PREFIX_RE.sub("", shown)
            handler = self._handlers.get(shown)
        if handler is None and shown and len(shown) < 60:
            handler = functools.partial(_other_number, normal_key(shown))
        number = None
        if isinstance(handler, functools.partial) and handler.func is _read_number:
            name, parse, into_reported = handler.args
            number = (name, _UNCHECKED[parse], into_reported)
        entry = (handler, shown, True, number)
        self._keys[key] = entry
        return entry

    def _covers(self, iteration: int) -> int:
        previous = self._previous_iteration
        if previous is not None and iteration == previous:
            covers = self._previous_covers  # the same line again (another rank, a copy)
        elif previous is not None and iteration > previous:
            covers = iteration - previous
            if self.log_interval and covers > self.log_interval:
                covers = self.log_interval  # lines are missing in between, not a longer interval
        elif self.log_interval and iteration >= self.log_interval:
            covers = self.log_interval  # first line, or a restart from a checkpoint
        else:
            covers = 1
        self._previous_iteration = iteration
        self._previous_covers = covers
        return covers

    @staticmethod
    def _timestamp(prefix: str) -> str | None:
        # Megatron's stamp ends the prefix and holds no "[": it can only start at the last one.
        last = prefix.rfind("[")
        found = _MEGATRON_TS_RE.match(prefix, last) if last >= 0 else None
        if found is not None:
            return f"{found.group(1)}T{found.group(2)}"
        found = _PRIMUS_TS_RE.search(prefix)
        if found is not None:
            y, m, d, hms = found.groups()
            return f"{y}-{m}-{d}T{hms}"
        return None

    def _memory(self, clean: str, lineno: int) -> list[Event] | None:
        report = read_allocator(clean)
        if report is None or report.iteration is None:
            return None
        if report.problem is not None:
            return [self.issue(lineno, f"unreadable memory line ({report.problem}); skipped")]
        if not report.mib:
            return [self.issue(lineno, "memory line without values; skipped")]
        values: dict[str, Any] = {f"mem_{name}_gib": mib / MIB_PER_GIB for name, mib in report.mib.items()}
        try:
            record = IterationRecord(iteration=report.iteration, source=self.where(lineno), **values)
        except (TypeError, ValueError) as exc:
            return [self.issue(lineno, f"memory line rejected: {exc}")]
        self.started = True
        return [record]

    # -- the argument dump ----------------------------------------------------------------

    def _argument(self, line: str, lineno: int) -> list[Event] | None:
        match = _ARG_RE.search(strip_ansi(line).rstrip())
        if match is None:
            return None
        key = FACT_ARGUMENTS.get(match.group(1))
        if key is None or match.group(2) == "None":
            return []
        fact = self.fact(key, typed_value(match.group(2)), lineno)
        return [fact] if fact is not None else []

    # -- segment handlers -----------------------------------------------------------------

    @staticmethod
    def _elapsed(value: str, fields: dict, reported: dict) -> None:
        instant, average = parse_pair(value)
        fields["step_time_s"] = instant / 1000.0
        if average is not None:
            reported["elapsed_time_per_iteration_ms_avg"] = average

    @staticmethod
    def _nan_iterations(value: str, fields: dict, reported: dict) -> None:
        count = parse_int(value)
        if not 0 <= count <= 2**53:  # a count of iterations, kept as a float: exactly
            raise LineError(f"not a count of iterations: {value.strip()[:40]!r}")
        reported["nan_iterations"] = float(count)

    @staticmethod
    def _tflops(value: str, fields: dict, reported: dict) -> None:
        instant, average = parse_pair(value)
        reported["tflops_per_gpu"] = instant
        if average is not None:
            reported["tflops_per_gpu_avg"] = average

    @staticmethod
    def _hip_memory(value: str, fields: dict, reported: dict) -> None:
        used, total = read_hip_usage(value)
        fields["mem_device_used_gib"] = used
        fields["mem_device_total_gib"] = total
        fields["_gib_label"] = True

    @staticmethod
    def _rocm_memory(value: str, fields: dict, reported: dict) -> None:
        used, total = parse_units(value, 4, (0, 2))
        reported["rocm_smi_mem_used_gib"] = used
        reported["rocm_smi_mem_total_gib"] = total
        fields["_gib_label"] = True

    @staticmethod
    def _rocm_max_memory(value: str, fields: dict, reported: dict) -> None:
        (used,) = parse_units(value, 2, (0,))
        reported["rocm_smi_max_mem_used_gib_all_ranks"] = used
        fields["_gib_label"] = True
