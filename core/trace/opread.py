"""Read a Kineto trace with its CPU operators, and say which operator launched each GPU activity.

:func:`read_ops` streams a trace as :func:`tprimat.trace.reader.read_trace` does
(the same blocks, limits and malformed-event accounting, the same ranges of one
large file on several processes) and keeps, besides the GPU activity, launches
and profiler steps of a :class:`~tprimat.trace.reader.RankTrace`:

* every CPU operator (``cpu_op``): start, end, host thread and its **signature**,
  the operator's name with the raw text of its ``Input Dims``, ``Input type`` and
  ``Concrete Inputs``, interned (a training step repeats a few hundred
  signatures many times, so memory grows with the operators, not with their
  arguments);
* the host thread of every launch (``cuda_runtime``/``cuda_driver`` event with a
  ``correlation``).

**Which operator launched a GPU activity.**  The activity's ``correlation`` names
its launch; the launch runs on a host thread inside a stack of operators (time
containment on that thread, the way the profiler nests them).  The activity is
attributed to the *outermost operator of that stack whose cost can be computed*
(:mod:`tprimat.trace.opcost`): ``aten::linear`` rather than the ``aten::mm`` it
calls, ``aten::scaled_dot_product_attention`` rather than the flash kernel's
operator, so that one call's time is every kernel it launched and two vendors'
traces of the same model group the same way even where PyTorch dispatches to
different inner operators.  Where no operator of the stack can be costed, the
outermost known one is taken (listed with the reason it has no cost), and where
none is known, the innermost one (the direct launcher, listed as "unknown op").
An activity whose launch lies inside no operator, or has no launch, is attributed
to no operator.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import attrs
import msgspec

from tprimat.trace.categories import MAX_NAME_CHARS, canonical_category
from tprimat.trace.fastread import EventArray
from tprimat.trace.limits import INT64, MAX_ABS_TS_US, MAX_DUR_US, int_problem
from tprimat.trace.opcost import OpCost, op_cost
from tprimat.trace.reader import (
    ACTIVITY_CODES,
    PROFILER_STEP,
    ProfilerStep,
    RankTrace,
    TraceHead,
    append_range,
    check_usable,
    count_skipped,
    finish_trace,
    range_events,
    read_split_or_whole,
    trace_events,
)

#: The raw text of an operator's ``Input Dims``, ``Input type`` or ``Concrete Inputs`` is kept up
#: to this many bytes; longer (a tensor list of thousands of tensors) counts as not recorded.
MAX_ARGUMENT_BYTES = 64 * 1024
_TOO_LONG = b'"too long"'
_NOT_RECORDED = msgspec.Raw(b"")


class OpArgs(
    msgspec.Struct,
    forbid_unknown_fields=False,
    gc=False,
    rename={
        "dims": "Input Dims",
        "types": "Input type",
        "concrete": "Concrete Inputs",
    },
):
    """The arguments read: the GPU activity's stream and correlation, an operator's recorded inputs."""

    stream: Any = None
    correlation: Any = None
    dims: msgspec.Raw = _NOT_RECORDED
    types: msgspec.Raw = _NOT_RECORDED
    concrete: msgspec.Raw = _NOT_RECORDED


class OpEvent(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """One trace event with the fields the operator analysis reads, their types checked."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    ts: Annotated[float, msgspec.Meta(ge=-MAX_ABS_TS_US, le=MAX_ABS_TS_US)] | None = None
    dur: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_DUR_US)] | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: OpArgs | None = None


class _OpArray(EventArray):
    """The event array decoded into :class:`OpEvent`.

    Raw argument text refers to the buffer it was decoded from, so each block is decoded
    from a copy of its own (the reader reuses its buffer)."""

    block_decoder = msgspec.json.Decoder(list[OpEvent])
    event_decoder = msgspec.json.Decoder(OpEvent)

    def _decode(self, text: memoryview | bytes) -> list[Any]:
        return super()._decode(bytes(text))


_ACTIVITY_INDEX = {cat: i for i, cat in enumerate(ACTIVITY_CODES)}
_LAUNCH, _CPU_OP, _GPU_ANNOTATION, _OTHER = -1, -2, -3, -4


def _kind(cat: object) -> int:
    canonical = canonical_category(cat)
    if canonical is None:
        return _OTHER  # not a string: no category
    code = _ACTIVITY_INDEX.get(canonical)
    if code is not None:
        return code
    if canonical in ("cuda_runtime", "cuda_driver"):
        return _LAUNCH
    if canonical == "cpu_op":
        return _CPU_OP
    return _GPU_ANNOTATION if canonical == "gpu_user_annotation" else _OTHER


