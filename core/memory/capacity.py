"""Versioned table of per-GPU memory capacity in GiB, the denominator of "does it fit".

Figures are what the runtime reports as the device's total memory
(``cudaDeviceProp.totalGlobalMem`` / ``hipDeviceProp_t.totalGlobalMem``, or the
total in an out-of-memory message), converted to GiB (2**30 bytes), wherever a
real report was available; such a figure is a little below the HBM size the
datasheet names.  Devices known only from a datasheet use its "GB" as 10**9
bytes, which is lower still, so a "fits" answer from them errs on the safe side.
Bump :data:`CAPACITY_VERSION` whenever a figure changes.
"""

from __future__ import annotations

import re

import attrs

CAPACITY_VERSION = "2026.11.27"

GIB = 2**30


@attrs.frozen(kw_only=True)
class DeviceCapacity:
    """Total memory of one device model."""

    key: str  # the same short names as the peaks table, e.g. "H100-SXM"
    pattern: str  # regex matched (case-insensitively) against the device name
    capacity_gib: float
    source: str
    #: The figure is the runtime's own (``totalGlobalMem``, an out-of-memory message, ``mem_get_info``),
    #: not a datasheet's: no more can be allocated, whatever nvidia-smi or rocm-smi report as total.
    runtime: bool = False


def _gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 2)


def _datasheet_gb(gb: float) -> float:
    return round(gb * 1e9 / GIB, 2)


# Order matters: the first matching pattern wins, so specific names come first.
DEVICE_CAPACITIES: tuple[DeviceCapacity, ...] = (
    DeviceCapacity(
        key="H100-NVL",
        pattern=r"H100 NVL",
        capacity_gib=_datasheet_gb(94),
        source="NVIDIA H100 datasheet, NVL column: 94 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="H100-PCIe",
        pattern=r"H100[ -]PCIe",
        capacity_gib=_datasheet_gb(80),
        source="NVIDIA H100 datasheet, PCIe column: 80 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="GH200",
        pattern=r"GH200",
        capacity_gib=95.0,
        source="CUDA out-of-memory message of a GH200 run: 'a total capacity of 95.00 GiB' "
        "(Megatron-LM log, 2026-03-26)",
        runtime=True,
    ),
    DeviceCapacity(
        key="H100-SXM",
        pattern=r"H100",
        capacity_gib=_gib(85_018_279_936),
        source="totalGlobalMem 85018279936 B of 'NVIDIA H100 80GB HBM3' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2025-10-09)",
        runtime=True,
    ),
    DeviceCapacity(
        key="H200-NVL",
        pattern=r"H200 NVL",
        capacity_gib=_datasheet_gb(141),
        source="NVIDIA H200 datasheet: 141 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="H200-SXM",
        pattern=r"H200",
        capacity_gib=_gib(150_109_880_320),
        source="totalGlobalMem 150109880320 B of 'NVIDIA H200' (torch.cuda.get_device_properties, "
        "driver 580.159.04; the CUDA out-of-memory message of the same run: 'a total capacity of 139.80 GiB'), "
        "measured by bench/gpu_node.sh on 2026-11-27",
        runtime=True,
    ),
    DeviceCapacity(
        key="B200",
        pattern=r"B200",
        capacity_gib=_gib(191_503_138_816),
        source="totalGlobalMem 191503138816 B of 'NVIDIA B200' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2026-05-18)",
        runtime=True,
    ),
    DeviceCapacity(
        key="A100",
        pattern=r"A100",
        capacity_gib=_datasheet_gb(80),
        source="NVIDIA A100 datasheet, 80GB model (taken as 10^9 bytes); the 40GB model is smaller",
    ),
    DeviceCapacity(
        key="MI355X",
        pattern=r"MI355X",
        capacity_gib=_datasheet_gb(288),
        source="AMD Instinct MI355X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="MI350X",
        pattern=r"MI350X",
        capacity_gib=_datasheet_gb(288),
        source="AMD Instinct MI350X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="MI325X",
        pattern=r"MI325X",
        capacity_gib=255.98,
        source="Primus training log on MI325X: 'hip mem usage/free/total' total 255.98GB "
        "(torch.cuda.mem_get_info over 2^30; AMD-AGI/Primus-SaFE test data, 2025-12-02)",
        runtime=True,
    ),
    DeviceCapacity(
        key="MI300X",
        pattern=r"MI300X",
        capacity_gib=_gib(206_141_652_992),
        source="totalGlobalMem 206141652992 B of 'AMD Instinct MI300X' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2026-02-25); rocm-smi reports the same VRAM total",
        runtime=True,
    ),
    DeviceCapacity(
        key="MI250X",
        pattern=r"MI250X",
        capacity_gib=_datasheet_gb(64),
        source="AMD Instinct MI250X datasheet: 128 GB per OAM, 64 GB per GCD (taken as 10^9 bytes)",
    ),
)


def find_capacity(device_name: str | None) -> DeviceCapacity | None:
    """The table row whose pattern matches ``device_name``, if any."""
    if not device_name:
        return None
    for row in DEVICE_CAPACITIES:
        if re.search(row.pattern, device_name, flags=re.IGNORECASE):
            return row
    return None


def usable_capacity(device_name: str | None, measured_gib: float | None) -> float | None:
    """The memory a run on ``device_name`` can allocate, given the total platform detection measured.

    The smaller of the measured total and the table's runtime figure for the device: the
    management tools' total includes memory the driver keeps (nvidia-smi's 143771 MiB on an
    H200 against CUDA's 143156 MiB).  A datasheet figure never lowers a measured one, and a
    smaller measured total (a MIG device's own) is kept.
    """
    row = find_capacity(device_name)
    if measured_gib is None or row is None or not row.runtime:
        return measured_gib
    return min(measured_gib, row.capacity_gib)


def known_devices() -> list[str]:
    """The device keys of the table, for error messages and help."""
    return [row.key for row in DEVICE_CAPACITIES]
