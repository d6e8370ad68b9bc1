"""Microbenchmark documents: the versioned JSON, its summary, where it is kept, how it is found.

Nothing here imports torch: ``tprimat run`` and ``tprimat compare`` read the
latest microbench of a device with :func:`latest_for_device` and divide by
its measured ceiling with :func:`mamf_utilisation`.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.hardware.devices import find_device
from tprimat.result.metrics import mamf_utilisation  # noqa: F401  (re-exported: defined with the other figures)
from tprimat.result.peaks import lookup_peak
from tprimat.result.schema import DevicePartition

KIND = "tprimat.microbench"
SCHEMA_VERSION = 1
ENV_DIRECTORY = "TPRIMAT_MICROBENCH_DIR"


class MicrobenchError(TprimatError):
    """A microbenchmark that cannot run or a document that cannot be read."""


def default_directory() -> Path:
    """``$TPRIMAT_MICROBENCH_DIR``, else ``~/.cache/tprimat/microbench``."""
    configured = os.environ.get(ENV_DIRECTORY)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "tprimat" / "microbench"


def _ok(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok" and r.get("tflops") is not None]


def gemm_dtype_key(row: dict[str, Any]) -> str:
    """The dtype a GEMM row's ceiling counts for: what ran, not what was asked."""
    return "fp8" if row["dtype"] == "fp8" else (row.get("dtype_used") or row["dtype"])


def _spread(values: Sequence[float]) -> float | None:
    """(max − min) / max across GPUs: 0.03 means the slowest GPU is 3% behind the fastest."""
    if not values or max(values) <= 0:
        return None
    return (max(values) - min(values)) / max(values)


def _by_device(rows: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["device_index"], []).append(row)
    return grouped


GEMM_CASE_FIELDS = ("group", "name", "pass", "op", "dtype", "m", "n", "k")
ATTENTION_CASE_FIELDS = ("impl", "variant", "dtype", "window")


def case_spread(rows: Iterable[dict[str, Any]], fields: Sequence[str], metric: str = "tflops") -> list[dict[str, Any]]:
    """For each case measured on several GPUs: min, median and max TFLOP/s and the spread."""
    grouped: dict[tuple[Any, ...], list[tuple[int, float]]] = {}
    for row in rows:
        value = row.get(metric) if metric == "tflops" else (row.get(metric) or {}).get("tflops")
        if row.get("status") != "ok" or value is None:
            continue
        grouped.setdefault(tuple(row.get(f) for f in fields), []).append((row["device_index"], value))
    out = []
    for key, entries in grouped.items():
        values = [v for _, v in entries]
        slowest = min(entries, key=lambda e: e[1])[0]
        out.append(
            {
                **dict(zip(fields, key, strict=True)),
                "devices": len(values),
                "tflops_min": min(values),
                "tflops_median": statistics.median(values),
                "tflops_max": max(values),
                "spread": _spread(values),
                "slowest_device": slowest,
            }
        )
    return out


def _partition(document: dict[str, Any]) -> DevicePartition | None:
    """The GPU partition the devices are (MIG, CPX, ...), as platform detection recorded it."""
    recorded = document.get("partition")
    return DevicePartition(**recorded) if recorded else None


def summarize(document: dict[str, Any]) -> dict[str, Any]:
    """The figures other commands use, derived from a document's rows (nothing else)."""
    gemm = document.get("gemm") or []
    attention = document.get("attention") or []
    device_name = document.get("device_name")
    summary: dict[str, Any] = {
        "mamf_tflops": {},
        "mamf_tflops_max": {},
        "mamf_spread": {},
        "mamf_per_device": {},
        "mamf_best": {},
        "peak_tflops": {},
        "peak_source": {},
        "mamf_fraction_of_peak": {},
        "model_gemm": {},
        "linear_vs_matmul": {},
        "attention": {},
        "unavailable": {},
        "notes": [],
    }
    ok_gemm = _ok(gemm)
    for dtype in sorted({gemm_dtype_key(r) for r in ok_gemm}):
        rows = [r for r in ok_gemm if gemm_dtype_key(r) == dtype]
        per_device = {i: max(rs, key=lambda r: r["tflops"]) for i, rs in _by_device(rows).items()}
        values = [per_device[i]["tflops"] for i in sorted(per_device)]
        summary["mamf_per_device"][dtype] = values
        summary["mamf_tflops"][dtype] = min(values)
        summary["mamf_tflops_max"][dtype] = max(values)
        summary["mamf_spread"][dtype] = _spread(values)
        summary["mamf_best"][dtype] = [
            {f: best[f] for f in ("device_index", "tflops", "tflops_max", "op", "group", "name", "pass", "m", "n", "k")}
            for best in (per_device[i] for i in sorted(per_device))
        ]
        peak = lookup_peak(device_name, dtype, _partition(document))
        summary["peak_tflops"][dtype] = peak.tflops
        summary["peak_source"][dtype] = (
            f"{peak.device_key} {peak.dtype} (peaks table {peak.table_version})" if peak.tflops else peak.note
        )
        summary["mamf_fraction_of_peak"][dtype] = min(values) / peak.tflops if peak.tflops else None
        summary["model_gemm"][dtype] = _model_gemm(rows, min(values))
        ratios = _linear_vs_matmul(rows)
        if ratios:
            summary["linear_vs_matmul"][dtype] = ratios
    for row in gemm:
        if row.get("status") == "unavailable":
            summary["unavailable"][f"gemm {row['dtype']}"] = row.get("reason")
    for row in attention:
        if row.get("status") == "unavailable":
            summary["unavailable"][f"attention {row['impl']} {row['dtype']}"] = row.get("reason")
    summary["attention"] = _attention_summary(attention, summary["mamf_tflops"])
    fallbacks = sorted({r["reason"] for r in gemm + attention if r.get("status") == "ok" and r.get("reason")})
    summary["notes"].extend(fallbacks)
    summary["notes"].extend(_failure_notes("GEMM", gemm, _gemm_label))
    summary["notes"].extend(_failure_notes("attention", attention, _attention_label))
    return summary


