"""Versioned table of dense peak TFLOP/s per device and dtype, the MFU denominator.

All figures are *dense* (no 2:4 structured sparsity) tensor-core peaks at the
boost clock, per GPU, as the vendors' datasheets state them.  Datasheets that
quote sparse figures are halved here and say so.  A device or dtype not in
the table has no peak: MFU is then reported as null with a note, never
guessed.  Bump :data:`PEAKS_VERSION` whenever a figure changes, because it is
recorded in every result that used it.

Each row also carries the device's peak memory (HBM) bandwidth from the same
datasheets, the memory roof of the per-operator roofline
(:mod:`tprimat.trace.roofline`), with its own :data:`BANDWIDTH_VERSION` (bump it
when a bandwidth changes; MFU never reads it).  A row whose name covers parts of
different bandwidths has none.
"""

from __future__ import annotations

import re

import attrs

from tprimat.hardware.partitions import describe, mig_partition, mig_profile_in_name
from tprimat.result.schema import DevicePartition

PEAKS_VERSION = "2026.11"
BANDWIDTH_VERSION = "2026.11.28"


@attrs.frozen(kw_only=True)
class DevicePeak:
    """Datasheet dense peaks of one device model."""

    key: str  # stable short name, e.g. "H100-SXM"
    pattern: str  # regex matched (case-insensitively, as a whole word) against the device name
    tflops: dict[str, float]  # dtype -> dense peak TFLOP/s
    source: str
    sm_count: int | None = None  # NVIDIA: SMs of the whole GPU, to scale the peak to a MIG device
    memory_tbs: float | None = None  # datasheet peak memory bandwidth, TB/s (10^12 bytes/s)
    memory_source: str | None = None
    #: AMD: compute units of the whole GPU (a trace's ``numSms``), to tell a compute partition (CPX …)
    #: that bears the whole GPU's name; NVIDIA rows have ``sm_count``
    compute_units: int | None = None


