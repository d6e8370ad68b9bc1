"""Summarize a PyTorch CUDA/HIP allocator snapshot: the peak, and what was live at the peak, by category.

A snapshot is the pickle ``torch.cuda.memory._dump_snapshot()`` writes after
``torch.cuda.memory._record_memory_history()``: ``segments`` (the allocator's
state when it was taken, each block with its allocation stack when recorded)
and ``device_traces`` (per device, the recorded alloc/free events with stacks).
The live set at the start of the history is the end state with the history
undone, so allocations made before recording began are counted too; the
history is then replayed to find the peak.

Each allocation live at the peak is put in a category from its stack:
optimizer state (allocated inside ``torch.optim``), gradients (allocated by
the autograd engine during backward: parameter and activation gradients),
parameters (created by ``nn.Module`` initialisation or moved by
``Module.to()/cuda()``), activations (allocated inside a module's forward) and
other (inputs, workspaces, or no recorded stack).

Pickles can run code when loaded; snapshots are plain data, so the loader
refuses any pickle that names a class or function.
"""

from __future__ import annotations

import gzip
import pickle
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat.errors import TprimatError

CATEGORIES = ("parameters", "gradients", "optimizer state", "activations", "other")
VIEWER_URL = "https://pytorch.org/memory_viz"


class SnapshotError(TprimatError):
    """A file that is not a readable allocator snapshot; the message says why."""


@attrs.frozen(kw_only=True)
class CategoryUse:
    category: str
    bytes: int
    allocations: int


@attrs.frozen(kw_only=True)
class Site:
    """Where live memory was allocated: the innermost Python frame outside torch, else the innermost one."""

    where: str
    bytes: int
    allocations: int


@attrs.frozen(kw_only=True)
class DeviceSummary:
    device: int
    events: int  # recorded alloc/free events
    peak_bytes: int  # largest allocated total over the recorded history
    peak_event: int | None  # index of the event that reached it (None: the start of the history)
    peak_offset_s: float | None  # seconds from the first recorded event
    at_peak: tuple[CategoryUse, ...]
    sites: tuple[Site, ...]  # largest allocation sites live at the peak
    no_stack_bytes: int  # live at the peak without a recorded stack (counted as "other")
    end_allocated_bytes: int  # from the segments, when the snapshot was taken
    end_reserved_bytes: int
    replayed_end_bytes: int  # the history replayed to its end; differs from end_allocated when events are missing
    marker_mismatches: int  # recorded allocator totals ("snapshot" events) the replay does not reproduce