@attrs.define
class OpTrace:
    """One rank's trace: its :class:`~tprimat.trace.reader.RankTrace` plus operators and launch threads."""

    trace: RankTrace
    #: (name, Input Dims, Input type, Concrete Inputs) text of each signature, by id.
    signatures: list[tuple[str, bytes, bytes, bytes]] = attrs.Factory(list)
    threads: list[tuple[Any, Any]] = attrs.Factory(list)  # (pid, tid) by id
    op_ts: array = attrs.Factory(lambda: array("d"))
    op_end: array = attrs.Factory(lambda: array("d"))
    op_thread: array = attrs.Factory(lambda: array("l"))
    op_sig: array = attrs.Factory(lambda: array("l"))
    launch_thread: array = attrs.Factory(lambda: array("l"))  # aligned with trace.launch_correlation
    _costs: dict[int, OpCost] = attrs.Factory(dict)

    @property
    def has_shapes(self) -> bool:
        return any(dims for _, dims, _, _ in self.signatures)

    def decoded(self, sig: int) -> tuple[str, Any, Any, Any]:
        """Signature ``sig`` as (name, dims, types, concrete), the last three decoded (None: not recorded)."""
        name, dims, types, concrete = self.signatures[sig]
        return name, _decode(dims), _decode(types), _decode(concrete)

    def cost(self, sig: int) -> OpCost:
        """The cost of one call with signature ``sig`` (computed once per signature)."""
        found = self._costs.get(sig)
        if found is None:
            name, dims, types, concrete = self.decoded(sig)
            found = self._costs[sig] = op_cost(name, dims, types, concrete)
            if found.known and (dims == "too long" or types == "too long"):
                found = self._costs[sig] = OpCost(kind=found.kind, reason="shapes too long to keep")
        return found


def _decode(text: bytes) -> Any:
    if not text:
        return None
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return "malformed"


def _bounded(key: tuple[str, bytes, bytes, bytes]) -> tuple[str, bytes, bytes, bytes]:
    """A signature as kept: each argument text of more than :data:`MAX_ARGUMENT_BYTES` marked too long."""
    name, *texts = key
    if all(len(text) <= MAX_ARGUMENT_BYTES for text in texts):
        return key
    dims, types, concrete = (_TOO_LONG if len(text) > MAX_ARGUMENT_BYTES else text for text in texts)
    return name, dims, types, concrete


class _Taker:
    """Fills an :class:`OpTrace` from events, one method per kind of event (names, signatures and
    threads interned in order of appearance)."""

    def __init__(self, ops: OpTrace) -> None:
        self.ops = ops
        self.trace = ops.trace
        self.names: dict[str, int] = {name: index for index, name in enumerate(ops.trace.names)}
        self.sigs: dict[tuple[str, bytes, bytes, bytes], int] = {s: i for i, s in enumerate(ops.signatures)}
        self.threads: dict[tuple[Any, Any], int] = {t: i for i, t in enumerate(ops.threads)}
        self.op_ts, self.op_end = ops.op_ts.append, ops.op_end.append
        self.op_thread, self.op_sig = ops.op_thread.append, ops.op_sig.append

    def thread_of(self, event: OpEvent) -> int:
        key = (event.pid, event.tid)
        found = self.threads.get(key)
        if found is None:
            found = self.threads[key] = len(self.ops.threads)
            self.ops.threads.append(key)
        return found

    def op(self, event: OpEvent) -> None:
        name, ts, dur, args = event.name, event.ts, event.dur, event.args
        if not name or ts is None or dur is None or (event.ph is not None and event.ph != "X"):
            return
        if name.startswith("ProfilerStep"):
            _step(self.trace, name, ts, dur)
            return
        if args is None:
            key = (name[:MAX_NAME_CHARS], b"", b"", b"")
        else:
            key = (name[:MAX_NAME_CHARS], bytes(args.dims), bytes(args.types), bytes(args.concrete))
        sig = self.sigs.get(key)
        if sig is None:
            sig = self.sigs[key] = len(self.ops.signatures)
            self.ops.signatures.append(_bounded(key))
        self.op_ts(ts)
        self.op_end(ts + dur)
        self.op_thread(self.thread_of(event))
        self.op_sig(sig)

    def activity(self, event: OpEvent, code: int, index: int) -> None:
        dur, ts, args = event.dur, event.ts, event.args
        if dur is None or ts is None or (event.ph is not None and event.ph != "X"):
            return
        stream_id = correlation = -1
        if args is not None:
            stream_id = -1 if args.stream is None else args.stream
            correlation = -1 if args.correlation is None else args.correlation
            problem = _int64_problem(stream_id, correlation)
            if problem:
                count_skipped(self.trace, index, problem, True)
                return
        trace = self.trace
        name = event.name or ""
        nid = self.names.get(name)
        if nid is None:
            nid = self.names[name] = len(trace.names)
            trace.names.append(name)
        trace.ts.append(ts)
        trace.dur.append(dur)
        trace.name_id.append(nid)
        trace.code.append(code)
        trace.stream.append(stream_id)
        trace.correlation.append(correlation)

    def launch(self, event: OpEvent, index: int) -> None:
        args = event.args
        if args is None or args.correlation is None or event.ts is None:
            return
        correlation = args.correlation
        if type(correlation) is not int or not INT64[0] <= correlation <= INT64[1]:
            count_skipped(self.trace, index, int_problem("args.correlation", correlation) or "?", False)
            return
        self.trace.launch_correlation.append(correlation)
        self.trace.launch_ts.append(event.ts)
        self.ops.launch_thread.append(self.thread_of(event))

    def other(self, event: OpEvent) -> None:
        name = event.name
        if name and name.startswith("ProfilerStep") and event.ts is not None and event.dur is not None:
            _step(self.trace, name, event.ts, event.dur)


