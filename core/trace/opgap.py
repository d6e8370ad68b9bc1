"""The step-time gap between two platforms, operator by operator.

For each rank the host time of the profiler steps (``ProfilerStep#N``, as
:mod:`tprimat.trace.host_steps` measures it) is split into

* the **exclusive GPU time of each operator group** (name + recorded shapes and
  dtypes, :func:`tprimat.trace.roofline.group_key`): every instant of GPU
  activity inside the steps is given to the kernels of the first active kernel
  category in the priority of :data:`tprimat.trace.analyze.PRIORITY` (compute
  before communication, memcpy/memset and sync, as the category table does), and
  shared equally among those kernels when several run at once; each kernel's
  share goes to the operator it is attributed to
  (:func:`tprimat.trace.opread.activity_operators`);
* **no operator**: the share of kernels no recorded operator launched;
* **idle**: the time inside the steps with no GPU activity at all.

These add up to the host step time exactly, so for two sides (per step, ranks
averaged) the differences of the matched groups, of the groups found on one side
only ("unmatched"), of no-operator time and of idle time add up to the
difference in step time.  Each group also carries each side's roofline
efficiency (:mod:`tprimat.trace.roofline`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from tprimat.trace.analyze import PRIORITY
from tprimat.trace.categories import classify
from tprimat.trace.opcost import shapes_text
from tprimat.trace.opread import OpTrace
from tprimat.trace.reader import ACTIVITY_CODES
from tprimat.trace.roofline import Ceilings, attribute_window, group_key, group_row

_NO_OP = -1


def exclusive_by_group(
    ops: OpTrace, operators: Sequence[int], windows: list[tuple[float, float]]
) -> tuple[dict[str, tuple[float, int]], float, float]:
    """Exclusive µs per operator group inside ``windows`` (start, end) with one signature of the
    group, the no-operator µs, and the busy µs.

    One sweep over the activities' and the windows' ends (the module docstring says how
    overlapping time is shared); time outside every window is not counted.
    """
    trace = ops.trace
    prio = {c: i for i, c in enumerate(PRIORITY)}
    mask = len(PRIORITY)
    points: list[tuple[float, int, int, int]] = []
    for start, end in windows:
        points.append((start, 1, mask, 0))
        points.append((end, -1, mask, 0))
    if not windows:
        return {}, 0.0, 0.0
    first, last = min(w[0] for w in windows), max(w[1] for w in windows)
    category_of: dict[tuple[int, int], int] = {}
    group_of_sig: dict[int, int] = {}
    keys: list[tuple[str, int]] = []
    key_index: dict[str, int] = {}
    ts, dur, name_id, code = trace.ts, trace.dur, trace.name_id, trace.code
    for i in range(len(ts)):
        start = ts[i]
        end = start + dur[i]
        if end <= first or start >= last or end <= start:
            continue
        kind = (name_id[i], code[i])
        c = category_of.get(kind)
        if c is None:
            c = category_of[kind] = prio[classify(trace.names[kind[0]], ACTIVITY_CODES[kind[1]])]
        op = operators[i]
        group = _NO_OP
        if op >= 0:
            sig = ops.op_sig[op]
            group = group_of_sig.get(sig, -2)
            if group == -2:
                name, dims, types, _ = ops.decoded(sig)
                key = group_key(name, dims, types)
                group = group_of_sig[sig] = key_index.setdefault(key, len(key_index))
                if group == len(keys):
                    keys.append((key, sig))
        points.append((start, 1, c, group))
        points.append((end, -1, c, group))
    points.sort()
    exclusive, busy = _sweep(points, mask)
    no_op = exclusive.pop(_NO_OP, 0.0)
    return {keys[g][0]: (v, keys[g][1]) for g, v in exclusive.items()}, no_op, busy


def critical_path_shares(ops: OpTrace, step: int) -> dict[str, list[float]]:
    """Per operator group, the GPU µs of ``ProfilerStep#step`` on the step's critical path and in all
    (:func:`tprimat.trace.critical_path.critical_path`, which reads the trace again)."""
    from tprimat.trace.analyze import select_window
    from tprimat.trace.critical_path import critical_path
    from tprimat.trace.opread import activity_operators

    path = critical_path(ops.trace.path, step=step)
    operators = activity_operators(ops)
    indices, _ = select_window(ops.trace, (step, step))
    shares: dict[str, list[float]] = {}
    keys: dict[int, str] = {}
    trace = ops.trace
    for i in indices:
        op = operators[i]
        if op < 0 or ACTIVITY_CODES[trace.code[i]] == "cuda_sync":
            continue
        sig = ops.op_sig[op]
        key = keys.get(sig)
        if key is None:
            name, dims, types, _ = ops.decoded(sig)
            key = keys[sig] = group_key(name, dims, types)
        entry = shares.setdefault(key, [0.0, 0.0])
        entry[1] += trace.dur[i]
        if path.kernel_on_path(trace.correlation[i]):
            entry[0] += trace.dur[i]
    return shares


def _sweep(points: list[tuple[float, int, int, int]], mask: int) -> tuple[dict[int, float], float]:
    """Exclusive µs per group of sorted interval ends (category ``mask`` opens and closes windows)."""
    active: list[dict[int, int]] = [defaultdict(int) for _ in range(mask)]
    counts = [0] * mask
    exclusive: dict[int, float] = defaultdict(float)
    busy = 0.0
    running = inside = 0
    previous = 0.0
    for time, delta, c, group in points:
        if running and inside and time > previous:
            span = time - previous
            busy += span
            for k in range(mask):
                if counts[k]:
                    share = span / counts[k]
                    for g, n in active[k].items():
                        if n:
                            exclusive[g] += share * n
                    break
        if c == mask:
            inside += delta
        else:
            active[c][group] += delta
            counts[c] += delta
            running += delta
        previous = time
    return exclusive, busy


def operator_breakdown(ops: OpTrace, numbers: Iterable[int] | None, ceilings: Ceilings) -> dict[str, Any] | None:
    """One rank's host steps ``numbers`` split by operator group (µs summed over the steps), or None
    when the trace has none of these steps.  ``numbers`` None: the trace has no profiler steps, and
    its one "step" is the span of its GPU activity (as :mod:`tprimat.trace.compare` measures it).

    Keys: ``steps``, ``host_us``, ``busy_us``, ``idle_us``, ``no_operator_us`` and ``groups``
    (key -> the :func:`~tprimat.trace.roofline.group_row` of the GPU work launched in the
    steps, plus ``exclusive_us``).
    """
    from tprimat.trace.analyze import select_window
    from tprimat.trace.opread import activity_operators

    trace = ops.trace
    if numbers is None:
        if not len(trace.ts):
            return None
        first = min(trace.ts)
        windows = [(first, max(t + d for t, d in zip(trace.ts, trace.dur, strict=True)))]
        indices, step_numbers = list(range(len(trace.ts))), []
        host = windows[0][1] - windows[0][0]
    else:
        wanted = set(numbers)
        steps = sorted((s for s in trace.steps if s.number in wanted and s.dur > 0), key=lambda s: s.ts)
        if not steps:
            return None
        windows = [(s.ts, s.ts + s.dur) for s in steps]
        indices, _ = select_window(trace, (steps[0].number, steps[-1].number))
        step_numbers = [s.number for s in steps]
        host = sum(s.dur for s in steps)
    operators = activity_operators(ops)
    exclusive, no_op, busy = exclusive_by_group(ops, operators, windows)
    groups, _, _ = attribute_window(ops, indices, operators)
    rows = {key: group_row(ops, key, group, ceilings) for key, group in groups.items()}
    for key, (value, sig) in exclusive.items():
        row = rows.get(key)
        if row is None:  # only work launched before the steps runs inside them
            name, dims, types, _ = ops.decoded(sig)
            row = rows[key] = {
                "key": key,
                "name": name,
                "shapes": shapes_text(dims, types),
                "kind": ops.cost(sig).kind,
                "calls": 0,
                "gpu_us": 0.0,
            }
        row["exclusive_us"] = value
    for row in rows.values():
        row.setdefault("exclusive_us", 0.0)
    return {
        "steps": step_numbers,
        "host_us": host,
        "busy_us": busy,
        "idle_us": max(host - busy, 0.0),
        "no_operator_us": no_op,
        "has_operators": len(ops.op_ts) > 0,
        "has_shapes": ops.has_shapes,
        "ceilings_notes": list(ceilings.notes),
        "groups": rows,
    }


# -- two sides --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SideOperators:
    """One side's operator groups, per step and averaged over ranks (µs)."""

    groups: dict[str, dict[str, Any]]  # key -> name, shapes, kind, exclusive_us, gpu_us, calls, fractions
    #: key -> share of the group's GPU time on the critical path of one step (None: not computed)
    on_path: dict[str, float] | None
    no_operator_us: float
    idle_us: float
    step_us: float
    has_shapes: bool
    notes: tuple[str, ...] = ()


