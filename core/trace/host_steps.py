"""One profiler step as the host timeline sees it: what the GPU does during it, and when it does nothing.

A training step lasts from the start of ``ProfilerStep#N`` on the host to its
end (the wall-clock step).  The GPU may be busy for all of it (GPU-bound) or
for a small part of it (host-bound: data loading, Python, launch overhead,
synchronisation).  The span of GPU activity launched in the step says nothing
about the second case, so a comparison of steps is made on the host timeline:

* every GPU activity is clipped to the host steps' intervals, whichever step
  launched it (work queued by the previous step that runs into this one is
  time this step spends on the GPU);
* the clipped time is split into exclusive time per category with the same
  priority as :mod:`tprimat.trace.analyze` (compute first);
* **idle** is the part of the host steps with no GPU activity on any stream.

Idle plus the categories' exclusive times add up to the host step time exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tprimat.trace.analyze import sweep
from tprimat.trace.categories import classify
from tprimat.trace.reader import ACTIVITY_CODES, RankTrace


def host_step_breakdown(trace: RankTrace, numbers: Iterable[int]) -> dict[str, Any] | None:
    """Host time of the profiler steps ``numbers`` split into GPU categories and idle (µs, summed over steps).

    Returns None when the trace has none of these steps.  The keys are
    ``steps`` (numbers used), ``host_us`` (sum of their host durations),
    ``busy_us`` (time with GPU activity inside them), ``idle_us`` and
    ``exclusive_us`` (category -> µs).

    One sweep over the activities and the steps' starts and ends counts only the time inside
    a step: the same as clipping each activity to each step it overlaps, at a cost that grows
    with activities plus steps, not with their product.
    """
    from tprimat.trace.analyze import PRIORITY

    wanted = set(numbers)
    steps = sorted((s for s in trace.steps if s.number in wanted and s.dur > 0), key=lambda s: s.ts)
    if not steps:
        return None
    prio = {c: i for i, c in enumerate(PRIORITY)}
    mask = len(PRIORITY)  # the category index of a step's start and end
    category_of: dict[tuple[int, int], int] = {}
    points: list[tuple[float, int, int]] = []
    for step in steps:
        points.append((step.ts, 1, mask))
        points.append((step.ts + step.dur, -1, mask))
    ts, dur, name_id, code = trace.ts, trace.dur, trace.name_id, trace.code
    first, last = steps[0].ts, max(s.ts + s.dur for s in steps)
    for i in range(len(ts)):
        start = ts[i]
        end = start + dur[i]
        if end <= first or start >= last or end <= start:
            continue
        key = (name_id[i], code[i])
        c = category_of.get(key)
        if c is None:
            c = prio[classify(trace.names[key[0]], ACTIVITY_CODES[key[1]])]
            category_of[key] = c
        points.append((start, 1, c))
        points.append((end, -1, c))
    exclusive, busy = sweep(points, mask, windowed=True)
    host = sum(s.dur for s in steps)
    return {
        "steps": [s.number for s in steps],
        "host_us": host,
        "busy_us": busy,
        "idle_us": max(host - busy, 0.0),
        "exclusive_us": {PRIORITY[k]: v for k, v in enumerate(exclusive) if v > 0.0},
    }
