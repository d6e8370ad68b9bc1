"""Where one rank's GPU time goes: temporal breakdown, categories, exposed communication, top kernels.

Definitions (``docs/traces.md`` explains them with examples):

* **window**: the GPU activity analysed.  By default, as HolisticTraceAnalysis
  does, every activity launched before the start of the last
  ``ProfilerStep`` (Kineto's last step is cut short), or all activity when the
  trace has fewer than two steps.  With ``steps=(a, b)``: activity launched
  (host-side, matched by correlation id) inside ``ProfilerStep#a`` …
  ``ProfilerStep#b``, both included.
* **total**: from the start of the first activity to the end of the last.
* **idle**: the part of total when no activity runs on any stream.
* **exclusive time**: every instant of busy time is given to one category, the
  first active one in :data:`PRIORITY` (compute categories, then
  communication, then memcpy/memset, then GPU sync), so the categories'
  exclusive times plus idle add up to total exactly.
* **temporal**: ``compute_us`` = exclusive time of the compute categories (the
  union of compute kernels, HTA's compute time); ``communication_us`` =
  communication not overlapped by compute (exposed); ``memory_us`` =
  memcpy/memset overlapped by neither; ``other_us`` = GPU sync not overlapped by
  anything.  HTA's ``non_compute_time`` is ``communication_us + memory_us + other_us``.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from tprimat.errors import TprimatError
from tprimat.trace.categories import (
    CATEGORIES,
    MAX_NAME_CHARS,
    MAX_OWN_CHARS,
    TEMPORAL_CLASS,
    classify,
    collective_kind,
    own_name,
)
from tprimat.trace.reader import ACTIVITY_CODES, RankTrace, load_trace, malformed_note

#: Order in which overlapping activity claims time (compute first: what overlaps it is hidden).
PRIORITY: tuple[str, ...] = (
    "gemm",
    "attention",
    "norm",
    "elementwise",
    "optimizer",
    "other",
    "communication",
    "memory",
    "sync",
)
assert set(PRIORITY) == set(CATEGORIES)

_STEPS = re.compile(r"^\s*(\d{1,18})?\s*:\s*(\d{1,18})?\s*$|^\s*(\d{1,18})\s*$")


def parse_steps(text: str | None) -> tuple[int | None, int | None] | None:
    """``"a:b"`` → (a, b) inclusive; ``"a:"``/``":b"`` open-ended; ``"a"`` → (a, a); None → None."""
    if text is None or text == "":
        return None
    match = _STEPS.match(text)
    if not match:
        raise TprimatError(f"--steps must look like a:b, a: , :b or a (profiler step numbers), not {text!r}")
    if match.group(3) is not None:
        value = int(match.group(3))
        return value, value
    first = int(match.group(1)) if match.group(1) else None
    last = int(match.group(2)) if match.group(2) else None
    if first is not None and last is not None and last < first:
        raise TprimatError(f"--steps {text}: the last step is before the first")
    return first, last


def _union_length(intervals: list[tuple[float, float]]) -> float:
    if not intervals:
        return 0.0
    intervals.sort()
    total = 0.0
    cur_start, cur_end = intervals[0]
    for start, end in intervals:
        if start > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    return total + cur_end - cur_start


def _exclusive(
    indices: Sequence[int], ts: Sequence[float], dur: Sequence[float], cats: Sequence[int]
) -> tuple[list[float], float]:
    """Sweep the timeline: exclusive µs per category index (in PRIORITY order) and the busy µs.

    ``cats[j]`` is the category index of activity ``indices[j]``."""
    points: list[tuple[float, int, int]] = []
    for i, c in zip(indices, cats, strict=True):
        start = ts[i]
        end = start + dur[i]
        if end <= start:
            continue
        points.append((start, 1, c))
        points.append((end, -1, c))
    return sweep(points, len(PRIORITY))


def sweep(points: list[tuple[float, int, int]], ncat: int, *, windowed: bool = False) -> tuple[list[float], float]:
    """Exclusive µs per category index (the first active one in PRIORITY order wins) and busy µs of
    a list of (time, +1 or -1, category index) interval ends; sorts ``points``.

    ``windowed``: points of category ``ncat`` open and close the windows (host steps) that time
    is counted in; without it every moment counts.
    """
    points.sort()
    active = [0] * ncat
    exclusive = [0.0] * ncat
    busy = 0.0
    running = 0
    inside = 0 if windowed else 1
    previous = 0.0
    for time, delta, c in points:
        if running and inside and time > previous:
            span = time - previous
            busy += span
            for k in range(ncat):
                if active[k]:
                    exclusive[k] += span
                    break
        if c == ncat:
            inside += delta
        else:
            active[c] += delta
            running += delta
        previous = time
    return exclusive, busy


_GENERIC_OPS = frozenset(
    {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "BinaryFunctor", "BUnaryFunctor", "AUnaryFunctor"}
)
_OP_NAME = re.compile(r"(\w+_kernel_cuda|\w*Functor\w*|\w+_kernel_impl|\w+_functor)\b")
_MAX_SHORT = 72


def _shorten(name: str) -> str:
    """A readable kernel name: the kernel's own name, as the categories read it.

    :func:`~tprimat.trace.categories.own_name` drops namespaces, return type, template
    arguments and parameters, takes a launcher's kernel from its template argument and a
    mangled kernel's name from the mangling.  PyTorch's generic kernels keep the operation
    they wrap (``vectorized_elementwise_kernel[CUDAFunctor_add]``); memcpy/memset names are
    kept whole; very long generated names (hipBLASLt ``Cijk_…``) are cut with an ellipsis.
    """
    text = name[:MAX_NAME_CHARS].strip()
    short = own_name(text)
    if short != text and ("elementwise" in short or "reduce_kernel" in short or "multi_tensor_apply" in short):
        at = text.find(short)
        inner = text[at + len(short) :] if at >= 0 else text
        # the wrapped operation is among the first template arguments; the search is bounded
        ops = [op for op in _OP_NAME.findall(inner[:MAX_OWN_CHARS]) if op not in _GENERIC_OPS]
        if ops:
            short = f"{short}[{ops[0]}]"
    if len(short) > _MAX_SHORT:
        short = short[: _MAX_SHORT - 1] + "…"
    return short


def shorten_kernel_name(name: str) -> str:
    """Public alias of the kernel-name shortener used in tables."""
    return _shorten(name)


class _Classified:
    """Per-name classification, computed once per distinct name."""

    def __init__(self, trace: RankTrace) -> None:
        prio = {c: i for i, c in enumerate(PRIORITY)}
        self.category: dict[tuple[int, int], str] = {}
        self.collective: dict[int, str] = {}
        self.prio = prio
        self.trace = trace

    def category_of(self, name_id: int, code: int) -> str:
        key = (name_id, code)
        value = self.category.get(key)
        if value is None:
            value = classify(self.trace.names[name_id], ACTIVITY_CODES[code])
            self.category[key] = value
        return value

    def collective_of(self, name_id: int) -> str:
        value = self.collective.get(name_id)
        if value is None:
            value = self.collective[name_id] = collective_kind(self.trace.names[name_id])
        return value


class _Launches:
    """Each GPU activity's host launch time and profiler step, computed once per trace."""

    def __init__(self, trace: RankTrace) -> None:
        times = dict(zip(trace.launch_correlation, trace.launch_ts, strict=True))
        get = times.get
        self.launched: list[float | None] = [get(c) for c in trace.correlation]
        self.steps = sorted(trace.steps, key=lambda step: step.ts)
        starts = [step.ts for step in self.steps]
        ends = [step.ts + step.dur for step in self.steps]
        step_of: list[int] = []
        for t in self.launched:
            if t is None:
                step_of.append(-1)
                continue
            k = bisect_right(starts, t) - 1
            step_of.append(k if k >= 0 and t < ends[k] else -1)
        self.step_of = step_of

    def in_steps(self, chosen: Iterable[int]) -> list[int]:
        """Indices of the activities launched inside the steps at these positions of ``self.steps``."""
        wanted = set(chosen)
        return [i for i, k in enumerate(self.step_of) if k in wanted]