def summarize_operators(breakdowns: Sequence[dict[str, Any]]) -> SideOperators:
    """Average per-rank :func:`operator_breakdown` results into one side (per step, ranks averaged)."""
    groups: dict[str, dict[str, Any]] = {}
    no_op = idle = step = 0.0
    ranks = len(breakdowns)
    additive = ("exclusive_us", "gpu_us", "calls", "costed_us", "roofline_us", "mamf_roofline_us")
    for breakdown in breakdowns:
        n = max(len(breakdown["steps"]), 1)
        no_op += breakdown["no_operator_us"] / n / ranks
        idle += breakdown["idle_us"] / n / ranks
        step += breakdown["host_us"] / n / ranks
        for key, row in breakdown["groups"].items():
            acc = groups.setdefault(
                key,
                {k: row.get(k) for k in ("name", "shapes", "kind", "dtype", "reason")} | dict.fromkeys(additive, 0.0),
            )
            if not acc["shapes"] and row.get("shapes"):
                acc.update({k: row.get(k) for k in ("shapes", "kind", "dtype", "reason")})
            for k in additive:
                value = row.get(k)
                if value is None:
                    if k in ("roofline_us", "mamf_roofline_us") and row.get("costed_us"):
                        acc[k] = None  # a rank without the roof: no fraction for the side
                    continue
                if acc[k] is not None:
                    acc[k] += value / n / ranks
    for acc in groups.values():
        costed = acc["costed_us"]
        acc["roofline_fraction"] = acc["roofline_us"] / costed if costed and acc["roofline_us"] else None
        acc["mamf_fraction"] = acc["mamf_roofline_us"] / costed if costed and acc["mamf_roofline_us"] else None
    on_path = None
    if all(b.get("critical_path") for b in breakdowns):
        sums: dict[str, list[float]] = {}
        for breakdown in breakdowns:
            for key, (on, total) in breakdown["critical_path"]["by_group"].items():
                entry = sums.setdefault(key, [0.0, 0.0])
                entry[0] += on
                entry[1] += total
        on_path = {key: on / total for key, (on, total) in sums.items() if total > 0}
    notes = [b["critical_path_note"] for b in breakdowns if b.get("critical_path_note")]
    notes += [note for b in breakdowns for note in b.get("ceilings_notes", ())]
    if not any(b["has_operators"] for b in breakdowns):
        notes.append("no CPU operators recorded: the GPU time cannot be attributed to operators")
    elif not any(b["has_shapes"] for b in breakdowns):
        notes.append("no input shapes recorded (record_shapes=True): operators matched by name only, without costs")
    return SideOperators(
        groups=groups,
        on_path=on_path,
        no_operator_us=no_op,
        idle_us=idle,
        step_us=step,
        has_shapes=any(b["has_shapes"] for b in breakdowns),
        notes=tuple(dict.fromkeys(notes)),
    )