def _gemm_label(row: dict[str, Any]) -> str:
    return (
        f"{row['name']}/{row['pass']} {row['m']}x{row['n']}x{row['k']} {row['op']} "
        f"{row['dtype']} on device {row['device_index']}"
    )


def _attention_label(row: dict[str, Any]) -> str:
    return f"{row['impl']} {row['variant']} {row['dtype']} on device {row['device_index']}"


def _failure_notes(kind: str, rows: list[dict[str, Any]], label: Any) -> list[str]:
    """One note per distinct reason of failed or skipped cases, with a count and an example."""
    by_reason: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("status") in ("failed", "skipped"):
            by_reason.setdefault((row["status"], row.get("reason") or "?"), []).append(row)
    return [
        f"{len(group)} {kind} case(s) {status}: {reason} (e.g. {label(group[0])})"
        for (status, reason), group in sorted(by_reason.items())
    ]


def _model_gemm(rows: list[dict[str, Any]], mamf: float) -> dict[str, Any] | None:
    """FLOP-weighted TFLOP/s of the model's own GEMMs (all passes) on the slowest GPU.

    One operator per shape: ``torch.matmul`` for BF16-class rows (what autograd
    runs for the backward), ``torch._scaled_mm`` for FP8.
    """
    model = [r for r in rows if r["group"] == "model" and r["op"] in ("matmul", "scaled_mm")]
    per_device = {}
    for index, device_rows in _by_device(model).items():
        flops = sum(r["flops"] for r in device_rows)
        seconds = sum(r["time_s"]["median"] for r in device_rows)
        per_device[index] = flops / seconds / 1e12 if seconds > 0 else None
    values = [v for v in per_device.values() if v is not None]
    if not values:
        return None
    slowest = min(values)
    return {
        "tflops": slowest,
        "tflops_per_device": [per_device[i] for i in sorted(per_device)],
        "efficiency": slowest / mamf if mamf > 0 else None,
        "shapes": len(model),
    }


