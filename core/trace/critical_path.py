"""The critical path of one profiled step: the chain of host and GPU work that set its length.

One step of a Kineto trace is turned into a dependency graph whose nodes are the
start and the end of every CPU operator, runtime call and GPU activity, and
whose edges say what had to happen before what:

* **host nesting**: on each CPU thread, operators and runtime calls follow one
  another and nest; the time between two consecutive points of a thread is an
  edge weighted with that time (host work), given to the operator it lies in.
  Consecutive top-level operators are linked with weight 0 (the gap between them
  is not attributed to anything).
* **launch**: a runtime call (``cudaLaunchKernel``, ``hipLaunchKernel``,
  ``cudaMemcpyAsync`` …) starts the GPU activity with the same correlation id.
  When the activity's stream was empty at the call, the wait from the call to
  the activity's start is a *launch delay*; otherwise the activity waited for
  its stream, not for its launch, and no edge is drawn (as in HTA: an edge of
  weight 0 would let host work that overlapped the GPU's backlog onto the path).
* **stream order**: activities on one GPU stream run one after the other; the gap
  between two of them, when the second was already queued, is *GPU idle*.
* **synchronisation**: ``cudaStreamSynchronize``/``cudaDeviceSynchronize`` (and
  HIP's) end after the last activity on the stream (on every stream);
  ``cudaEventSynchronize`` after the activity launched before the matching
  ``cudaEventRecord``; ``cudaStreamWaitEvent`` makes the next activity launched
  on the waiting stream start after that activity.  These edges weigh 0, and the
  time a blocking call spends waiting is not counted as host work (the GPU work it
  waits for is on the path instead).
* **collectives** are GPU activities like any other: their time on the path is
  communication.

The critical path is the longest path of that graph (weights in µs).  The model
follows HolisticTraceAnalysis's critical-path analysis, so that the two can be
checked against each other (``tools/hta_critical_path.py``), with one chosen
difference: HTA draws a launch edge only if, besides an idle stream at the call,
no later launch reached the stream before the activity started (docs/traces.md
shows where that matters).  Its length is the
sum of the weighted edges on it; ``span_us`` is the time from its first to its
last node, and the difference (``unattributed_us``) is the time the zero-weight
edges skip (gaps between top-level operators, waits inside blocking calls).

The trace is read in three bounded passes (:class:`_Events`): the window, the
host events in it, and the GPU activity those host events launched; nothing
outside the step is kept.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import attrs
import msgspec

from tprimat.errors import TprimatError
from tprimat.trace.categories import TEMPORAL_CLASS, canonical_category, classify
from tprimat.trace.fastread import EventArray
from tprimat.trace.limits import MAX_ABS_TS_US, MAX_DUR_US
from tprimat.trace.reader import PROFILER_STEP, read_trace_head, trace_events

# -- reading one step -------------------------------------------------------------------------


class _Args(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    correlation: Any = None
    stream: Any = None
    wait_on_stream: Any = None
    wait_on_cuda_event_record_corr_id: Any = None


_Ts = msgspec.Meta(ge=-MAX_ABS_TS_US, le=MAX_ABS_TS_US)
_Dur = msgspec.Meta(ge=0.0, le=MAX_DUR_US)


class _Event(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """The fields of a trace event the graph needs (thread, correlation, sync arguments)."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    ts: Annotated[float, _Ts] | None = None
    dur: Annotated[float, _Dur] | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: _Args | None = None


class _Events(EventArray):
    """The event array decoded into :class:`_Event`."""

    block_decoder = msgspec.json.Decoder(list[_Event])
    event_decoder = msgspec.json.Decoder(_Event)


_HOST = frozenset({"cpu_op", "cuda_runtime", "cuda_driver"})
_RUNTIME = frozenset({"cuda_runtime", "cuda_driver"})
_GPU = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Calls that block the host until GPU work is done: their own duration is waiting, not work.
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventQuery",
        "hipEventSynchronize",
        "hipMemcpy",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
    }
)
_RECORD = frozenset({"cudaEventRecord", "hipEventRecord"})


def _id(value: Any) -> int:
    """An integer argument (stream, correlation id), or -1 where it is missing or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _stream_events(path: Path) -> Iterator[_Event]:
    """Every well-formed event of the trace at ``path`` (malformed ones are skipped)."""
    with trace_events(path, read_trace_head(path), {}, _Events) as events:
        for event in events:
            if type(event) is _Event:
                yield event


@attrs.frozen(kw_only=True)
class Window:
    """The host time span analysed: an annotation's instance (or the whole trace)."""

    start_us: float
    end_us: float
    label: str


