"""Dense peak TFLOP/s per device and dtype (the MFU denominator) and peak memory bandwidth, looked up.

The figures, their sources and their versions (:data:`PEAKS_VERSION`, recorded in every result
that used a peak; :data:`BANDWIDTH_VERSION`, for the memory roof of the per-operator roofline in
:mod:`tprimat.trace.roofline`, which MFU never reads) live in the one device table
(:mod:`tprimat.hardware.devices`), which also matches a name to a device, exactly.  A device or
dtype not in the table has no peak: MFU is then reported as null with a note, never guessed.
A name that does not say a device's memory configuration (``GH200``: 96 GB HBM3 or 144 GB HBM3e)
has a peak (the configurations share the chip) but no bandwidth.
"""

from __future__ import annotations

import attrs

from tprimat.hardware.devices import BANDWIDTH_VERSION, PEAKS_VERSION, find_device, identify_device
from tprimat.hardware.partitions import describe, mig_partition, mig_profile_in_name
from tprimat.result.schema import DevicePartition

__all__ = ["BANDWIDTH_VERSION", "PEAKS_VERSION", "BandwidthLookup", "PeakLookup", "lookup_bandwidth", "lookup_peak"]


@attrs.frozen(kw_only=True)
class PeakLookup:
    """The outcome of looking a device up: a peak, or why there is none."""

    tflops: float | None
    device_key: str | None
    dtype: str
    source: str | None
    table_version: str = PEAKS_VERSION
    note: str | None = None


#: How precision names in configs map to the table's dtype columns.
_DTYPE_ALIASES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "fp8": "fp8",
    "fp8-hybrid": "fp8",
    "fp8_hybrid": "fp8",
    "tf32": "tf32",
}


def lookup_peak(device_name: str | None, dtype: str, partition: DevicePartition | None = None) -> PeakLookup:
    """Dense peak TFLOP/s of ``device_name`` for ``dtype``, or a note saying why not.

    On a partition of a GPU (``partition``, or a MIG profile in the device
    name) the whole GPU's peak is scaled by the partition's share of it, or
    refused when that share is unknown: MFU never uses a whole GPU's peak for
    a part of one.
    """
    whole = _lookup_whole(device_name, dtype)
    if partition is None:
        profile = mig_profile_in_name(device_name)
        if profile is None:
            return whole
        partition = mig_partition(profile, source="device name")
    if partition.compute_fraction is None and partition.sm_count and whole.device_key:
        row = find_device(device_name)
        if row is not None and row.sm_count:
            profile = partition.mode.removeprefix("MIG").strip() or None
            partition = mig_partition(profile, partition.sm_count, row.sm_count, partition.source)
    if whole.tflops is None:
        return whole
    if partition.compute_fraction is None:
        note = (
            f"device is a partition of one {whole.device_key} ({describe(partition)}): its share of the GPU's "
            "peak is unknown, so no MFU (the datasheet peak is for the whole GPU)"
        )
        return attrs.evolve(whole, tflops=None, source=None, note=note)
    return attrs.evolve(
        whole,
        tflops=whole.tflops * partition.compute_fraction,
        device_key=f"{whole.device_key} {partition.mode}",
        source=f"{whole.source}, scaled by {partition.compute_fraction:.4g} for {describe(partition)}",
    )


def _lookup_whole(device_name: str | None, dtype: str) -> PeakLookup:
    column = _DTYPE_ALIASES.get(dtype.lower())
    row = find_device(device_name)
    if device_name is None:
        note = "device unknown (no hardware manifest): no MFU"
    elif row is None:
        note = f"no datasheet peak for device {device_name!r} in table {PEAKS_VERSION}: no MFU"
    elif column is None or column not in row.tflops:
        note = f"no {dtype} peak for {row.key} in table {PEAKS_VERSION}: no MFU"
    else:
        return PeakLookup(tflops=row.tflops[column], device_key=row.key, dtype=column, source=row.peaks_source)
    return PeakLookup(
        tflops=None,
        device_key=row.key if row else None,
        dtype=column or dtype,
        source=None,
        note=note,
    )


@attrs.frozen(kw_only=True)
class BandwidthLookup:
    """The outcome of looking up a device's peak memory bandwidth: TB/s, or why there is none."""

    tbs: float | None
    device_key: str | None
    source: str | None
    table_version: str = BANDWIDTH_VERSION
    note: str | None = None


def lookup_bandwidth(device_name: str | None) -> BandwidthLookup:
    """Datasheet peak memory bandwidth of ``device_name`` (TB/s), or a note saying why there is none.

    A partition of a GPU (a MIG profile in the name) has none: its share of the
    memory system is not the share of its compute.
    """
    match = identify_device(device_name)
    key = match.device.key if match else None
    if device_name is None:
        note = "device unknown: no memory bandwidth"
    elif match is None:
        note = f"no datasheet bandwidth for device {device_name!r} in table {BANDWIDTH_VERSION}"
    elif mig_profile_in_name(device_name) is not None:
        note = f"device {device_name!r} is a partition of one {key}: its share of the memory bandwidth is unknown"
    elif match.memory is None:
        note = f"no datasheet bandwidth for {device_name!r} in table {BANDWIDTH_VERSION}: {match.memory_unknown_note}"
    elif match.memory.bandwidth_tbs is None:
        note = (
            f"no datasheet bandwidth for {match.memory.key} in table {BANDWIDTH_VERSION} "
            f"({match.memory.bandwidth_note})"
        )
    else:
        return BandwidthLookup(tbs=match.memory.bandwidth_tbs, device_key=key, source=match.memory.bandwidth_source)
    return BandwidthLookup(tbs=None, device_key=key, source=None, note=note)