def select_window(
    trace: RankTrace,
    steps: tuple[int | None, int | None] | None = None,
    launches: _Launches | None = None,
) -> tuple[list[int], dict[str, Any]]:
    """Indices of the GPU activities in the analysed window, and how the window was chosen."""
    n = len(trace.ts)
    numbers = sorted({s.number for s in trace.steps})
    if steps is None and len(numbers) < 2:
        return list(range(n)), {"mode": "all", "steps": numbers}
    launches = launches or _Launches(trace)
    if steps is None:
        last_start = max(s.ts for s in trace.steps if s.number == numbers[-1])
        keep = [i for i, t in enumerate(launches.launched) if t is not None and t < last_start]
        return keep, {"mode": "before-last-step", "steps": numbers[:-1], "dropped_last_step": numbers[-1]}
    first, last = steps
    chosen = [
        k
        for k, s in enumerate(launches.steps)
        if (first is None or s.number >= first) and (last is None or s.number <= last)
    ]
    if not chosen:
        have = f"{numbers[0]}..{numbers[-1]}" if numbers else "none"
        raise TprimatError(
            f"{trace.path}: no ProfilerStep in {first if first is not None else ''}:"
            f"{last if last is not None else ''} (steps in this trace: {have})"
        )
    window = {"mode": "steps", "steps": sorted({launches.steps[k].number for k in chosen})}
    return launches.in_steps(chosen), window