def _window(path: Path, step: int | None, annotation: str | None, instance: int) -> Window:
    """Pass 1: where the chosen step (or annotation instance) is on the host timeline.

    ``step``: ``ProfilerStep#step``.  ``annotation``: the ``instance``-th (from 0, in time
    order) host annotation whose name holds this text, as HolisticTraceAnalysis selects it.
    Neither: the last complete profiler step (Kineto's last step is cut short), the only
    step, or the whole trace when it has none.
    """
    steps: list[tuple[float, float, int]] = []
    matches: list[tuple[float, float]] = []
    first = last = None
    for e in _stream_events(path):
        ts, dur = e.ts, e.dur
        if ts is None or dur is None or e.ph not in (None, "X") or not isinstance(e.name, str):
            continue
        if canonical_category(e.cat) == "gpu_user_annotation":
            continue
        if annotation is not None:
            if annotation in e.name and canonical_category(e.cat) not in _GPU:
                matches.append((ts, ts + dur))
        elif e.name.startswith("ProfilerStep"):
            m = PROFILER_STEP.match(e.name)
            if m:
                steps.append((ts, ts + dur, int(m.group(1))))
        first = ts if first is None else min(first, ts)
        last = ts + dur if last is None else max(last, ts + dur)
    if annotation is not None:
        matches.sort()
        if not 0 <= instance < len(matches):
            raise TprimatError(
                f"{path}: no instance {instance} of a host annotation holding {annotation!r} (found {len(matches)})"
            )
        start, end = matches[instance]
        return Window(start_us=start, end_us=end, label=f"{annotation} #{instance}")
    steps.sort()
    if step is not None:
        for start, end, number in steps:
            if number == step:
                return Window(start_us=start, end_us=end, label=f"ProfilerStep#{step}")
        have = ", ".join(str(n) for _, _, n in steps) or "none"
        raise TprimatError(f"{path}: no ProfilerStep#{step} (steps in this trace: {have})")
    if steps:
        start, end, number = steps[-2] if len(steps) >= 2 else steps[-1]
        return Window(start_us=start, end_us=end, label=f"ProfilerStep#{number}")
    if first is None or last is None:
        raise TprimatError(f"{path}: no timed events: nothing to analyse")
    return Window(start_us=first, end_us=last, label="whole trace")


@attrs.define
class _Ev:
    """One event of the graph."""

    name: str
    cat: str  # canonical Kineto category
    ts: float
    dur: float
    pid: Any
    tid: Any
    stream: int  # -1 on the host
    correlation: int  # -1: none
    wait_stream: int = -1
    wait_record: int = -1

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _ev(e: _Event, cat: str, ts: float, dur: float) -> _Ev:
    """The graph's event of trace event ``e``, whose start ``ts`` and duration ``dur`` the caller has checked."""
    args = e.args or _Args()
    return _Ev(
        name=e.name or "",
        cat=cat,
        ts=float(ts),
        dur=float(dur),
        pid=e.pid,
        tid=e.tid,
        stream=_id(args.stream),
        correlation=_id(args.correlation),
        wait_stream=_id(args.wait_on_stream),
        wait_record=_id(args.wait_on_cuda_event_record_corr_id),
    )