@attrs.frozen(kw_only=True)
class OperatorGap:
    """The step-time difference (B − A) decomposed into operator groups, unmatched, no-operator and idle."""

    a: SideOperators
    b: SideOperators

    @property
    def delta_us(self) -> float:
        return self.b.step_us - self.a.step_us

    def matched(self) -> list[dict[str, Any]]:
        """Groups found on both sides: time on each, difference and roofline fractions, largest |difference| first."""
        rows = []
        for key in self.a.groups.keys() & self.b.groups.keys():
            a, b = self.a.groups[key], self.b.groups[key]
            rows.append(
                {
                    "key": key,
                    "name": a["name"],
                    "shapes": a["shapes"] or b["shapes"],
                    "kind": a["kind"] if a["kind"] != "unknown" else b["kind"],
                    "a_us": a["exclusive_us"],
                    "b_us": b["exclusive_us"],
                    "delta_us": b["exclusive_us"] - a["exclusive_us"],
                    "a_calls": a["calls"],
                    "b_calls": b["calls"],
                    "a_roofline_fraction": a["roofline_fraction"],
                    "b_roofline_fraction": b["roofline_fraction"],
                    "a_mamf_fraction": a["mamf_fraction"],
                    "b_mamf_fraction": b["mamf_fraction"],
                    "reason": a["reason"] or b["reason"],
                    "a_on_path": self.a.on_path.get(key) if self.a.on_path is not None else None,
                    "b_on_path": self.b.on_path.get(key) if self.b.on_path is not None else None,
                }
            )
        rows.sort(key=lambda r: (-abs(r["delta_us"]), r["key"]))
        return rows

    def unmatched(self, side: str) -> list[dict[str, Any]]:
        """Groups of side ``"a"`` or ``"b"`` with no counterpart on the other side."""
        ours, theirs = (self.a, self.b) if side == "a" else (self.b, self.a)
        rows = [dict(row, key=key) for key, row in ours.groups.items() if key not in theirs.groups]
        rows.sort(key=lambda r: -r["exclusive_us"])
        return rows

    @property
    def has_critical_path(self) -> bool:
        return self.a.on_path is not None or self.b.on_path is not None

    def components(self) -> dict[str, float]:
        """The decomposition of :attr:`delta_us`: matched groups, unmatched per side, no operator, idle."""
        return {
            "matched_us": sum(r["delta_us"] for r in self.matched()),
            "unmatched_us": sum(r["exclusive_us"] for r in self.unmatched("b"))
            - sum(r["exclusive_us"] for r in self.unmatched("a")),
            "no_operator_us": self.b.no_operator_us - self.a.no_operator_us,
            "idle_us": self.b.idle_us - self.a.idle_us,
        }

    def to_dict(self, top: int = 30) -> dict[str, Any]:
        return {
            "delta_us": self.delta_us,
            "components": self.components(),
            "matched": self.matched()[:top],
            "matched_groups": len(self.matched()),
            "unmatched_a": self.unmatched("a")[:top],
            "unmatched_b": self.unmatched("b")[:top],
            "a": {"no_operator_us": self.a.no_operator_us, "idle_us": self.a.idle_us, "step_us": self.a.step_us},
            "b": {"no_operator_us": self.b.no_operator_us, "idle_us": self.b.idle_us, "step_us": self.b.step_us},
            "notes": [*self.a.notes, *self.b.notes],
        }


def efficiency_sentence(row: dict[str, Any], labels: tuple[str, str]) -> str | None:
    """ "on MI300X this GEMM reaches 36% of its roofline, on H100 62%", or None without fractions."""
    fa, fb = row["a_roofline_fraction"], row["b_roofline_fraction"]
    if fa is None and fb is None:
        return None
    what = {"gemm": "this GEMM", "attention": "this attention"}.get(row["kind"], "this operator")

    def pct(value: float | None) -> str:
        return "no roofline (device not in the tables)" if value is None else f"{value:.0%}"

    return f"on {labels[0]} {what} reaches {pct(fa)} of its roofline, on {labels[1]} {pct(fb)}"


__all__ = [
    "OperatorGap",
    "SideOperators",
    "efficiency_sentence",
    "exclusive_by_group",
    "operator_breakdown",
    "summarize_operators",
]