def _int64_problem(stream: Any, correlation: Any) -> str | None:
    low, high = INT64
    if type(stream) is int and type(correlation) is int and low <= stream <= high and low <= correlation <= high:
        return None
    return int_problem("args.stream", stream) or int_problem("args.correlation", correlation) or "?"


def _take(ops: OpTrace, stream: Iterator[Any]) -> None:
    """Add the events of ``stream`` to ``ops``: each dispatched by its category to :class:`_Taker`."""
    taker = _Taker(ops)
    take_op, take_activity, take_launch, take_other = taker.op, taker.activity, taker.launch, taker.other
    kinds: dict[Any, int] = {}
    trace = ops.trace
    events = trace.events
    try:
        for event in stream:
            events += 1
            if type(event) is not OpEvent:
                count_skipped(trace, events - 1, event.problem, event.activity)
                continue
            code = kinds.get(event.cat)
            if code is None:
                code = _kind(event.cat)
                if len(kinds) < 4096:
                    kinds[event.cat] = code
            if code == _CPU_OP:
                take_op(event)
            elif code >= 0:
                take_activity(event, code, events - 1)
            elif code == _LAUNCH:
                take_launch(event, events - 1)
            elif code != _GPU_ANNOTATION and event.name and event.name.startswith("ProfilerStep"):
                take_other(event)
    finally:
        trace.events = events


def _step(trace: RankTrace, name: str, ts: float, dur: float) -> None:
    match = PROFILER_STEP.match(name)
    if match:
        trace.steps.append(ProfilerStep(int(match.group(1)), ts, dur))


# -- reading ------------------------------------------------------------------------------------


def read_ops(path: str | Path, workers: int = 1) -> OpTrace:
    """Read one rank's trace with its operators (see the module docstring), streaming.

    With ``workers`` above 1 a large plain file is read in ranges on that many processes,
    as :func:`~tprimat.trace.reader.read_trace` reads it.  Raises
    :class:`~tprimat.trace.reader.TraceFormatError` for a broken file or one past a limit.
    """
    ops = read_split_or_whole(Path(path), workers, _read_ranges, _read_whole)
    check_usable(ops.trace)
    return ops


def _read_whole(path: Path, head: TraceHead) -> OpTrace:
    ops = OpTrace(trace=RankTrace(path=path, metadata=dict(head.metadata)))
    after: dict[str, Any] = {}
    with trace_events(path, head, after, _OpArray) as events:
        _take(ops, events)
    finish_trace(ops.trace, after)
    return ops


def _read_range(job: tuple[Path, str, int, int | None]) -> tuple[OpTrace, dict[str, Any]]:
    ops = OpTrace(trace=RankTrace(path=job[0]))
    after: dict[str, Any] = {}
    with range_events(job, after, _OpArray) as events:
        _take(ops, events)
    return ops, after


