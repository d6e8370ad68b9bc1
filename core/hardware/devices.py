"""The one table of accelerator devices tprimat knows, and the one way a device name is matched to it.

Each :class:`Device` is a GPU model: its canonical key, vendor, the names the vendor tools
(nvidia-smi, rocm-smi, the CUDA/HIP runtimes, a profiler trace) print for it, its dense
per-dtype tensor peaks (the MFU denominator, :mod:`tprimat.result.peaks`) and its compute
units.  Its :class:`DeviceMemory` rows are the memory configurations it ships in: the memory
capacity (the denominator of "does it fit", :mod:`tprimat.memory.capacity`) and the peak memory
bandwidth (the memory roof of :mod:`tprimat.trace.roofline`).  A name that says the model but
not its memory (``GH200``: the 96 GB HBM3 and the 144 GB HBM3e part) identifies the model and
no memory row, so a peak is known and the capacity and bandwidth are not: never guessed.

Names are matched exactly (:func:`normalize_device_name` makes case, spacing, ``-``/``_``,
the vendor word and a MIG suffix not matter): "H1000" is no H100 and "GB200" no B200; an
unknown name is refused, with the closest known names (:func:`suggest_devices`).

Every figure names its source.  Three versions, recorded in the results that use them, say
which figures were used: bump :data:`PEAKS_VERSION` when a peak changes, :data:`CAPACITY_VERSION`
when a capacity changes and :data:`BANDWIDTH_VERSION` when a bandwidth changes.

Peaks are *dense* (no 2:4 structured sparsity) tensor-core peaks at the boost clock, per GPU,
as the datasheets state them; datasheets that quote sparse figures are halved and say so.
Capacities are what the runtime reports as the device's total memory (``totalGlobalMem``, or the
total in an out-of-memory message), in GiB (2**30 bytes), wherever a real report was available
(a little below the datasheet's HBM size); devices known only from a datasheet use its "GB" as
10**9 bytes, lower still, so a "fits" answer from them errs on the safe side.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

import attrs

PEAKS_VERSION = "2026.11"
CAPACITY_VERSION = "2026.11.28.1"
BANDWIDTH_VERSION = "2026.11.28.1"

GIB = 2**30


def _gib(n_bytes: int) -> float:
    return round(n_bytes / GIB, 2)


def _datasheet_gb(gb: float) -> float:
    return round(gb * 1e9 / GIB, 2)


@attrs.frozen(kw_only=True)
class DeviceMemory:
    """One memory configuration of a device model: its capacity and peak bandwidth, each with a source."""

    key: str  # e.g. "GH200-96GB"; the device's own key where it ships in one configuration
    #: Names that say this configuration (the device's own names do too where it has only one).
    names: tuple[str, ...] = ()
    capacity_gib: float | None = None
    capacity_source: str | None = None
    #: The capacity is the runtime's own (``totalGlobalMem``, an out-of-memory message, ``mem_get_info``),
    #: not a datasheet's: no more can be allocated, whatever nvidia-smi or rocm-smi report as total.
    capacity_runtime: bool = False
    bandwidth_tbs: float | None = None  # datasheet peak memory bandwidth, TB/s (10^12 bytes/s)
    bandwidth_source: str | None = None
    #: Why there is no bandwidth (e.g. forms of different bandwidth share the name).
    bandwidth_note: str | None = None


@attrs.frozen(kw_only=True)
class Device:
    """One GPU model: names, vendor, dense peaks, compute units, and its memory configurations."""

    key: str  # canonical short name, e.g. "H100-SXM"
    vendor: Literal["amd", "nvidia"]
    #: Its names as the vendor tools print them, and short forms (the key is one too).
    names: tuple[str, ...]
    tflops: dict[str, float]  # dtype -> dense peak TFLOP/s
    peaks_source: str
    sm_count: int | None = None  # NVIDIA: SMs of the whole GPU, to scale the peak to a MIG device
    #: AMD: compute units of the whole GPU (a trace's ``numSms``), to tell a compute partition (CPX …)
    #: that bears the whole GPU's name
    compute_units: int | None = None
    memories: tuple[DeviceMemory, ...] = ()


@attrs.frozen(kw_only=True)
class DeviceMatch:
    """What a reported name identifies: the device model, and its memory configuration if the name says it."""

    device: Device
    memory: DeviceMemory | None
    mig: bool  # the name is a MIG device's, a part of the GPU

    @property
    def memory_unknown_note(self) -> str | None:
        """Why the name gives no memory configuration (None when it gives one)."""
        if self.memory is not None:
            return None
        variants = " or ".join(m.key for m in self.device.memories)
        return f"the name does not say which {self.device.key} it is ({variants}; they differ in memory)"


# NVIDIA datasheets, tensor-core peaks with sparsity, halved to dense.
_HOPPER_SXM = {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7}  # BF16 1,979 / FP8 3,958 sparse
_HOPPER_NVL = {"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5}  # BF16 1,671 / FP8 3,341 sparse
_CDNA3 = {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7}  # MI300X/MI325X datasheets, dense

DEVICES: tuple[Device, ...] = (
    Device(
        key="H100-SXM",
        vendor="nvidia",
        # nvidia-smi names the SXM part "NVIDIA H100 80GB HBM3"; the short "H100" means it here.
        names=("H100", "H100 SXM5", "NVIDIA H100 80GB HBM3"),
        tflops=_HOPPER_SXM,
        peaks_source="NVIDIA H100 datasheet, SXM column, sparse figures halved",
        sm_count=132,
        memories=(
            DeviceMemory(
                key="H100-SXM",
                capacity_gib=_gib(85_018_279_936),
                capacity_source="totalGlobalMem 85018279936 B of 'NVIDIA H100 80GB HBM3' in a PyTorch profiler "
                "trace (AMD-AGI/TraceLens test data, 2025-10-09)",
                capacity_runtime=True,
                bandwidth_tbs=3.35,
                bandwidth_source="NVIDIA H100 datasheet, SXM column: GPU memory bandwidth 3.35TB/s",
            ),
        ),
    ),
    Device(
        key="H100-PCIe",
        vendor="nvidia",
        names=("NVIDIA H100 PCIe",),
        tflops={"bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "tf32": 378.0},  # BF16 1,513 / FP8 3,026 sparse
        peaks_source="NVIDIA H100 datasheet, PCIe column, sparse figures halved",
        sm_count=114,
        memories=(
            DeviceMemory(
                key="H100-PCIe",
                capacity_gib=_datasheet_gb(80),
                capacity_source="NVIDIA H100 datasheet, PCIe column: 80 GB (taken as 10^9 bytes)",
                bandwidth_tbs=2.0,
                bandwidth_source="NVIDIA H100 datasheet, PCIe column: GPU memory bandwidth 2TB/s",
            ),
        ),
    ),
    Device(
        key="H100-NVL",
        vendor="nvidia",
        names=("NVIDIA H100 NVL",),
        tflops=_HOPPER_NVL,
        peaks_source="NVIDIA H100 datasheet, NVL column, sparse figures halved",
        sm_count=132,
        memories=(
            DeviceMemory(
                key="H100-NVL",
                capacity_gib=_datasheet_gb(94),
                capacity_source="NVIDIA H100 datasheet, NVL column: 94 GB (taken as 10^9 bytes)",
                bandwidth_tbs=3.9,
                bandwidth_source="NVIDIA H100 datasheet, NVL column: GPU memory bandwidth 3.9TB/s",
            ),
        ),
    ),
    Device(
        key="GH200",
        vendor="nvidia",
        # The Hopper GPU of the superchip has the H100 SXM's tensor peaks.  It ships with 96 GB HBM3 or
        # 144 GB HBM3e: "GH200" alone does not say which, nvidia-smi's names do (below).
        names=("GH200",),
        tflops=_HOPPER_SXM,
        peaks_source="NVIDIA GH200 Grace Hopper Superchip datasheet, sparse figures halved",
        sm_count=132,
        memories=(
            DeviceMemory(
                key="GH200-96GB",
                # The 96 GB HBM3 part, which nvidia-smi names by its LPDDR5X size (PCI device 0x2342).
                names=("NVIDIA GH200 480GB", "NVIDIA GH200 120GB", "GH200 96GB"),
                capacity_gib=95.0,
                capacity_source="CUDA out-of-memory message of a GH200 run: 'a total capacity of 95.00 GiB' "
                "(Megatron-LM log, 2026-03-26); the 96 GB HBM3 GH200",
                capacity_runtime=True,
                bandwidth_tbs=4.0,
                bandwidth_source="NVIDIA GH200 Grace Hopper Superchip datasheet: 96GB HBM3, 4TB/s",
            ),
            DeviceMemory(
                key="GH200-144GB",
                # The HBM3e part (PCI device 0x2348).
                names=("NVIDIA GH200 144G HBM3e", "GH200 144GB"),
                capacity_gib=_datasheet_gb(144),
                capacity_source="NVIDIA GH200 Grace Hopper Superchip datasheet: 144GB HBM3e (taken as 10^9 bytes)",
                bandwidth_tbs=4.9,
                bandwidth_source="NVIDIA GH200 Grace Hopper Superchip datasheet: 144GB HBM3e, 4.9TB/s",
            ),
        ),
    ),
    Device(
        key="H200-SXM",
        vendor="nvidia",
        names=("H200", "NVIDIA H200"),
        tflops=_HOPPER_SXM,  # the same chip as the H100 SXM
        peaks_source="NVIDIA H200 datasheet, SXM column, sparse figures halved",
        sm_count=132,
        memories=(
            DeviceMemory(
                key="H200-SXM",
                capacity_gib=_gib(150_109_880_320),
                capacity_source="totalGlobalMem 150109880320 B of 'NVIDIA H200' (torch.cuda.get_device_properties, "
                "driver 580.159.04; the CUDA out-of-memory message of the same run: 'a total capacity of "
                "139.80 GiB'), measured by bench/gpu_node.sh on 2026-11-27",
                capacity_runtime=True,
                bandwidth_tbs=4.8,
                bandwidth_source="NVIDIA H200 datasheet, SXM column: GPU memory bandwidth 4.8TB/s",
            ),
        ),
    ),
    Device(
        key="H200-NVL",
        vendor="nvidia",
        names=("NVIDIA H200 NVL",),
        tflops=_HOPPER_NVL,
        peaks_source="NVIDIA H200 datasheet, NVL column, sparse figures halved",
        sm_count=132,
        memories=(
            DeviceMemory(
                key="H200-NVL",
                capacity_gib=_datasheet_gb(141),
                capacity_source="NVIDIA H200 datasheet: 141 GB (taken as 10^9 bytes)",
                bandwidth_tbs=4.8,
                bandwidth_source="NVIDIA H200 datasheet, NVL column: GPU memory bandwidth 4.8TB/s",
            ),
        ),
    ),
    Device(
        key="B200",
        vendor="nvidia",
        names=("NVIDIA B200",),
        tflops={"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "tf32": 1100.0},  # BF16 4.5 / FP8 9 PFLOPS sparse
        peaks_source="NVIDIA HGX B200 datasheet, per-GPU sparse figures halved",
        memories=(
            DeviceMemory(
                key="B200",
                capacity_gib=_gib(191_503_138_816),
                capacity_source="totalGlobalMem 191503138816 B of 'NVIDIA B200' in a PyTorch profiler trace "
                "(AMD-AGI/TraceLens test data, 2026-05-18)",
                capacity_runtime=True,
                bandwidth_tbs=8.0,
                bandwidth_source="NVIDIA HGX B200 datasheet: 64TB/s aggregate for 8 GPUs, 8TB/s per GPU",
            ),
        ),
    ),
    Device(
        key="A100",
        vendor="nvidia",
        # "A100-PG509-200": the board name some PyTorch profiler traces record; it does not say the memory.
        names=("A100", "NVIDIA A100-PG509-200"),
        tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0},  # dense figures; no FP8 tensor cores
        peaks_source="NVIDIA A100 datasheet, dense figures",
        sm_count=108,
        memories=(
            DeviceMemory(
                key="A100-80GB",
                names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "A100 80GB"),
                capacity_gib=_datasheet_gb(80),
                capacity_source="NVIDIA A100 datasheet, 80GB model (taken as 10^9 bytes)",
                bandwidth_note="variants differ: 1,935 GB/s (PCIe) and 2,039 GB/s (SXM) share the name",
            ),
            DeviceMemory(
                key="A100-40GB",
                # No capacity or bandwidth in the table yet: names it to give its peak, not its memory.
                names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB PCIe", "A100 40GB"),
                bandwidth_note="not in the table yet",
            ),
        ),
    ),
    Device(
        key="MI355X",
        vendor="amd",
        names=("AMD Instinct MI355X",),
        tflops={"bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2},  # FP16/BF16 2.5 PFLOPS, FP8 5.0 PFLOPS dense
        peaks_source="AMD Instinct MI355X datasheet, dense figures",
        compute_units=256,  # datasheet: 256 GPU compute units
        memories=(
            DeviceMemory(
                key="MI355X",
                capacity_gib=_datasheet_gb(288),
                capacity_source="AMD Instinct MI355X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
                bandwidth_tbs=8.0,
                bandwidth_source="AMD Instinct MI355X datasheet: peak theoretical memory bandwidth 8 TB/s",
            ),
        ),
    ),
    Device(
        key="MI350X",
        vendor="amd",
        names=("AMD Instinct MI350X",),
        tflops={"bf16": 2306.9, "fp16": 2306.9, "fp8": 4613.7},  # FP16/BF16 2.3 PFLOPS, FP8 4.6 PFLOPS dense
        peaks_source="AMD Instinct MI350X datasheet, dense figures",
        compute_units=256,  # datasheet: 256 GPU compute units
        memories=(
            DeviceMemory(
                key="MI350X",
                capacity_gib=_datasheet_gb(288),
                capacity_source="AMD Instinct MI350X datasheet: 288 GB HBM3E (taken as 10^9 bytes)",
                bandwidth_tbs=8.0,
                bandwidth_source="AMD Instinct MI350X datasheet: peak theoretical memory bandwidth 8 TB/s",
            ),
        ),
    ),
    Device(
        key="MI325X",
        vendor="amd",
        names=("AMD Instinct MI325X",),
        tflops=_CDNA3,  # BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, the MI300X's compute
        peaks_source="AMD Instinct MI325X datasheet, dense figures",
        compute_units=304,  # datasheet: 304 GPU compute units
        memories=(
            DeviceMemory(
                key="MI325X",
                capacity_gib=255.98,
                capacity_source="Primus training log on MI325X: 'hip mem usage/free/total' total 255.98GB "
                "(torch.cuda.mem_get_info over 2^30; AMD-AGI/Primus-SaFE test data, 2025-12-02)",
                capacity_runtime=True,
                bandwidth_tbs=6.0,
                bandwidth_source="AMD Instinct MI325X datasheet: peak theoretical memory bandwidth 6 TB/s",
            ),
        ),
    ),
    Device(
        key="MI300X",
        vendor="amd",
        # "VF": the SR-IOV virtual function of a whole MI300X, as cloud VMs name it; "OAM": rocm-smi's name.
        names=("AMD Instinct MI300X", "AMD Instinct MI300X VF", "AMD Instinct MI300X OAM"),
        tflops=_CDNA3,  # BF16 1,307.4 / FP8 2,614.9 TFLOPS dense
        peaks_source="AMD Instinct MI300X datasheet, dense figures",
        compute_units=304,  # datasheet: 304 GPU compute units
        memories=(
            DeviceMemory(
                key="MI300X",
                capacity_gib=_gib(206_141_652_992),
                capacity_source="totalGlobalMem 206141652992 B of 'AMD Instinct MI300X' in a PyTorch profiler trace "
                "(AMD-AGI/TraceLens test data, 2026-02-25); rocm-smi reports the same VRAM total",
                capacity_runtime=True,
                bandwidth_tbs=5.3,
                bandwidth_source="AMD Instinct MI300X datasheet: peak theoretical memory bandwidth 5.3 TB/s",
            ),
        ),
    ),
    Device(
        key="MI250X",
        vendor="amd",
        # One GCD is one device; ROCm names the GCDs of an MI250X and of an MI250 alike.
        names=("AMD Instinct MI250X", "AMD Instinct MI250X/MI250"),
        tflops={"bf16": 383.0, "fp16": 383.0},  # dense; no FP8
        peaks_source="AMD Instinct MI250X datasheet, dense figures",
        memories=(
            DeviceMemory(
                key="MI250X",
                capacity_gib=_datasheet_gb(64),
                capacity_source="AMD Instinct MI250X datasheet: 128 GB per OAM, 64 GB per GCD (taken as 10^9 bytes)",
                bandwidth_tbs=3.2768,
                bandwidth_source="AMD Instinct MI250X datasheet: peak theoretical memory bandwidth 3.2768 TB/s",
            ),
        ),
    ),
)

#: Vendor words a device name may start with; what follows is matched exactly.
_VENDOR_PREFIXES = ("nvidia ", "amd instinct ", "amd ")
#: CUDA names a MIG device after its GPU: ``NVIDIA H100 80GB HBM3 MIG 1g.10gb``.
_MIG_SUFFIX = re.compile(r" mig \S+$")


def _normal(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name).strip().lower()


def normalize_device_name(name: str) -> str:
    """``name`` as the table compares it: lower case, spaces, '-' and '_' alike, no vendor word, no MIG suffix."""
    text = _MIG_SUFFIX.sub("", _normal(name))
    for prefix in _VENDOR_PREFIXES:
        if text.startswith(prefix):
            return text.removeprefix(prefix)
    return text


def _index() -> dict[str, tuple[Device, DeviceMemory | None]]:
    index: dict[str, tuple[Device, DeviceMemory | None]] = {}
    for device in DEVICES:
        only = device.memories[0] if len(device.memories) == 1 else None
        for name in (device.key, *device.names):
            index[normalize_device_name(name)] = (device, only)
        for memory in device.memories:
            for name in (memory.key, *memory.names):
                index[normalize_device_name(name)] = (device, memory)
    return index


_BY_NAME = _index()


def identify_device(device_name: str | None) -> DeviceMatch | None:
    """The device (and memory configuration, when the name says it) ``device_name`` names exactly, if any.

    A MIG device's name identifies its whole GPU, with ``mig`` set: callers that use a whole GPU's
    figure refuse it or scale it (:mod:`tprimat.hardware.partitions`).
    """
    if not device_name:
        return None
    found = _BY_NAME.get(normalize_device_name(device_name))
    if found is None:
        return None
    return DeviceMatch(device=found[0], memory=found[1], mig=bool(_MIG_SUFFIX.search(_normal(device_name))))


def find_device(device_name: str | None) -> Device | None:
    """The device model ``device_name`` names exactly (see :func:`identify_device`), if any."""
    match = identify_device(device_name)
    return match.device if match else None


def suggest_devices(device_name: str, limit: int = 3) -> list[str]:
    """The keys whose names are closest to an unknown ``device_name`` (difflib), best first."""
    keys_by_name = {}
    for name, (device, memory) in _BY_NAME.items():
        keys_by_name[name] = memory.key if memory is not None and name not in _device_names(device) else device.key
    close = difflib.get_close_matches(
        normalize_device_name(device_name), list(keys_by_name), n=len(keys_by_name), cutoff=0.75
    )
    keys: list[str] = []
    for name in close:
        if keys_by_name[name] not in keys:
            keys.append(keys_by_name[name])
    return keys[:limit]


def _device_names(device: Device) -> set[str]:
    return {normalize_device_name(n) for n in (device.key, *device.names)}


def device_keys() -> list[str]:
    """The table's device keys, for error messages and help."""
    return [device.key for device in DEVICES]
