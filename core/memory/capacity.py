"""Versioned table of per-GPU memory capacity in GiB, the denominator of "does it fit".

A device name is matched exactly (see :func:`normalize_device_name`) against each row's key and
the names vendor tools print for it: "H1000" is no H100 and "GB200" no B200.  An unknown name
has no capacity, and :func:`suggest_devices` offers the closest known ones.  The keys are those
of the peaks table (:mod:`tprimat.result.peaks`); a test keeps the two tables agreeing.

Figures are what the runtime reports as the device's total memory
(``cudaDeviceProp.totalGlobalMem`` / ``hipDeviceProp_t.totalGlobalMem``, or the
total in an out-of-memory message), converted to GiB (2**30 bytes), wherever a
real report was available; such a figure is a little below the HBM size the
datasheet names.  Devices known only from a datasheet use its "GB" as 10**9
bytes, which is lower still, so a "fits" answer from them errs on the safe side.
Bump :data:`CAPACITY_VERSION` whenever a figure changes.
"""

from __future__ import annotations

import difflib
import re

import attrs

CAPACITY_VERSION = "2026.11.28"

GIB = 2**30


@attrs.frozen(kw_only=True)
class DeviceCapacity:
    """Total memory of one device model."""

    key: str  # the same short names as the peaks table, e.g. "H100-SXM"
    #: Its names as nvidia-smi, rocm-smi and the runtimes print them, and short forms (the key is one too).
    names: tuple[str, ...]
    capacity_gib: float
    source: str
    #: The figure is the runtime's own (``totalGlobalMem``, an out-of-memory message, ``mem_get_info``),
    #: not a datasheet's: no more can be allocated, whatever nvidia-smi or rocm-smi report as total.
    runtime: bool = False


def _gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 2)


def _datasheet_gb(gb: float) -> float:
    return round(gb * 1e9 / GIB, 2)


#: Each device has one row; a name matches at most one (a test checks it).
DEVICE_CAPACITIES: tuple[DeviceCapacity, ...] = (
    DeviceCapacity(
        key="H100-NVL",
        names=("NVIDIA H100 NVL",),
        capacity_gib=_datasheet_gb(94),
        source="NVIDIA H100 datasheet, NVL column: 94 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="H100-PCIe",
        names=("NVIDIA H100 PCIe",),
        capacity_gib=_datasheet_gb(80),
        source="NVIDIA H100 datasheet, PCIe column: 80 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="GH200",
        # The 96 GB HBM3 part, which nvidia-smi names by its LPDDR5X size (480 GB or 120 GB); the
        # 144 GB HBM3e part ("NVIDIA GH200 144G HBM3e") is another device and not in the table.
        names=("GH200", "NVIDIA GH200 480GB", "NVIDIA GH200 120GB"),
        capacity_gib=95.0,
        source="CUDA out-of-memory message of a GH200 run: 'a total capacity of 95.00 GiB' "
        "(Megatron-LM log, 2026-03-26); the 96 GB HBM3 GH200",
        runtime=True,
    ),
    DeviceCapacity(
        key="H100-SXM",
        names=("H100", "H100 SXM5", "NVIDIA H100 80GB HBM3"),
        capacity_gib=_gib(85_018_279_936),
        source="totalGlobalMem 85018279936 B of 'NVIDIA H100 80GB HBM3' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2025-10-09)",
        runtime=True,
    ),
    DeviceCapacity(
        key="H200-NVL",
        names=("NVIDIA H200 NVL",),
        capacity_gib=_datasheet_gb(141),
        source="NVIDIA H200 datasheet: 141 GB (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="H200-SXM",
        names=("H200", "NVIDIA H200"),
        capacity_gib=_gib(150_109_880_320),
        source="totalGlobalMem 150109880320 B of 'NVIDIA H200' (torch.cuda.get_device_properties, "
        "driver 580.159.04; the CUDA out-of-memory message of the same run: 'a total capacity of 139.80 GiB'), "
        "measured by bench/gpu_node.sh on 2026-11-27",
        runtime=True,
    ),
    DeviceCapacity(
        key="B200",
        names=("NVIDIA B200",),
        capacity_gib=_gib(191_503_138_816),
        source="totalGlobalMem 191503138816 B of 'NVIDIA B200' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2026-05-18)",
        runtime=True,
    ),
    DeviceCapacity(
        key="A100",
        # The 40GB model's names ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB") are not the 80GB's.
        names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "A100 80GB"),
        capacity_gib=_datasheet_gb(80),
        source="NVIDIA A100 datasheet, 80GB model (taken as 10^9 bytes); the 40GB model is smaller",
    ),
    DeviceCapacity(
        key="MI355X",
        names=("AMD Instinct MI355X",),
        capacity_gib=_datasheet_gb(288),
        source="AMD Instinct MI355X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="MI350X",
        names=("AMD Instinct MI350X",),
        capacity_gib=_datasheet_gb(288),
        source="AMD Instinct MI350X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
    ),
    DeviceCapacity(
        key="MI325X",
        names=("AMD Instinct MI325X",),
        capacity_gib=255.98,
        source="Primus training log on MI325X: 'hip mem usage/free/total' total 255.98GB "
        "(torch.cuda.mem_get_info over 2^30; AMD-AGI/Primus-SaFE test data, 2025-12-02)",
        runtime=True,
    ),
    DeviceCapacity(
        key="MI300X",
        # "VF": the SR-IOV virtual function of a whole MI300X, as cloud VMs name it.
        names=("AMD Instinct MI300X", "AMD Instinct MI300X VF"),
        capacity_gib=_gib(206_141_652_992),
        source="totalGlobalMem 206141652992 B of 'AMD Instinct MI300X' in a PyTorch profiler trace "
        "(AMD-AGI/TraceLens test data, 2026-02-25); rocm-smi reports the same VRAM total",
        runtime=True,
    ),
    DeviceCapacity(
        key="MI250X",
        # One GCD is one device; ROCm names the GCDs of an MI250X and of an MI250 alike.
        names=("AMD Instinct MI250X", "AMD Instinct MI250X/MI250"),
        capacity_gib=_datasheet_gb(64),
        source="AMD Instinct MI250X datasheet: 128 GB per OAM, 64 GB per GCD (taken as 10^9 bytes)",
    ),
)