def breakdown(
    trace: RankTrace, indices: Sequence[int], top: int = 10, classified: _Classified | None = None
) -> dict[str, Any]:
    """The analysis of one window of one rank (see the module docstring for the definitions)."""
    classified = classified or _Classified(trace)
    ts, dur, name_id, code = trace.ts, trace.dur, trace.name_id, trace.code
    prio = classified.prio
    category_of = classified.category_of
    # the category index of each activity in the window, in the order of ``indices`` (a list as
    # long as the window, not the trace: a breakdown per step costs what the step holds)
    cats = [prio[category_of(name_id[i], code[i])] for i in indices]
    if not indices:
        return _empty()
    start = min(ts[i] for i in indices)
    end = max(ts[i] + dur[i] for i in indices)
    total = end - start
    exclusive, busy = _exclusive(indices, ts, dur, cats)
    by_cat = dict(zip(PRIORITY, exclusive, strict=True))
    tally = _tally(trace, indices, cats, classified)
    communication_total = _union_length(tally.comm_intervals)
    exposed = by_cat["communication"]
    ranked = sorted(tally.per_name.items(), key=lambda item: -item[1].total_us)
    return {
        "temporal": _temporal(by_cat, total, busy),
        "busy_us": busy,
        "communication": {
            "total_us": communication_total,
            "exposed_us": exposed,
            "overlapped_us": max(communication_total - exposed, 0.0),
            "by_collective": {k: {"count": int(v[0]), "kernel_us": v[1]} for k, v in sorted(tally.collectives.items())},
        },
        "categories": _categories(tally, by_cat, total),
        "top_kernels": _top_kernels(trace, ranked[:top], tally),
        "top_by_category": _top_by_category(trace, ranked, top),
        "launches": tally.launches,
    }


class _NameTotal:
    """The activities of one kernel name in a window: how many, their µs, the first one's category index."""

    __slots__ = ("category", "count", "total_us")

    def __init__(self, duration_us: float, category: int) -> None:
        self.count = 1
        self.total_us = duration_us
        self.category = category


class _Tally:
    """What the activities of one window add up to, per category, per kernel name and per collective."""

    def __init__(self) -> None:
        self.kernel_us: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self.per_name: dict[int, _NameTotal] = {}
        self.comm_intervals: list[tuple[float, float]] = []
        #: collective kind -> [count, kernel µs]
        self.collectives: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.launches = {"kernels": 0, "memcpy": 0, "memset": 0, "sync": 0}


def _tally(trace: RankTrace, indices: Sequence[int], cats: Sequence[int], classified: _Classified) -> _Tally:
    """One pass over the window's activities (``cats[j]``: the category index of ``indices[j]``):
    kernel µs and count per category, launches by kind, totals per kernel name (GPU sync waits
    excluded) and the communication kernels' intervals and collectives."""
    ts, dur, name_id, code = trace.ts, trace.dur, trace.name_id, trace.code
    tally = _Tally()
    kernel_us, count, per_name, launches = tally.kernel_us, tally.count, tally.per_name, tally.launches
    for i, c in zip(indices, cats, strict=True):
        category = PRIORITY[c]
        d = dur[i]
        kernel_us[category] += d
        count[category] += 1
        activity = ACTIVITY_CODES[code[i]]
        if activity == "kernel":
            launches["kernels"] += 1
        elif activity == "gpu_memcpy":
            launches["memcpy"] += 1
        elif activity == "gpu_memset":
            launches["memset"] += 1
        else:
            launches["sync"] += 1
        if activity == "cuda_sync":
            continue
        entry = per_name.get(name_id[i])
        if entry is None:
            per_name[name_id[i]] = _NameTotal(d, c)
        else:
            entry.count += 1
            entry.total_us += d
        if category == "communication":
            tally.comm_intervals.append((ts[i], ts[i] + d))
            kind = tally.collectives[classified.collective_of(name_id[i])]
            kind[0] += 1
            kind[1] += d
    return tally


