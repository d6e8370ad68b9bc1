"""Per-operator roofline of one profiled step: how far each operator is from what the GPU can do.

For every CPU operator that launched GPU work in the window (one profiler step
with ``step=N``, else the window of :mod:`tprimat.trace.analyze`), grouped by
name and recorded input shapes and dtypes:

* **GPU time**: the durations of the kernels, memcpy and memset it launched
  (:func:`tprimat.trace.opread.activity_operators`: a nested operator's kernels count
  for the outermost operator that can be costed);
* **FLOPs and bytes** of one call (:mod:`tprimat.trace.opcost`);
* **achieved** TFLOP/s and TB/s (``calls × cost / GPU time``), **arithmetic
  intensity** (FLOPs / bytes);
* the **roofline time** of one call, ``max(FLOPs / peak, bytes / bandwidth)``
  (bytes / bandwidth for operators costed by bytes only), with the dense peak
  of the operator's dtype and the memory bandwidth of the device from the
  versioned tables of :mod:`tprimat.result.peaks`; the **roofline fraction** is
  ``calls × roofline time / GPU time`` (1.0: at the roof).  With a
  microbenchmark of the device (:func:`tprimat.microbench.latest_for_device`) the
  same with the measured MAMF of the dtype as the compute roof.

An operator whose cost cannot be computed is listed with the reason; a device
not in the tables gets no fraction, and the result says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from tprimat.errors import TprimatError
from tprimat.trace.opcost import OpCost, shapes_text
from tprimat.trace.opread import OpTrace

if TYPE_CHECKING:
    from tprimat.trace.reader import RankTrace

#: GPU activities that are work (a ``cuda_sync`` event is waiting, not work).
_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
NO_OPERATOR = "(no operator)"


@attrs.frozen(kw_only=True)
class Ceilings:
    """What the device can do: dense peaks per dtype, memory bandwidth, measured MAMF, and notes."""

    device: str | None
    device_key: str | None = None
    peaks_tflops: dict[str, float] = attrs.Factory(dict)
    peaks_source: str | None = None
    peaks_version: str | None = None
    memory_tbs: float | None = None
    memory_source: str | None = None
    memory_version: str | None = None
    mamf_tflops: dict[str, float] = attrs.Factory(dict)
    mamf_source: str | None = None
    notes: tuple[str, ...] = ()

    def roofline_s(self, cost: OpCost, mamf: bool = False) -> float | None:
        """Roofline time of one call (s): ``max(FLOPs / compute roof, bytes / bandwidth)``; None without roofs."""
        if not cost.costed or self.memory_tbs is None or cost.bytes is None:
            return None
        memory_s = cost.bytes / (self.memory_tbs * 1e12)
        if cost.flops is None:
            return memory_s
        roofs = self.mamf_tflops if mamf else self.peaks_tflops
        roof = roofs.get(cost.dtype or "")
        if roof is None:
            return None
        return max(cost.flops / (roof * 1e12), memory_s)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def device_ceilings(
    device: str | None, microbench_dir: str | Path | None = None, compute_units: int | None = None
) -> Ceilings:
    """The roofs of ``device`` (its name as the trace records it), with notes for what is missing.

    ``compute_units``: the SMs / compute units the trace's device reports (``numSms``).  Fewer
    than the whole GPU has (a compute partition such as an MI300X in CPX mode, which bears the
    whole GPU's name) leave it without roofs: its share of the peak and bandwidth is unknown.
    """
    from tprimat.hardware.devices import find_device
    from tprimat.microbench import latest_for_device
    from tprimat.result.peaks import PEAKS_VERSION, lookup_bandwidth, lookup_peak

    row = find_device(device)
    whole = (row.sm_count or row.compute_units) if row else None
    if row is not None and whole and compute_units and compute_units < whole:
        note = (
            f"device reports {compute_units} of the {whole} compute units of a whole {row.key}: a partition, "
            "whose share of the peaks and the memory bandwidth is unknown: no roofline fraction"
        )
        return Ceilings(device=device, device_key=row.key, notes=(note,))
    notes = []
    bandwidth = lookup_bandwidth(device)
    if bandwidth.tbs is None:
        notes.append(f"{bandwidth.note}: no roofline fraction")
    peaks: dict[str, float] = {}
    if row is not None:
        for dtype in ("bf16", "fp16", "fp8"):
            found = lookup_peak(device, dtype)
            if found.tflops is not None:
                peaks[dtype] = found.tflops
    elif device is not None and bandwidth.tbs is not None:
        notes.append(f"no datasheet peak for device {device!r}: no roofline fraction for FLOP-counted operators")
    mamf: dict[str, float] = {}
    mamf_source = None
    if device:
        try:
            summary = latest_for_device(device, microbench_dir)
        except TprimatError:
            summary = None
        if summary:
            mamf = {k: float(v) for k, v in (summary.get("mamf_tflops") or {}).items() if v}
            mamf_source = summary.get("path")
    return Ceilings(
        device=device,
        device_key=row.key if row else None,
        peaks_tflops=peaks,
        peaks_source=row.peaks_source if row else None,
        peaks_version=PEAKS_VERSION if row else None,
        memory_tbs=bandwidth.tbs,
        memory_source=bandwidth.source,
        memory_version=bandwidth.table_version if bandwidth.tbs else None,
        mamf_tflops=mamf,
        mamf_source=mamf_source,
        notes=tuple(notes),
    )


@attrs.define
class _Group:
    """Accumulates one group (name + shapes + dtypes) over the window."""

    name: str
    dims: Any
    types: Any
    calls: set[int] = attrs.Factory(set)
    kernels: int = 0
    gpu_us: float = 0.0
    by_sig: dict[int, set[int]] = attrs.Factory(lambda: defaultdict(set))  # signature -> calls
    us_by_sig: dict[int, float] = attrs.Factory(lambda: defaultdict(float))


def group_key(name: str, dims: Any, types: Any) -> str:
    """The key operators are grouped and matched by: name, recorded shapes and dtypes."""
    return f"{name} {msgspec.json.encode(dims).decode()} {msgspec.json.encode(types).decode()}"


def attribute_window(
    ops: OpTrace, indices: list[int], operators: Sequence[int]
) -> tuple[dict[str, _Group], float, int]:
    """The window's GPU work grouped by operator group; also the µs and count attributed to no operator.

    ``operators``: for each GPU activity of the trace, its operator (-1: none; see
    :func:`~tprimat.trace.opread.activity_operators`)."""
    from tprimat.trace.reader import ACTIVITY_CODES

    trace = ops.trace
    groups: dict[str, _Group] = {}
    of_sig: dict[int, _Group] = {}
    no_op_us, no_op_kernels = 0.0, 0
    work = {code for code, cat in enumerate(ACTIVITY_CODES) if cat in _WORK}
    for i in indices:
        if trace.code[i] not in work:
            continue
        op = operators[i]
        dur = trace.dur[i]
        if op < 0:
            no_op_us += dur
            no_op_kernels += 1
            continue
        sig = ops.op_sig[op]
        group = of_sig.get(sig)
        if group is None:
            name, dims, types, _ = ops.decoded(sig)
            key = group_key(name, dims, types)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(name, dims, types)
            of_sig[sig] = group
        group.calls.add(op)
        group.by_sig[sig].add(op)
        group.us_by_sig[sig] += dur
        group.kernels += 1
        group.gpu_us += dur
    return groups, no_op_us, no_op_kernels


def group_row(ops: OpTrace, key: str, group: _Group, ceilings: Ceilings) -> dict[str, Any]:
    """One group's figures: time, cost, achieved rates, roofline fractions (module docstring)."""
    flops = moved = roof_s = mamf_s = 0.0
    costed_us = 0.0
    have_flops, fraction_ok, mamf_ok = True, True, bool(ceilings.mamf_tflops)
    reasons: list[str] = []
    kind = "unknown"
    dtype = formula = None
    costed_calls = 0
    for sig, calls in group.by_sig.items():
        cost = ops.cost(sig)
        kind = cost.kind
        if not cost.costed:
            reasons.append(cost.reason or "no cost")
            continue
        n = len(calls)
        costed_calls += n
        costed_us += group.us_by_sig[sig]
        dtype, formula = cost.dtype, cost.formula
        moved += n * (cost.bytes or 0.0)
        if cost.flops is None:
            have_flops = False
        else:
            flops += n * cost.flops
        roof = ceilings.roofline_s(cost)
        fraction_ok = fraction_ok and roof is not None
        roof_s += n * (roof or 0.0)
        roof_mamf = ceilings.roofline_s(cost, mamf=True) if mamf_ok else None
        mamf_ok = mamf_ok and roof_mamf is not None
        mamf_s += n * (roof_mamf or 0.0)
    costed = costed_calls > 0
    n_calls = len(group.calls)
    row: dict[str, Any] = {
        "key": key,
        "name": group.name,
        "shapes": shapes_text(group.dims, group.types),
        "kind": kind,
        "dtype": dtype if costed and have_flops else None,
        "calls": n_calls,
        "kernels": group.kernels,
        "gpu_us": group.gpu_us,
        "mean_us": group.gpu_us / n_calls if n_calls else None,
        "flops_per_call": flops / costed_calls if costed and have_flops else None,
        "bytes_per_call": moved / costed_calls if costed else None,
        "intensity": flops / moved if costed and have_flops and moved else None,
        "tflops": flops / costed_us / 1e6 if costed and have_flops and costed_us else None,
        "tbs": moved / costed_us / 1e6 if costed and costed_us else None,
        "bound": None,
        "roofline_fraction": None,
        "mamf_fraction": None,
        "costed_us": costed_us,
        "roofline_us": roof_s * 1e6 if costed and fraction_ok else None,
        "mamf_roofline_us": mamf_s * 1e6 if costed and mamf_ok and have_flops else None,
        "formula": formula,
        "reason": "; ".join(dict.fromkeys(reasons)) or None if not costed else None,
        "note": None,
    }
    if costed and reasons:
        row["note"] = f"{n_calls - costed_calls} of {n_calls} calls not costed: {'; '.join(dict.fromkeys(reasons))}"
    if costed and costed_us > 0:
        if fraction_ok:
            row["roofline_fraction"] = roof_s * 1e6 / costed_us
            row["bound"] = _bound(flops if have_flops else None, moved, dtype, ceilings)
        elif not row["note"]:
            row["note"] = _no_fraction(dtype if have_flops else None, ceilings)
        if mamf_ok and have_flops:
            row["mamf_fraction"] = mamf_s * 1e6 / costed_us
    return row


def _bound(flops: float | None, moved: float, dtype: str | None, ceilings: Ceilings) -> str:
    if flops is None or ceilings.memory_tbs is None:
        return "memory"
    roof = ceilings.peaks_tflops.get(dtype or "")
    if roof is None:
        return "memory"
    return "compute" if flops / (roof * 1e12) >= moved / (ceilings.memory_tbs * 1e12) else "memory"


def _no_fraction(dtype: str | None, ceilings: Ceilings) -> str:
    if ceilings.memory_tbs is None:
        return "no memory bandwidth for this device"
    return f"no {dtype} peak for this device in the peaks table"


def roofline(
    ops: OpTrace,
    step: int | None = None,
    ceilings: Ceilings | None = None,
    microbench_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The per-operator roofline of one rank (JSON-ready): window, roofs, totals and one row per group.

    ``step``: one profiler step (its number); by default the window of ``trace analyze``
    (every step but the last, Kineto's last being cut short), or the trace's only step.
    Rows are sorted by GPU time; the GPU work no operator launched is in ``no_operator``.
    """
    from tprimat.trace.analyze import select_window
    from tprimat.trace.opread import activity_operators
    from tprimat.trace.reader import malformed_note

    trace = ops.trace
    if ceilings is None:
        ceilings = device_ceilings(trace.device, microbench_dir, compute_units_of(trace))
    numbers = sorted({s.number for s in trace.steps})
    if step is not None:
        steps: tuple[int | None, int | None] | None = (step, step)
    elif len(numbers) == 1:
        steps = (numbers[0], numbers[0])  # the one profiled step, not what ran before it
    else:
        steps = None
    indices, window = select_window(trace, steps)
    operators = activity_operators(ops)
    groups, no_op_us, no_op_kernels = attribute_window(ops, indices, operators)
    rows = sorted((group_row(ops, key, group, ceilings) for key, group in groups.items()), key=lambda r: -r["gpu_us"])
    operator_us = sum(r["gpu_us"] for r in rows)
    total_us = operator_us + no_op_us
    for row in rows:
        row["share"] = row["gpu_us"] / total_us if total_us else 0.0
    notes = list(ceilings.notes)
    if not len(ops.op_ts):
        notes.append("no CPU operators in this trace: GPU time cannot be attributed to operators")
    elif not ops.has_shapes:
        notes.append("no input shapes recorded (profile with record_shapes=True): operators are listed without costs")
    if trace.malformed:
        notes.append(malformed_note(trace) or "")
    n_steps = len(window.get("steps") or []) if window["mode"] != "all" else 1
    return {
        "file": str(trace.path),
        "rank": trace.rank,
        "device": trace.device,
        "vendor": trace.vendor,
        "window": window,
        "steps_in_window": max(n_steps, 1),
        "ceilings": ceilings.to_dict(),
        "totals": {
            "gpu_us": total_us,
            "operator_us": operator_us,
            "costed_us": sum(r["gpu_us"] for r in rows if r["reason"] is None and r["kind"] != "unknown"),
            "roofline_us": sum(r["gpu_us"] for r in rows if r["roofline_fraction"] is not None),
            "unknown_us": sum(r["gpu_us"] for r in rows if r["kind"] == "unknown"),
            "uncosted_us": sum(r["gpu_us"] for r in rows if r["kind"] != "unknown" and r["reason"]),
            "no_operator_us": no_op_us,
            "no_operator_kernels": no_op_kernels,
            "operators": len(ops.op_ts),
            "signatures": len(ops.signatures),
        },
        "groups": rows,
        "notes": notes,
    }


def compute_units_of(trace: RankTrace) -> int | None:
    """The SMs / compute units of the trace's first device (``deviceProperties[0].numSms``), if recorded."""
    props = trace.metadata.get("deviceProperties") or trace.metadata.get("computeProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        units = props[0].get("numSms")
        if type(units) is int and units > 0:
            return units
    return None


def roofline_file(
    path: str | Path, step: int | None = None, microbench_dir: str | Path | None = None, workers: int | None = None
) -> dict[str, Any]:
    """Read ``path`` (:func:`tprimat.trace.opread.read_ops`) and compute its roofline."""
    from tprimat.trace.opread import read_ops
    from tprimat.workers import default_workers

    workers = default_workers() if workers is None else max(1, workers)
    return roofline(read_ops(path, workers=workers), step=step, microbench_dir=microbench_dir)


# -- plot -------------------------------------------------------------------------------------


def plot_roofline(result: dict[str, Any], path: str | Path, top: int = 40) -> Path:
    """Write the roofline plot of a :func:`roofline` result as PNG (needs matplotlib).

    Left: operators with FLOPs (GEMM, attention) on log-log axes, achieved TFLOP/s against
    arithmetic intensity, under the roofs ``min(peak, intensity × bandwidth)`` of each dtype
    present (and of the measured MAMF, dashed), each roof's ridge point marked.  Right:
    operators costed by bytes only, achieved TB/s against bytes per call, under the bandwidth.
    One point per group, its area proportional to the group's GPU time.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    ceilings = result["ceilings"]
    bandwidth = ceilings["memory_tbs"]
    rows = [r for r in result["groups"] if r["tbs"]][:top]
    compute = [r for r in rows if r["tflops"] and r["intensity"]]
    memory = [r for r in rows if not r["tflops"]]
    largest = max((r["gpu_us"] for r in rows), default=1.0) or 1.0
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    colours = {"gemm": "#0072B2", "attention": "#56B4E9", "norm": "#CC79A7", "softmax": "#E69F00"}
    dtypes = sorted({r["dtype"] for r in compute if r["dtype"] in ceilings["peaks_tflops"]})
    intensities = [r["intensity"] for r in compute] or [1.0]
    low, high = min(intensities) / 4, max(intensities) * 4
    if bandwidth:
        for dtype in dtypes:
            peak = ceilings["peaks_tflops"][dtype]
            ridge = peak / bandwidth
            low, high = min(low, ridge / 8), max(high, ridge * 8)
        xs = [low * (high / low) ** (i / 200) for i in range(201)]
        for dtype in dtypes:
            peak = ceilings["peaks_tflops"][dtype]
            left.plot(xs, [min(peak, x * bandwidth) for x in xs], color="#333333", linewidth=1.2)
            ridge = peak / bandwidth
            left.plot([ridge], [peak], marker="o", color="#333333", markersize=4)
            left.annotate(
                f"{dtype} peak {peak:g} TFLOP/s\nridge {ridge:.0f} FLOP/B",
                (ridge, peak),
                textcoords="offset points",
                xytext=(6, 4),
                fontsize=8,
            )
            mamf = ceilings["mamf_tflops"].get(dtype)
            if mamf:
                left.plot(xs, [min(mamf, x * bandwidth) for x in xs], color="#333333", linewidth=1, linestyle="--")
                left.annotate(f"{dtype} MAMF {mamf:.0f}", (high, mamf), ha="right", va="bottom", fontsize=8)
    _points(left, [(r, r["intensity"], r["tflops"]) for r in compute], largest, colours, "#999999", "lower left")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("arithmetic intensity (FLOP/byte)")
    left.set_ylabel("achieved TFLOP/s")
    left.set_title("GEMM and attention (area: GPU time)")
    for kind in ("gemm", "attention"):
        left.scatter([], [], color=colours[kind], label=kind)
    left.legend(loc="center right", fontsize=8, frameon=False)
    tops = [ceilings["peaks_tflops"][d] for d in dtypes] + [r["tflops"] for r in compute]
    if tops:
        left.set_ylim(top=max(tops) * 4)
    _points(right, [(r, r["bytes_per_call"], r["tbs"]) for r in memory], largest, colours, "#009E73", "lower right")
    if bandwidth:
        right.axhline(bandwidth, color="#333333", linewidth=1.2)
        right.annotate(
            f"bandwidth {bandwidth:g} TB/s",
            (0.02, bandwidth),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=8,
        )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("bytes moved per call")
    right.set_ylabel("achieved TB/s")
    right.set_title("bytes-only operators (area: GPU time)")
    device = result.get("device") or "unknown device"
    fig.suptitle(f"Per-operator roofline: {device}, {Path(result['file']).name}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _points(
    axes: Any,
    points: list[tuple[dict[str, Any], float, float]],
    largest: float,
    colours: dict[str, str],
    other: str,
    where: str,
) -> None:
    """One point per group at (x, y), its area proportional to its GPU time, coloured by kind (else
    ``other``); the five largest numbered and named in a box at ``where``."""
    for row, x, y in points:
        colour = colours.get(row["kind"], other)
        axes.scatter(x, y, s=20 + 600 * row["gpu_us"] / largest, color=colour, alpha=0.7, edgecolors="white")
    _number(axes, points[:5], where)


def _number(axes: Any, points: list[tuple[dict[str, Any], float, float]], where: str) -> None:
    """Number the largest groups on the plot and name them in a box at ``where``."""
    lines = []
    for n, (row, x, y) in enumerate(points, start=1):
        axes.annotate(str(n), (x, y), fontsize=8, fontweight="bold", ha="center", va="center")
        lines.append(f"{n} {row['name'].removeprefix('aten::')} {row['shapes']}"[:72])
    if lines:
        from matplotlib.offsetbox import AnchoredText

        box = AnchoredText("\n".join(lines), loc=where, prop={"size": 7}, frameon=True)
        box.patch.set_alpha(0.8)
        axes.add_artist(box)


__all__ = ["NO_OPERATOR", "Ceilings", "device_ceilings", "group_key", "plot_roofline", "roofline", "roofline_file"]