def read_step(
    path: str | Path, step: int | None = None, annotation: str | None = None, instance: int = 0
) -> tuple[Window, list[_Ev], list[_Ev], dict[tuple[Any, int], float]]:
    """The window and the events of it the graph is built from (three passes, see the module docstring).

    Host events: operators and runtime calls that start inside the window and last
    longer than 0.  GPU activity: kernels, memcpy and memset launched by those runtime
    calls, and the synchronisation records of those calls.  And per GPU stream, until
    when it runs work launched outside the window (a launch into a busy stream is no
    launch delay).
    """
    from tprimat.trace.reader import sniff_format

    path = Path(path)
    kind = sniff_format(path)
    if kind != "kineto":
        raise TprimatError(
            f"{path}: a {kind} file has no CPU operators and no nesting: the critical path needs a Kineto "
            "(PyTorch profiler) trace"
        )
    window = _window(path, step, annotation, instance)
    host: list[_Ev] = []
    for e in _stream_events(path):
        cat = canonical_category(e.cat)
        if cat not in _HOST or e.ph not in (None, "X"):
            continue
        ts, dur = e.ts, e.dur
        if ts is None or dur is None or dur <= 0 or not window.start_us <= ts <= window.end_us:
            continue
        host.append(_ev(e, cat, ts, dur))
    launched = {h.correlation for h in host if h.cat in _RUNTIME and h.correlation >= 0}
    gpu: list[_Ev] = []
    busy: dict[tuple[Any, int], float] = {}
    for e in _stream_events(path):
        cat = canonical_category(e.cat)
        if (cat not in _GPU and cat != "cuda_sync") or e.ph not in (None, "X"):
            continue
        ts, dur = e.ts, e.dur
        if ts is None or dur is None:
            continue
        ev = _ev(e, cat, ts, dur)
        if ev.correlation in launched:
            gpu.append(ev)
        elif cat in _GPU and ev.ts <= window.end_us:
            # work launched before the step that a stream is still running when the step starts
            key = (ev.pid, ev.stream)
            busy[key] = max(busy.get(key, ev.end), ev.end)
    return window, host, gpu, busy


# -- the graph ---------------------------------------------------------------------------------

#: Edge kinds.
HOST, GPU, LAUNCH, GPU_GAP, DEPENDENCY, SYNC = "host", "gpu", "launch", "gpu_gap", "dependency", "sync"