#: Vendor words a device name may start with; what follows is matched exactly.
_VENDOR_PREFIXES = ("nvidia ", "amd instinct ", "amd ")
#: CUDA names a MIG device after its GPU: ``NVIDIA H100 80GB HBM3 MIG 1g.10gb``.
_MIG_SUFFIX = re.compile(r" mig \S+$")


def normalize_device_name(name: str) -> str:
    """``name`` as the table compares it: lower case, spaces, '-' and '_' alike, no vendor word, no MIG suffix."""
    text = re.sub(r"[\s_-]+", " ", name).strip().lower()
    text = _MIG_SUFFIX.sub("", text)
    for prefix in _VENDOR_PREFIXES:
        if text.startswith(prefix):
            return text.removeprefix(prefix)
    return text


def _index() -> dict[str, DeviceCapacity]:
    index: dict[str, DeviceCapacity] = {}
    for row in DEVICE_CAPACITIES:
        for name in (row.key, *row.names):
            index[normalize_device_name(name)] = row
    return index


_BY_NAME = _index()


def find_capacity(device_name: str | None) -> DeviceCapacity | None:
    """The row ``device_name`` names exactly (by its key or a name vendor tools print), if any.

    A MIG device's name finds its whole GPU's row; callers that need the device's own memory
    check for the MIG profile (:func:`tprimat.hardware.partitions.mig_profile_in_name`).
    """
    if not device_name:
        return None
    return _BY_NAME.get(normalize_device_name(device_name))


def suggest_devices(device_name: str, limit: int = 3) -> list[str]:
    """The table's keys whose names are closest to an unknown ``device_name`` (difflib), best first."""
    close = difflib.get_close_matches(normalize_device_name(device_name), list(_BY_NAME), n=len(_BY_NAME), cutoff=0.75)
    keys: list[str] = []
    for name in close:
        key = _BY_NAME[name].key
        if key not in keys:
            keys.append(key)
    return keys[:limit]


def unknown_device_message(device_name: str) -> str:
    """One line for a device the table does not know: the closest known names, and the way out."""
    close = suggest_devices(device_name)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"no memory capacity known for device {device_name!r} (table {CAPACITY_VERSION}; names are matched "
        f"exactly): {hint}known: {', '.join(known_devices())}; give the capacity with capacity_gib / --capacity-gib"
    )


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