def _temporal(by_cat: dict[str, float], total: float, busy: float) -> dict[str, float]:
    """The temporal breakdown of a window from its exclusive µs per category, total and busy µs."""
    compute = sum(v for c, v in by_cat.items() if TEMPORAL_CLASS[c] == "compute")
    return {
        "total_us": total,
        "idle_us": max(total - busy, 0.0),
        "compute_us": compute,
        "communication_us": by_cat["communication"],
        "memory_us": by_cat["memory"],
        "other_us": by_cat["sync"],
    }


def _categories(tally: _Tally, by_cat: dict[str, float], total: float) -> dict[str, dict[str, Any]]:
    """Per category met in the window (in CATEGORIES order): count, kernel µs, exclusive µs and share of total."""
    categories = {}
    for category in CATEGORIES:
        if not tally.count.get(category):
            continue
        categories[category] = {
            "count": tally.count[category],
            "kernel_us": tally.kernel_us[category],
            "exclusive_us": by_cat[category],
            "share_of_total": by_cat[category] / total if total else 0.0,
        }
    return categories


def _top_kernels(trace: RankTrace, ranked: list[tuple[int, _NameTotal]], tally: _Tally) -> list[dict[str, Any]]:
    """The ``ranked`` kernel names (longest total first) with their share of the window's kernel time
    (GPU sync waits excluded)."""
    kernel_total = sum(tally.kernel_us.values()) - tally.kernel_us.get("sync", 0.0)
    top_kernels = []
    for nid, entry in ranked:
        name = trace.names[nid]
        top_kernels.append(
            {
                "name": name,
                "short_name": _shorten(name),
                "category": PRIORITY[entry.category],
                "count": entry.count,
                "total_us": entry.total_us,
                "mean_us": entry.total_us / entry.count,
                "share_of_kernel_time": entry.total_us / kernel_total if kernel_total else 0.0,
            }
        )
    return top_kernels


def _top_by_category(
    trace: RankTrace, ranked: list[tuple[int, _NameTotal]], top: int
) -> dict[str, list[dict[str, Any]]]:
    """The ``top`` longest kernel names of each category (``ranked``: every name, longest total first)."""
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for nid, entry in ranked:
        bucket = by_category[PRIORITY[entry.category]]
        if len(bucket) < top:
            name = trace.names[nid]
            bucket.append(
                {"name": name, "short_name": _shorten(name), "count": entry.count, "total_us": entry.total_us}
            )
    return dict(by_category)


def _empty() -> dict[str, Any]:
    zero = {k: 0.0 for k in ("total_us", "idle_us", "compute_us", "communication_us", "memory_us", "other_us")}
    return {
        "temporal": zero,
        "busy_us": 0.0,
        "communication": {"total_us": 0.0, "exposed_us": 0.0, "overlapped_us": 0.0, "by_collective": {}},
        "categories": {},
        "top_kernels": [],
        "top_by_category": {},
        "launches": {"kernels": 0, "memcpy": 0, "memset": 0, "sync": 0},
    }


def analyze_trace(
    trace: RankTrace, steps: tuple[int | None, int | None] | None = None, top: int = 10
) -> dict[str, Any]:
    """Analyse one rank: the whole window plus one breakdown per profiler step in it."""
    launches = _Launches(trace)
    indices, window = select_window(trace, steps, launches)
    classified = _Classified(trace)
    result = breakdown(trace, indices, top=top, classified=classified)
    per_step = []
    wanted = set(window.get("steps", []))
    if window["mode"] != "all":
        groups: dict[int, list[int]] = defaultdict(list)
        for i, k in enumerate(launches.step_of):
            if k >= 0:
                groups[k].append(i)
        for k, step in enumerate(launches.steps):
            if step.number not in wanted:
                continue
            step_indices = groups.get(k, [])
            item = breakdown(trace, step_indices, top=top, classified=classified)
            per_step.append(
                {
                    "step": step.number,
                    "host_us": step.dur,
                    "temporal": item["temporal"],
                    "categories": {c: v["exclusive_us"] for c, v in item["categories"].items()},
                    "launches": item["launches"],
                }
            )
    out = {
        "file": str(trace.path),
        "rank": trace.rank,
        "world_size": trace.world_size,
        "vendor": trace.vendor,
        "device": trace.device,
        "format": trace.format,
        "runtime_api": trace.runtime_api,
        "window": window,
        "activities": len(indices),
        "activities_in_file": len(trace.ts),
        "gpu_activity": len(trace.ts) > 0,
        "note": None,
        "malformed_events": trace.malformed,
        "malformed_note": malformed_note(trace),
        "steps_note": trace.steps_note,
        **result,
        "steps": per_step,
    }
    if not len(trace.ts):
        # A CPU-only profile (no CUDA/HIP activity recorded): there is no GPU time to break
        # down, and zeros would read as measurements.  Host step times stay (they are measured).
        out["note"] = NO_GPU_NOTE
        out["temporal"] = None
        out["busy_us"] = None
        out["communication"] = None
        for step_result in per_step:
            step_result["temporal"] = None
    return out


