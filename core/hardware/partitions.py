"""Devices that are a part of a GPU: AMD Instinct compute partitions and NVIDIA MIG.

An MI300X in CPX mode shows each of its eight XCDs as a device, and in every
mode the tools report the whole package's memory for each of them (NPS1: the
partitions share it).  A MIG device of an A100 or H100 has a fraction of the
GPU's SMs and its own slice of memory.  A datasheet peak is for the whole GPU,
so MFU on a partition against it would be wrong by the partition factor.  This
module says what a partition is, and :func:`tprimat.result.peaks.lookup_peak` scales
the peak by :attr:`DevicePartition.compute_fraction` or refuses MFU when the
fraction is unknown.

AMD compute partitions split the XCDs evenly: SPX 1, DPX 2, QPX 4, CPX 8
partitions per MI300-series GPU (8 XCDs), so a partition has ``1/n`` of the
peak.  The memory a tool reports per partition is the shared total; tprimat
records ``total / n`` as each partition's share.  A MIG device's share of the
peak is its SM count over the full GPU's (``nvidia-smi`` prints the SM count
in its ``MIG devices:`` box); a MIG profile name alone (``3g.20gb``) does not
give it exactly, so MFU is refused there.
"""

from __future__ import annotations

import re

import attrs


@attrs.frozen(kw_only=True)
class DevicePartition:
    """A device that is part of a GPU: an AMD compute partition (CPX, QPX, DPX) or an NVIDIA MIG device."""

    mode: str  # "CPX", "QPX", "MIG 3g.20gb"
    memory_mode: str | None = None  # AMD memory partition ("NPS1", "NPS4")
    per_gpu: int | None = None  # partitions per physical GPU (AMD)
    sm_count: int | None = None  # SMs of a MIG device
    compute_fraction: float | None = None  # share of the whole GPU's peak; None: unknown (no MFU)
    source: str = ""  # the tool output it was read from


#: Partitions per GPU of each AMD Instinct compute-partition mode (MI300 series: 8 XCDs).
AMD_COMPUTE_MODES: dict[str, int] = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}

_MIG_IN_NAME = re.compile(r"\bMIG\s+(?P<profile>\d+g\.\d+gb(?:\+\w+)?)", re.IGNORECASE)


def amd_partition(compute_mode: str | None, memory_mode: str | None = None, source: str = "") -> DevicePartition | None:
    """The partition an AMD compute-partition mode makes; None for SPX (the whole GPU) or an unknown mode."""
    if not compute_mode:
        return None
    mode = compute_mode.strip().upper()
    per_gpu = AMD_COMPUTE_MODES.get(mode)
    if per_gpu is None:
        return DevicePartition(mode=mode, memory_mode=memory_mode, source=source)
    if per_gpu == 1:
        return None
    return DevicePartition(
        mode=mode,
        memory_mode=memory_mode,
        per_gpu=per_gpu,
        compute_fraction=1.0 / per_gpu,
        source=source,
    )


def mig_partition(
    profile: str | None, sm_count: int | None = None, gpu_sm_count: int | None = None, source: str = ""
) -> DevicePartition:
    """A MIG device: its share of the GPU is its SMs over the GPU's, when both are known."""
    fraction = sm_count / gpu_sm_count if sm_count and gpu_sm_count else None
    mode = f"MIG {profile}" if profile else "MIG"
    return DevicePartition(mode=mode, sm_count=sm_count, compute_fraction=fraction, source=source)


def mig_profile_in_name(device_name: str | None) -> str | None:
    """The MIG profile a device name carries (CUDA names MIG devices ``NVIDIA A100-SXM4-40GB MIG 3g.20gb``)."""
    if not device_name:
        return None
    match = _MIG_IN_NAME.search(device_name)
    return match["profile"] if match else None


def partition_memory_gib(total_gib: float | None, partition: DevicePartition | None) -> float | None:
    """Each partition's share of memory a tool reports for the whole GPU (AMD compute partitions)."""
    if total_gib is None or partition is None or not partition.per_gpu:
        return total_gib
    return total_gib / partition.per_gpu


def describe(partition: DevicePartition) -> str:
    """One line for notes: ``CPX (8 per GPU, NPS1)`` or ``MIG 3g.20gb (42 SMs)``."""
    details = []
    if partition.per_gpu:
        details.append(f"{partition.per_gpu} per GPU")
    if partition.sm_count:
        details.append(f"{partition.sm_count} SMs")
    if partition.memory_mode:
        details.append(partition.memory_mode)
    return partition.mode + (f" ({', '.join(details)})" if details else "")