@attrs.define
class Graph:
    """Nodes ``2*i`` (start) and ``2*i+1`` (end) of event ``i``; edges ``(to, weight_us, kind, event)``."""

    events: list[_Ev]
    out: dict[int, list[tuple[int, float, str, int]]] = attrs.Factory(lambda: defaultdict(list))
    #: edges that run back in time (a child ending after its parent, clock skew): a negative weight set
    #: to 0, or an edge that is not weighed (into the end of a blocking call, a synchronisation or
    #: dependency edge from work that ends after the call that waits for it)
    clamped: int = 0

    def time(self, node: int) -> float:
        ev = self.events[node // 2]
        return ev.ts if node % 2 == 0 else ev.end

    def add(self, u: int, v: int, kind: str, event: int = -1, weigh: bool = True) -> None:
        elapsed = self.time(v) - self.time(u)
        weight = elapsed if weigh and kind not in (DEPENDENCY, SYNC) else 0.0
        if elapsed < 0:
            self.clamped += 1
            weight = 0.0
        self.out[u].append((v, weight, kind, event))


def _host_edges(graph: Graph, ids: list[int]) -> None:
    """Edges of one CPU thread: its events in time order, nested, as HolisticTraceAnalysis walks a call stack."""
    events = graph.events
    ids.sort(key=lambda i: (events[i].ts, -events[i].dur))
    stack: list[int] = []
    last_node: int | None = None
    last_top_end: int | None = None

    def attribute(u: int, v: int) -> int:
        if u % 2 == 0:
            return u // 2  # from a start: inside that event
        if v % 2 == 1:
            return v // 2  # to an end: inside that event
        return stack[-1] if stack else u // 2  # between siblings: inside their parent

    def leave() -> None:
        nonlocal last_node, last_top_end
        i = stack.pop()
        end = 2 * i + 1
        if last_node is not None:
            graph.add(last_node, end, HOST, attribute(last_node, end), weigh=events[i].name not in BLOCKING_CALLS)
        if stack:
            last_node = end
        else:
            last_node, last_top_end = None, end

    for i in ids:
        ev = events[i]
        while stack and events[stack[-1]].end <= ev.ts:
            leave()
        start = 2 * i
        if not stack and last_top_end is not None:
            graph.add(last_top_end, start, DEPENDENCY)
        if last_node is not None:
            graph.add(last_node, start, HOST, attribute(last_node, start))
        last_node = start
        stack.append(i)
    while stack:
        leave()


def build_graph(host: list[_Ev], gpu: list[_Ev], busy: dict[tuple[Any, int], float] | None = None) -> Graph:
    """The dependency graph of one step (see the module docstring for its edges).

    ``busy``: per (GPU, stream), the end of the work launched outside the step.
    """
    busy = busy or {}
    graph = Graph(events=[*host, *gpu])
    events = graph.events
    threads: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    runtime: dict[int, int] = {}
    records: dict[int, int] = {}
    for i, ev in enumerate(events[: len(host)]):
        threads[(ev.pid, ev.tid)].append(i)
        if ev.cat in _RUNTIME and ev.correlation >= 0:
            runtime[ev.correlation] = i
            if ev.name in _RECORD:
                records[ev.correlation] = i
    for ids in threads.values():
        _host_edges(graph, ids)

    activities = [i for i in range(len(host), len(events)) if events[i].cat in _GPU]
    syncs = [i for i in range(len(host), len(events)) if events[i].cat == "cuda_sync"]
    # launches per GPU stream (any thread) and per thread and stream, in call order
    by_stream: dict[tuple[Any, int], list[tuple[float, int]]] = defaultdict(list)
    by_thread: dict[tuple[Any, Any, Any, int], list[tuple[float, int]]] = defaultdict(list)
    for k in activities:
        rt = runtime.get(events[k].correlation)
        if rt is None:
            continue
        call = events[rt]
        by_stream[(events[k].pid, events[k].stream)].append((call.ts, k))
        by_thread[(call.pid, call.tid, events[k].pid, events[k].stream)].append((call.ts, k))
    for launches in (*by_stream.values(), *by_thread.values()):
        launches.sort()

    def launched_before(gpu_pid: Any, stream: int, t: float) -> int | None:
        launches = by_stream.get((gpu_pid, stream), [])
        at = bisect_right(launches, (t, float("inf"))) - 1
        return launches[at][1] if at >= 0 else None

    def launched_after(key: tuple[Any, Any, Any, int], t: float) -> int | None:
        launches = by_thread.get(key, [])
        at = bisect_left(launches, (t, -1))
        return launches[at][1] if at < len(launches) else None

    # stream order, sync events at their end (a Stream Sync overlaps the copy it waits for)
    order = sorted(activities + syncs, key=lambda i: events[i].end if events[i].cat == "cuda_sync" else events[i].ts)
    last_end: dict[tuple[Any, int], int] = {}
    waits: dict[int, int] = {}  # activity -> activity it must wait for (cudaStreamWaitEvent)
    for i in order:
        ev = events[i]
        rt = runtime.get(ev.correlation)
        if ev.cat == "cuda_sync":
            _sync_edges(graph, i, rt, last_end, records, waits, launched_before, launched_after)
            continue
        _activity_edges(graph, i, rt, last_end, waits.pop(i, None), busy)
    return graph


def _activity_edges(
    graph: Graph,
    i: int,
    rt: int | None,
    last_end: dict[tuple[Any, int], int],
    source: int | None,
    busy: dict[tuple[Any, int], float],
) -> None:
    """The edges into GPU activity ``i`` (``rt``: its launch; ``source``: the activity it waits for)."""
    events = graph.events
    ev = events[i]
    key = (ev.pid, ev.stream)
    graph.add(2 * i, 2 * i + 1, GPU, i)
    if source is not None:
        graph.add(2 * source + 1, 2 * i, SYNC)
    previous = last_end.get(key)
    source_end = events[source].end if source is not None else None
    launch_delay = False
    if rt is not None:
        call = events[rt]
        idle_at_call = graph.time(previous) < call.ts if previous is not None else busy.get(key, call.ts - 1) < call.ts
        if idle_at_call and (source_end is None or source_end < call.ts):
            graph.add(2 * rt, 2 * i, LAUNCH)
            launch_delay = True
    if not launch_delay and previous is not None and (source_end is None or source_end < graph.time(previous)):
        graph.add(previous, 2 * i, GPU_GAP, previous // 2)
    last_end[key] = 2 * i + 1


def _sync_edges(
    graph: Graph,
    i: int,
    rt: int | None,
    last_end: dict[tuple[Any, int], int],
    records: dict[int, int],
    waits: dict[int, int],
    launched_before: Callable[[Any, int, float], int | None],
    launched_after: Callable[[tuple[Any, Any, Any, int], float], int | None],
) -> None:
    """The edges of one synchronisation record ``i`` (``rt``: its runtime call)."""
    events = graph.events
    ev = events[i]
    if rt is None:
        return
    if ev.name in ("Stream Sync", "Context Sync"):
        ends = list(last_end.values()) if ev.name == "Context Sync" else [last_end.get((ev.pid, ev.stream))]
        for end in ends:
            if end is not None:
                graph.add(end, 2 * rt + 1, SYNC)
        return
    record = records.get(ev.wait_record)
    if record is None or ev.wait_stream < 0:
        return
    source = launched_before(ev.pid, ev.wait_stream, events[record].ts)
    if source is None:
        return
    if ev.name == "Event Sync":
        graph.add(2 * source + 1, 2 * rt + 1, SYNC)
    elif ev.name == "Stream Wait Event":
        call = events[rt]
        dest = launched_after((call.pid, call.tid, ev.pid, ev.stream), call.ts)
        if dest is not None and events[dest].stream != events[source].stream:
            waits[dest] = source


def longest_path(graph: Graph) -> list[tuple[int, int, float, str, int]]:
    """The heaviest path of the graph as its edges ``(from, to, weight, kind, event)``, in order."""
    indegree: dict[int, int] = defaultdict(int)
    nodes: set[int] = set()
    for u, edges in graph.out.items():
        nodes.add(u)
        for v, *_ in edges:
            indegree[v] += 1
            nodes.add(v)
    ready = sorted((n for n in nodes if not indegree[n]), key=graph.time)
    best: dict[int, float] = dict.fromkeys(nodes, 0.0)
    via: dict[int, tuple[int, float, str, int]] = {}
    seen = 0
    while ready:
        u = ready.pop()
        seen += 1
        for v, weight, kind, event in graph.out.get(u, ()):
            if best[u] + weight > best[v] or (v not in via and best[u] + weight >= best[v]):
                best[v] = best[u] + weight
                via[v] = (u, weight, kind, event)
            indegree[v] -= 1
            if not indegree[v]:
                ready.append(v)
    if seen != len(nodes):
        raise TprimatError(
            "the dependency graph of this step has a cycle (its timestamps contradict its nesting or stream order)"
        )
    if not nodes:
        return []
    end = max(nodes, key=lambda n: (best[n], -graph.time(n)))
    path: list[tuple[int, int, float, str, int]] = []
    while end in via:
        u, weight, kind, event = via[end]
        path.append((u, end, weight, kind, event))
        end = u
    path.reverse()
    return path


# -- the result --------------------------------------------------------------------------------

#: Where the path's time goes, in the order reported.
BUCKETS: tuple[str, ...] = (
    "gpu_compute",
    "gpu_communication",
    "gpu_memory",
    "gpu_idle",
    "launch_delay",
    "cpu_launch",
    "cpu_runtime",
    "cpu_host",
)


def _bucket(graph: Graph, kind: str, event: int, launching: set[int]) -> str | None:
    """Where an edge's time goes: ``cpu_launch`` is time in runtime calls that launched GPU work
    of the step, ``cpu_runtime`` in other runtime calls (allocation, queries …)."""
    if kind == LAUNCH:
        return "launch_delay"
    if kind == GPU_GAP:
        return "gpu_idle"
    if kind == HOST:
        ev = graph.events[event]
        if ev.cat not in _RUNTIME:
            return "cpu_host"
        return "cpu_launch" if ev.correlation in launching else "cpu_runtime"
    if kind == GPU:
        ev = graph.events[event]
        temporal = TEMPORAL_CLASS[classify(ev.name, ev.cat)]
        return {"compute": "gpu_compute", "communication": "gpu_communication"}.get(temporal, "gpu_memory")
    return None


@attrs.frozen(kw_only=True)
class CriticalPath:
    """The critical path of one step and where its time goes (µs)."""

    file: str
    window: Window
    length_us: float
    span_us: float
    breakdown_us: dict[str, float]
    segments: list[dict[str, Any]]  # consecutive path time of one event, in path order
    gpu_on_path: frozenset[int]  # correlation ids of GPU activity on the path
    host_on_path: frozenset[tuple[str, float]]  # (name, start µs) of host events on the path
    clamped_edges: int
    events: int
    hta_rounding: bool = False

    def kernel_on_path(self, correlation: int) -> bool:
        """Whether the GPU activity launched with this correlation id is on the critical path."""
        return correlation in self.gpu_on_path

    def op_on_path(self, name: str, ts_us: float) -> bool:
        """Whether the host operator or runtime call ``name`` that started at ``ts_us`` is on the path."""
        return (name, float(ts_us)) in self.host_on_path

    def time_on_path_us(self, name: str) -> float:
        """µs of the path attributed to events called ``name`` (a kernel's or an operator's)."""
        return sum(s["dur_us"] for s in self.segments if s["name"] == name)

    def top_segments(self, n: int = 10) -> list[dict[str, Any]]:
        """The ``n`` longest segments, in path order."""
        chosen = sorted(range(len(self.segments)), key=lambda k: -self.segments[k]["dur_us"])[:n]
        return [self.segments[k] for k in sorted(chosen)]

    def as_dict(self, top: int = 10) -> dict[str, Any]:
        return {
            "file": self.file,
            "window": attrs.asdict(self.window),
            "length_us": self.length_us,
            "span_us": self.span_us,
            "unattributed_us": max(self.span_us - self.length_us, 0.0),
            "breakdown_us": self.breakdown_us,
            "share": {k: (v / self.length_us if self.length_us else 0.0) for k, v in self.breakdown_us.items()},
            "top_segments": self.top_segments(top),
            "segments_on_path": len(self.segments),
            "gpu_activities_on_path": len(self.gpu_on_path),
            "events_in_graph": self.events,
            "clamped_edges": self.clamped_edges,
            "hta_rounding": self.hta_rounding,
        }


def hta_rounded(events: list[_Ev]) -> list[_Ev]:
    """``events`` with HolisticTraceAnalysis's rounding: start up, end down to whole µs (those
    left without duration are dropped, as HTA drops them from a step)."""
    out = []
    for ev in events:
        start, end = math.ceil(ev.ts), math.floor(ev.end)
        if end > start or (ev.cat == "cuda_sync" and end >= start):
            out.append(attrs.evolve(ev, ts=float(start), dur=float(end - start)))
    return out


def critical_path(
    path: str | Path,
    step: int | None = None,
    annotation: str | None = None,
    instance: int = 0,
    hta_rounding: bool = False,
) -> CriticalPath:
    """The critical path of one step of the Kineto trace at ``path`` (see :func:`read_step` for the window).

    ``hta_rounding``: round every event's times inward to whole µs first, as HTA does with
    traces of fractional µs (to tell a difference of model from one of resolution).
    """
    window, host, gpu, busy = read_step(path, step, annotation, instance)
    if not host:
        raise TprimatError(
            f"{path}: no CPU operators or runtime calls in {window.label}: the critical path needs the host "
            "side of the trace (a GPU-only trace has none)"
        )
    if hta_rounding:
        host, gpu = hta_rounded(host), hta_rounded(gpu)
        busy = {key: float(math.floor(end)) for key, end in busy.items()}
    graph = build_graph(host, gpu, busy)
    edges = longest_path(graph)
    breakdown = dict.fromkeys(BUCKETS, 0.0)
    launching = {ev.correlation for ev in graph.events if ev.cat in _GPU}
    segments: list[dict[str, Any]] = []
    gpu_on: set[int] = set()
    host_on: set[tuple[str, float]] = set()
    for u, v, weight, kind, event in edges:
        for node in (u, v):
            ev = graph.events[node // 2]
            if ev.cat in _GPU:
                gpu_on.add(ev.correlation)
            else:
                host_on.add((ev.name, ev.ts))
        bucket = _bucket(graph, kind, event, launching)
        if bucket is None or weight <= 0:
            continue
        breakdown[bucket] += weight
        ev = graph.events[event]
        last = segments[-1] if segments else None
        if last is not None and last["bucket"] == bucket and last["event"] == event:
            last["dur_us"] += weight
            continue
        segments.append(
            {
                "bucket": bucket,
                "name": ev.name,
                "category": ev.cat,
                "stream": ev.stream if ev.stream >= 0 else None,
                "start_us": graph.time(u),
                "dur_us": weight,
                "event": event,
            }
        )
    for segment in segments:
        segment.pop("event")
    span = graph.time(edges[-1][1]) - graph.time(edges[0][0]) if edges else 0.0
    return CriticalPath(
        file=str(path),
        window=window,
        length_us=sum(breakdown.values()),
        span_us=span,
        breakdown_us=breakdown,
        segments=segments,
        gpu_on_path=frozenset(gpu_on),
        host_on_path=frozenset(host_on),
        clamped_edges=graph.clamped,
        events=len(graph.events),
        hta_rounding=hta_rounding,
    )


__all__ = ["BUCKETS", "CriticalPath", "Window", "build_graph", "critical_path", "longest_path", "read_step"]