#: Why a trace without GPU activity has no temporal breakdown.
NO_GPU_NOTE = (
    "no GPU activity in this trace (a CPU-only profile, or the profiler recorded no "
    "CUDA/HIP activity): there is no GPU time breakdown; only host step times are measured"
)


def analyze_paths(
    paths: Iterable[str],
    steps: tuple[int | None, int | None] | None = None,
    top: int = 10,
    hta_rounding: bool = False,
    workers: int | None = None,
    nvtx_step: str | None = None,
) -> list[dict[str, Any]]:
    """Read and analyse each trace file (one per rank), in rank order.

    ``hta_rounding`` applies HolisticTraceAnalysis's timestamp rounding first
    (:func:`hta_rounded`), to reproduce its numbers exactly.  The files are read on
    ``workers`` processes (default: every CPU; see :func:`tprimat.workers.map_files`),
    each file by one of them, and a single large file by all of them (see
    :func:`~tprimat.trace.reader.read_trace`): the analyses are the same for any number.
    ``nvtx_step``: the NVTX ranges that are an Nsight Systems export's steps
    (:func:`~tprimat.trace.nsys.read_nsys`).
    """
    from tprimat.workers import default_workers, map_files

    paths = list(paths)
    workers = default_workers() if workers is None else max(1, workers)
    if len(paths) == 1:
        return [_analyze_file(paths[0], steps, top, hta_rounding, workers, nvtx_step)]
    analyse = functools.partial(_analyze_file, steps=steps, top=top, hta_rounding=hta_rounding, nvtx_step=nvtx_step)
    results = map_files(analyse, paths, workers)
    results.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["file"]))
    return results


def _analyze_file(
    path: str,
    steps: tuple[int | None, int | None] | None,
    top: int,
    hta_rounding: bool,
    workers: int = 1,
    nvtx_step: str | None = None,
) -> dict[str, Any]:
    trace = load_trace(path, workers=workers, nvtx_step=nvtx_step)
    if hta_rounding:
        trace = hta_rounded(trace)
    result = analyze_trace(trace, steps=steps, top=top)
    result["hta_rounding"] = hta_rounding
    return result


def hta_rounded(trace: RankTrace) -> RankTrace:
    """A copy of ``trace`` with HolisticTraceAnalysis's timestamp rounding applied.

    HTA rounds every event of a trace with fractional timestamps inward to whole
    microseconds (start up, end down) before it analyses anything.  tprimat
    keeps the recorded timestamps; this copy exists to check that the two
    agree exactly once that rounding is undone, which separates a difference in
    definitions from a difference in resolution.
    """
    import math
    from array import array

    import attrs

    def inward(ts_values: Sequence[float], dur_values: Sequence[float]) -> tuple[array[float], array[float]]:
        new_ts, new_dur = array("d"), array("d")
        for t, d in zip(ts_values, dur_values, strict=True):
            start = math.ceil(t)
            new_ts.append(start)
            new_dur.append(math.floor(t + d) - start)
        return new_ts, new_dur

    ts, dur = inward(trace.ts, trace.dur)
    steps = []
    for step in trace.steps:
        start = math.ceil(step.ts)
        steps.append(attrs.evolve(step, ts=start, dur=math.floor(step.ts + step.dur) - start))
    launch_ts = array("d", (math.ceil(t) for t in trace.launch_ts))
    return attrs.evolve(trace, ts=ts, dur=dur, steps=steps, launch_ts=launch_ts)