def _read_ranges(path: Path, head: TraceHead, ranges: list[tuple[int, int | None]], workers: int) -> OpTrace:
    """The trace from its ranges, read on ``workers`` processes and joined in order."""
    from tprimat.workers import map_files

    parts = map_files(_read_range, [(path, head.prefix, start, end) for start, end in ranges], workers)
    ops = OpTrace(trace=RankTrace(path=path, metadata=dict(head.metadata)))
    trace = ops.trace
    names: dict[str, int] = {}
    sigs: dict[tuple[str, bytes, bytes, bytes], int] = {}
    threads: dict[tuple[Any, Any], int] = {}
    after: dict[str, Any] = {}
    for part, part_after in parts:
        append_range(trace, part.trace, names)
        sig_ids = [sigs.setdefault(sig, len(sigs)) for sig in part.signatures]
        thread_ids = [threads.setdefault(t, len(threads)) for t in part.threads]
        ops.op_sig.extend(map(sig_ids.__getitem__, part.op_sig))
        ops.op_thread.extend(map(thread_ids.__getitem__, part.op_thread))
        ops.launch_thread.extend(map(thread_ids.__getitem__, part.launch_thread))
        ops.op_ts.extend(part.op_ts)
        ops.op_end.extend(part.op_end)
        after = part_after or after
    trace.names.extend(names)
    ops.signatures.extend(sigs)
    ops.threads.extend(threads)
    finish_trace(trace, after)
    return ops


# -- attribution ------------------------------------------------------------------------------

#: What the cost model makes of a signature, for attribution: costed, known but not costed, unknown.
_COSTED, _KNOWN, _UNKNOWN = 2, 1, 0
#: Nested intervals are compared with this slack (µs): the profiler's times are rounded to the ns.
_SLACK_US = 1e-3


def launch_targets(ops: OpTrace) -> array:
    """For each launch (index into ``trace.launch_correlation``), the operator it is attributed to
    (an index into the operator arrays; -1: none).  See the module docstring for the rule."""
    status: dict[int, int] = {}

    def status_of(sig: int) -> int:
        found = status.get(sig)
        if found is None:
            cost = ops.cost(sig)
            found = status[sig] = _COSTED if cost.costed else _KNOWN if cost.known else _UNKNOWN
        return found

    targets = array("l", [-1]) * len(ops.launch_thread)
    by_thread_ops: dict[int, list[int]] = defaultdict(list)
    for index, thread in enumerate(ops.op_thread):
        by_thread_ops[thread].append(index)
    by_thread_launches: dict[int, list[int]] = defaultdict(list)
    for index, thread in enumerate(ops.launch_thread):
        by_thread_launches[thread].append(index)
    op_ts, op_end, op_sig = ops.op_ts, ops.op_end, ops.op_sig
    launch_ts = ops.trace.launch_ts
    for thread, launches in by_thread_launches.items():
        members = by_thread_ops.get(thread)
        if not members:
            continue
        if not _nested_order(members, op_ts, op_end):
            members.sort(key=lambda i: (op_ts[i], -op_end[i]))
        if any(launch_ts[launches[j]] > launch_ts[launches[j + 1]] for j in range(len(launches) - 1)):
            launches.sort(key=launch_ts.__getitem__)
        # the stack of operators open at the current time, with for each depth the outermost
        # costed and the outermost known operator at or above it
        stack: list[int] = []
        costed: list[int] = []
        known: list[int] = []
        position, count = 0, len(members)
        for launch in launches:
            t = launch_ts[launch]
            while position < count and op_ts[members[position]] <= t + _SLACK_US:
                op = members[position]
                position += 1
                end = op_end[op]
                while stack and op_end[stack[-1]] + _SLACK_US < end:
                    stack.pop()
                    costed.pop()
                    known.pop()
                state = status_of(op_sig[op])
                outer_costed = costed[-1] if costed else -1
                outer_known = known[-1] if known else -1
                stack.append(op)
                costed.append(outer_costed if outer_costed >= 0 else (op if state == _COSTED else -1))
                known.append(outer_known if outer_known >= 0 else (op if state >= _KNOWN else -1))
            while stack and op_end[stack[-1]] + _SLACK_US < t:
                stack.pop()
                costed.pop()
                known.pop()
            if stack:
                target = costed[-1]
                if target < 0:
                    target = known[-1]
                targets[launch] = target if target >= 0 else stack[-1]
    return targets


def _nested_order(members: list[int], ts: array, end: array) -> bool:
    """Whether ``members`` are already in (start, longest first) order, as the profiler usually writes them."""
    for a, b in zip(members, members[1:], strict=False):
        if ts[a] > ts[b] or (ts[a] == ts[b] and end[a] < end[b]):
            return False
    return True


def activity_operators(ops: OpTrace) -> array:
    """For each GPU activity of the trace, the operator it is attributed to (-1: none)."""
    targets = launch_targets(ops)
    by_correlation = dict(zip(ops.trace.launch_correlation, targets, strict=True))
    get = by_correlation.get
    return array("l", (get(c, -1) if c >= 0 else -1 for c in ops.trace.correlation))


__all__ = ["OpEvent", "OpTrace", "activity_operators", "launch_targets", "read_ops"]