def _linear_vs_matmul(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per operator, TFLOP/s of ``F.linear`` over ``torch.matmul`` for the same forward shape."""
    matmul = {
        (r["device_index"], r["m"], r["n"], r["k"]): r["tflops"]
        for r in rows
        if r["op"] == "matmul" and r["pass"] == "fwd"
    }
    out = {}
    for op in ("linear", "linear+bias"):
        ratios = []
        for r in rows:
            key = (r["device_index"], r["m"], r["n"], r["k"])
            if r["op"] == op and key in matmul and matmul[key]:
                ratios.append((r["tflops"] / matmul[key], r))
        if ratios:
            worst, row = min(ratios, key=lambda x: x[0])
            out[op] = {
                "median_ratio": statistics.median(x for x, _ in ratios),
                "worst_ratio": worst,
                "worst_shape": [row["m"], row["n"], row["k"]],
                "worst_name": row["name"],
                "cases": len(ratios),
            }
    return out


def _attention_summary(rows: list[dict[str, Any]], mamf: dict[str, float]) -> dict[str, Any]:
    """Per implementation and variant: the slowest GPU's TFLOP/s and its share of the ceiling."""
    out: dict[str, Any] = {}
    ok = [r for r in rows if r.get("status") == "ok" and r.get("fwd+bwd")]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in ok:
        groups.setdefault((r["impl"], r["variant"], r["dtype_used"]), []).append(r)
    for (impl, variant, dtype), group in sorted(groups.items()):
        slowest = min(group, key=lambda r: r["fwd+bwd"]["tflops"])
        ceiling = mamf.get(dtype)
        entry = {
            "backend": slowest["backend"],
            "dtype": dtype,
            "window": slowest["window"],
            "fwd_tflops": slowest["fwd"]["tflops"],
            "bwd_tflops": slowest["bwd"]["tflops"],
            "fwd_bwd_tflops": slowest["fwd+bwd"]["tflops"],
            "efficiency": (slowest["fwd+bwd"]["tflops"] / ceiling) if ceiling else None,
            "spread": _spread([r["fwd+bwd"]["tflops"] for r in group]),
        }
        out[f"{impl} {variant} {dtype}"] = entry
    return out


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "device"


def save(document: dict[str, Any], directory: str | Path | None = None) -> Path:
    """Write ``document`` atomically as ``microbench-<device>-<host>-<UTC time>.json``.

    The host is in the name so that nodes sharing a directory never overwrite
    each other's results.  Returns the path.
    """
    folder = Path(directory) if directory is not None else default_directory()
    stamp = datetime.fromisoformat(document["created_at"]).strftime("%Y%m%dT%H%M%SZ")
    device = slug(document.get("device_name") or "device")
    host = slug(document.get("host") or "host")
    path = folder / f"microbench-{device}-{host}-{stamp}.json"
    text = json.dumps(document, indent=2, allow_nan=False, sort_keys=False) + "\n"
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise MicrobenchError(f"cannot write {path}: {exc.strerror or exc}") from None


def load(path: str | Path) -> dict[str, Any]:
    """A microbench document; raises :class:`MicrobenchError` for anything else."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise MicrobenchError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MicrobenchError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise MicrobenchError(f"{path}: not a tprimat microbench document")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise MicrobenchError(
            f"{path}: microbench schema version {data.get('schema_version')!r}; "
            f"this tprimat reads version {SCHEMA_VERSION}"
        )
    return data


def _normal(name: str | None) -> str:
    return " ".join((name or "").split()).casefold()


def _created(document: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(document["created_at"])


def latest_for_device(
    device_name: str, directory: str | Path | None = None, *, host: str | None = None
) -> dict[str, Any] | None:
    """The summary of the most recent microbench of ``device_name`` kept in ``directory``.

    A document matches when its device name (as torch reports it) or its
    platform device name (as ``nvidia-smi``/``rocm-smi`` report it) equals
    ``device_name``, ignoring case and spacing.  When nothing matches by name,
    documents whose device is the same row of the datasheet peaks table
    (:mod:`tprimat.result.peaks`) match, and ``matched_by`` says so.  Unreadable files
    and other schema versions are skipped.  With ``host``, a document measured
    on that host is preferred to a newer one from another node of the same
    device.  None when nothing matches.
    """
    folder = Path(directory) if directory is not None else default_directory()
    if not device_name or not folder.is_dir():
        return None
    wanted = _normal(device_name)
    wanted_row = find_device(device_name)
    by_name: list[tuple[datetime, Path, dict[str, Any]]] = []
    by_key: list[tuple[datetime, Path, dict[str, Any]]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            document = load(path)
            created = _created(document)
        except (MicrobenchError, KeyError, TypeError, ValueError):
            continue
        names = {_normal(document.get("device_name")), _normal(document.get("platform_device_name"))}
        if wanted in names:
            by_name.append((created, path, document))
        elif wanted_row is not None and any(
            find_device(n) == wanted_row
            for n in (document.get("device_name"), document.get("platform_device_name"))
            if n
        ):
            by_key.append((created, path, document))
    if by_name:
        chosen, matched_by = by_name, "device name"
    elif by_key and wanted_row is not None:
        chosen, matched_by = by_key, f"peaks table row {wanted_row.key}"
    else:
        return None
    if host is not None:
        local = [item for item in chosen if item[2].get("host") == host]
        chosen = local or chosen
    created, path, document = max(chosen, key=lambda item: (item[0], str(item[1])))
    summary = document.get("summary") or summarize(document)
    return {
        "path": str(path),
        "created_at": document["created_at"],
        "schema_version": document["schema_version"],
        "device_name": document.get("device_name"),
        "platform_device_name": document.get("platform_device_name"),
        "device_count": document.get("device_count"),
        "host": document.get("host"),
        "matched_by": matched_by,
        "config": document.get("config"),
        "method": document.get("method"),
        **summary,
    }