# Order matters: the first matching pattern wins, so specific names come first.  A pattern matches
# whole words only (see find_device): "GB200" is no B200 and "H1000" no H100.  The keys are those of
# the capacity table (tprimat.memory.capacity); a test keeps the two tables agreeing.
DEVICE_PEAKS: tuple[DevicePeak, ...] = (
    # NVIDIA H100 datasheet (2023): PCIe BF16 1,513 / FP8 3,026 TFLOPS with sparsity.
    DevicePeak(
        key="H100-PCIe",
        pattern=r"H100[ -]PCIe",
        tflops={"bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "tf32": 378.0},
        source="NVIDIA H100 datasheet, PCIe column, sparse figures halved",
        sm_count=114,
        memory_tbs=2.0,
        memory_source="NVIDIA H100 datasheet, PCIe column: GPU memory bandwidth 2TB/s",
    ),
    # NVIDIA H100 datasheet: NVL BF16 1,671 / FP8 3,341 TFLOPS with sparsity.
    DevicePeak(
        key="H100-NVL",
        pattern=r"H100[ -]NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5},
        source="NVIDIA H100 datasheet, NVL column, sparse figures halved",
        sm_count=132,
        memory_tbs=3.9,
        memory_source="NVIDIA H100 datasheet, NVL column: GPU memory bandwidth 3.9TB/s",
    ),
    # NVIDIA GH200 Grace Hopper Superchip datasheet: its Hopper GPU has the H100 SXM's tensor peaks
    # (BF16 1,979 / FP8 3,958 TFLOPS with sparsity).  Its own row, as in the capacity table: its memory differs.
    DevicePeak(
        key="GH200",
        pattern=r"GH200",
        tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7},
        source="NVIDIA GH200 Grace Hopper Superchip datasheet, sparse figures halved",
        sm_count=132,
        # no bandwidth: the 96 GB HBM3 part (4 TB/s) and the 144 GB HBM3e part (4.9 TB/s) share the name
    ),
    # NVIDIA H100 datasheet: SXM BF16 1,979 / FP8 3,958 TFLOPS with sparsity.
    # nvidia-smi names the SXM part "NVIDIA H100 80GB HBM3".
    DevicePeak(
        key="H100-SXM",
        pattern=r"H100",
        tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7},
        source="NVIDIA H100 datasheet, SXM column, sparse figures halved",
        sm_count=132,
        memory_tbs=3.35,
        memory_source="NVIDIA H100 datasheet, SXM column: GPU memory bandwidth 3.35TB/s",
    ),
    # NVIDIA H200 datasheet: NVL BF16 1,671 / FP8 3,341 TFLOPS with sparsity.
    DevicePeak(
        key="H200-NVL",
        pattern=r"H200[ -]NVL",
        tflops={"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5},
        source="NVIDIA H200 datasheet, NVL column, sparse figures halved",
        sm_count=132,
        memory_tbs=4.8,
        memory_source="NVIDIA H200 datasheet, NVL column: GPU memory bandwidth 4.8TB/s",
    ),
    # NVIDIA H200 datasheet: SXM BF16 1,979 / FP8 3,958 TFLOPS with sparsity (same chip as H100 SXM).
    DevicePeak(
        key="H200-SXM",
        pattern=r"H200",
        tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7},
        source="NVIDIA H200 datasheet, SXM column, sparse figures halved",
        sm_count=132,
        memory_tbs=4.8,
        memory_source="NVIDIA H200 datasheet, SXM column: GPU memory bandwidth 4.8TB/s",
    ),
    # NVIDIA HGX B200 datasheet: BF16 4.5 PFLOPS / FP8 9 PFLOPS per GPU with sparsity.
    DevicePeak(
        key="B200",
        pattern=r"B200",
        tflops={"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "tf32": 1100.0},
        source="NVIDIA HGX B200 datasheet, per-GPU sparse figures halved",
        memory_tbs=8.0,
        memory_source="NVIDIA HGX B200 datasheet: 64TB/s aggregate for 8 GPUs, 8TB/s per GPU",
    ),
    # NVIDIA A100 datasheet: BF16 312 TFLOPS dense (624 sparse); no FP8 tensor cores.
    DevicePeak(
        key="A100",
        pattern=r"A100",
        tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0},
        source="NVIDIA A100 datasheet, dense figures",
        sm_count=108,
        # no bandwidth: 1,555 GB/s (40GB), 1,935 GB/s (80GB PCIe) and 2,039 GB/s (80GB SXM) share the name
    ),
    # AMD Instinct MI355X datasheet: FP16/BF16 2.5 PFLOPS, FP8 5.0 PFLOPS dense.
    DevicePeak(
        key="MI355X",
        pattern=r"MI355X",
        tflops={"bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2},
        source="AMD Instinct MI355X datasheet, dense figures",
        memory_tbs=8.0,
        memory_source="AMD Instinct MI355X datasheet: peak theoretical memory bandwidth 8 TB/s",
        compute_units=256,  # datasheet: 256 GPU compute units
    ),
    # AMD Instinct MI350X datasheet: FP16/BF16 2.3 PFLOPS, FP8 4.6 PFLOPS dense.
    DevicePeak(
        key="MI350X",
        pattern=r"MI350X",
        tflops={"bf16": 2306.9, "fp16": 2306.9, "fp8": 4613.7},
        source="AMD Instinct MI350X datasheet, dense figures",
        memory_tbs=8.0,
        memory_source="AMD Instinct MI350X datasheet: peak theoretical memory bandwidth 8 TB/s",
        compute_units=256,  # datasheet: 256 GPU compute units
    ),
    # AMD Instinct MI325X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense (same CDNA3 compute as MI300X).
    DevicePeak(
        key="MI325X",
        pattern=r"MI325X",
        tflops={"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7},
        source="AMD Instinct MI325X datasheet, dense figures",
        memory_tbs=6.0,
        memory_source="AMD Instinct MI325X datasheet: peak theoretical memory bandwidth 6 TB/s",
        compute_units=304,  # datasheet: 304 GPU compute units
    ),
    # AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense.
    DevicePeak(
        key="MI300X",
        pattern=r"MI300X",
        tflops={"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7},
        source="AMD Instinct MI300X datasheet, dense figures",
        memory_tbs=5.3,
        memory_source="AMD Instinct MI300X datasheet: peak theoretical memory bandwidth 5.3 TB/s",
        compute_units=304,  # datasheet: 304 GPU compute units
    ),
    # AMD Instinct MI250X datasheet: BF16/FP16 383 TFLOPS dense; no FP8.
    DevicePeak(
        key="MI250X",
        pattern=r"MI250X",
        tflops={"bf16": 383.0, "fp16": 383.0},
        source="AMD Instinct MI250X datasheet, dense figures",
        memory_tbs=3.2768,
        memory_source="AMD Instinct MI250X datasheet: peak theoretical memory bandwidth 3.2768 TB/s",
    ),
)


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


def find_device(device_name: str | None) -> DevicePeak | None:
    """The table row whose pattern matches ``device_name``, if any."""
    if not device_name:
        return None
    for row in DEVICE_PEAKS:
        if re.search(rf"\b(?:{row.pattern})\b", device_name, flags=re.IGNORECASE):
            return row
    return None


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
        return PeakLookup(tflops=row.tflops[column], device_key=row.key, dtype=column, source=row.source)
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
    row = find_device(device_name)
    if device_name is None:
        note = "device unknown: no memory bandwidth"
    elif row is None:
        note = f"no datasheet bandwidth for device {device_name!r} in table {BANDWIDTH_VERSION}"
    elif mig_profile_in_name(device_name) is not None:
        note = f"device {device_name!r} is a partition of one {row.key}: its share of the memory bandwidth is unknown"
    elif row.memory_tbs is None:
        note = f"no single datasheet bandwidth for {row.key} in table {BANDWIDTH_VERSION} (variants differ)"
    else:
        return BandwidthLookup(tbs=row.memory_tbs, device_key=row.key, source=row.memory_source)
    return BandwidthLookup(tbs=None, device_key=row.key if row else None, source=None, note=note)