@attrs.frozen(kw_only=True)
class SnapshotSummary:
    path: str
    devices: tuple[DeviceSummary, ...]
    viewer: str = VIEWER_URL


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(f"refusing to load {module}.{name}: an allocator snapshot holds plain data only")


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """The snapshot at ``path`` (optionally gzip-compressed) as plain data."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read: {exc.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        import io

        data = _DataOnly(io.BytesIO(raw)).load()
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    except Exception as exc:  # a truncated or foreign pickle fails in many ways
        raise SnapshotError(f"{path}: not a PyTorch allocator snapshot ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or "segments" not in data:
        raise SnapshotError(
            f"{path}: not a PyTorch allocator snapshot (no 'segments'); write one with "
            "torch.cuda.memory._dump_snapshot() after torch.cuda.memory._record_memory_history()"
        )
    return data


def categorize(frames: Sequence[Mapping[str, Any]]) -> str:
    """The category of an allocation from its stack (innermost frame first)."""
    if not frames:
        return "other"
    files = [str(f.get("filename", "")) for f in frames]
    names = [str(f.get("name", "")) for f in frames]
    if any("/torch/optim/" in f for f in files):
        return "optimizer state"
    if any("autograd::Engine" in n or "Backward" in n for n in names) or any(
        f.endswith("torch/autograd/__init__.py") and n in ("backward", "_make_grads")
        for f, n in zip(files, names, strict=True)
    ):
        return "gradients"
    for f, n in zip(files, names, strict=True):
        if f.endswith("torch/nn/modules/module.py") and n in ("_apply", "to", "cuda", "load_state_dict"):
            return "parameters"
        if "/torch/nn/modules/" in f and n == "__init__" or f.endswith("torch/nn/init.py"):
            return "parameters"
    if any(n in ("forward", "_call_impl", "_wrapped_call_impl") for n in names):
        return "activations"
    return "other"


def _site(frames: Sequence[Mapping[str, Any]]) -> str:
    if not frames:
        return "(no stack recorded)"
    python = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    if not python:
        # Allocations of the autograd engine's threads have C++ frames only: name the backward function.
        names = [str(f.get("name", "")) for f in frames]
        backward = next((n for n in names if "Backward" in n), None)
        if backward:
            return backward.split("(")[0].split("::")[-2] + " (autograd, C++)"
        return "(no Python frame)"
    user = [f for f in python if "/torch/" not in str(f["filename"])]
    frame = (user or python)[0]
    return f"{Path(str(frame['filename'])).name}:{frame.get('line', 0)} {frame.get('name', '')}"


def _end_state(segments: Iterable[Mapping[str, Any]], device: int) -> tuple[dict[int, tuple[int, list]], int, int]:
    live: dict[int, tuple[int, list]] = {}
    allocated = reserved = 0
    for segment in segments:
        if segment.get("device", 0) != device:
            continue
        reserved += int(segment.get("total_size", 0))
        for block in segment.get("blocks", []):
            if block.get("state") == "active_allocated":
                live[int(block["address"])] = (int(block["size"]), list(block.get("frames", [])))
                allocated += int(block["size"])
    return live, allocated, reserved


_FREES = ("free_requested", "free_completed")
#: The caching allocator rounds every request up to a multiple of 512 bytes (its smallest block);
#: its "allocated" figures, and the snapshot's blocks, count the rounded sizes.
_ROUND = 512


def _block_size(requested: int) -> int:
    return max(_ROUND, -(-int(requested) // _ROUND) * _ROUND)


Live = dict[int, tuple[int, list]]  # address -> (bytes, allocation stack)


def _apply(live: Live, event: Mapping[str, Any]) -> None:
    if event["action"] == "alloc":
        live[int(event["addr"])] = (_block_size(event["size"]), list(event.get("frames", [])))
    elif event["action"] != "snapshot":
        live.pop(int(event["addr"]), None)


def _undo(live: Live, events: Sequence[Mapping[str, Any]]) -> Live:
    """What was live before ``events``, given what was live after them."""
    live = dict(live)
    for event in reversed(events):
        addr = int(event["addr"])
        if event["action"] == "alloc":
            live.pop(addr, None)
        elif event["action"] != "snapshot" and addr not in live:
            live[addr] = (_block_size(event["size"]), list(event.get("frames", [])))
    return live


def _peak(start: Live, events: Sequence[Mapping[str, Any]]) -> tuple[int, int | None, int, int]:
    """(peak bytes, index of the event reaching it, bytes at the end, allocator totals not reproduced)."""
    live = dict(start)
    total = peak = sum(size for size, _ in live.values())
    peak_index: int | None = None
    mismatches = 0
    for index, event in enumerate(events):
        if event["action"] == "snapshot":
            mismatches += int(event["size"]) != total  # the allocator's own total when it was recorded
            continue
        before = live.get(int(event["addr"]), (0, []))[0]
        _apply(live, event)
        total += live.get(int(event["addr"]), (0, []))[0] - before
        if total > peak:
            peak, peak_index = total, index
    return peak, peak_index, total, mismatches


def _group(live: Live, top: int) -> tuple[tuple[CategoryUse, ...], tuple[Site, ...], int]:
    by_category = {c: [0, 0] for c in CATEGORIES}
    sites: dict[str, list[int]] = {}
    no_stack = 0
    for size, frames in live.values():
        for bucket in (by_category[categorize(frames)], sites.setdefault(_site(frames), [0, 0])):
            bucket[0] += size
            bucket[1] += 1
        no_stack += 0 if frames else size
    ranked = sorted(sites.items(), key=lambda item: -item[1][0])[:top]
    return (
        tuple(CategoryUse(category=c, bytes=b, allocations=n) for c, (b, n) in by_category.items()),
        tuple(Site(where=w, bytes=b, allocations=n) for w, (b, n) in ranked),
        no_stack,
    )


def summarize_device(snapshot: Mapping[str, Any], device: int, *, top: int = 8) -> DeviceSummary:
    """The peak of one device's recorded history and what was live at it."""
    traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    events = [e for e in trace if e.get("action") in ("alloc", *_FREES, "snapshot")]
    end, end_allocated, end_reserved = _end_state(snapshot["segments"], device)
    start = _undo(end, events)
    peak, peak_index, replayed_end, mismatches = _peak(start, events)
    live = dict(start)
    for event in events[: 0 if peak_index is None else peak_index + 1]:
        _apply(live, event)
    at_peak, sites, no_stack = _group(live, top)
    offset = None
    if peak_index is not None and "time_us" in events[peak_index] and "time_us" in events[0]:
        offset = (events[peak_index]["time_us"] - events[0]["time_us"]) / 1e6
    counted = [e for e in events if e["action"] != "snapshot"]
    return DeviceSummary(
        device=device,
        events=len(counted),
        peak_bytes=peak,
        peak_event=None if peak_index is None else sum(e["action"] != "snapshot" for e in events[:peak_index]),
        peak_offset_s=offset,
        at_peak=at_peak,
        sites=sites,
        no_stack_bytes=no_stack,
        end_allocated_bytes=end_allocated,
        end_reserved_bytes=end_reserved,
        replayed_end_bytes=replayed_end,
        marker_mismatches=mismatches,
    )


def summarize_snapshot(path: str | Path, *, top: int = 8) -> SnapshotSummary:
    """Load the snapshot at ``path`` and summarize every device that has memory or history in it."""
    snapshot = load_snapshot(path)
    devices = {int(s.get("device", 0)) for s in snapshot["segments"]}
    devices |= {i for i, trace in enumerate(snapshot.get("device_traces") or []) if trace}
    return SnapshotSummary(
        path=str(path), devices=tuple(summarize_device(snapshot, d, top=top) for d in sorted(devices))
    )
