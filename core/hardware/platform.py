"""Which machine is this?  The built-in ``detect_platform`` fallback.

Hardware identity is captured where a run happens and stored in its
manifest; it is never taken from the machine that parses a log.  This
fallback asks the vendors' command-line tools (``nvidia-smi``, ``amd-smi`` or
``rocm-smi``) and device nodes, and never imports torch, so it works in any
container and on a laptop.  Parsing is split from probing so that real tool
outputs can be tested without the tools.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform as _stdlib_platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from tprimat import hookimpl
from tprimat.hardware.devices import find_device

if TYPE_CHECKING:
    from tprimat.hardware.partitions import DevicePartition
    from tprimat.hardware.smi_text import SmiText

GIB = 2**30
MIB = 2**20


@attrs.frozen(kw_only=True)
class PlatformInfo:
    """What ``detect_platform`` found on this machine."""

    platform: Literal["amd", "nvidia", "cpu"]
    device_name: str | None = None
    device_count: int = 0
    memory_per_device_gib: float | None = None
    driver_version: str | None = None
    stack: Literal["rocm", "cuda"] | None = None
    stack_version: str | None = None
    hostname: str | None = None
    cpu: str | None = None
    source: str = ""  # the tool that answered, e.g. "nvidia-smi"
    notes: tuple[str, ...] = ()
    partition: DevicePartition | None = None  # each device is a partition of a GPU (MIG, CPX, ...)


def trains_on_cpu(info: PlatformInfo) -> bool:
    """Whether work planned for ``info`` runs on the CPU (no GPU found, or a CPU target).

    The one answer for all of tprimat outside the training program: the CPU preset layer,
    the microbenchmark defaults, the memory check, the monitor and tuning all ask it, so they
    never disagree (only a trainer itself asks torch which device it got).
    """
    return info.platform == "cpu"


#: Device names by vendor, as the vendors' tools and datasheets spell them: AMD Instinct and
#: Radeon parts (MI300X, MI355X, "AMD Instinct MI300X VF"), NVIDIA data-centre parts (H100,
#: GH200, B200, A100, L40S, "NVIDIA H100 80GB HBM3").
_VENDOR_NAMES: tuple[tuple[Literal["amd", "nvidia"], re.Pattern[str]], ...] = (
    ("amd", re.compile(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}", re.IGNORECASE)),
    ("nvidia", re.compile(r"NVIDIA|Tesla|\b(?:G?[ABHLV]|GB|GH|RTX ?)\d{2,4}[A-Z]*\b", re.IGNORECASE)),
)


def vendor_of_device(device_name: str | None) -> Literal["amd", "nvidia"] | None:
    """The vendor a device name belongs to: the device table's, else by the vendors' naming (None: neither's)."""
    if not device_name:
        return None
    known = find_device(device_name)
    if known is not None:
        return known.vendor
    for vendor, pattern in _VENDOR_NAMES:
        if pattern.search(device_name):
            return vendor
    return None


def parse_nvidia_smi_query(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,nounits``.

    Accepts output with or without the header line and with or without units.
    """
    rows = []
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) < 3 or cells[0].lower() == "name":
            continue
        rows.append({"name": cells[0], "memory_mib": cells[1], "driver": cells[2]})
    return rows


def parse_cuda_version(text: str) -> str | None:
    """The ``CUDA Version: X.Y`` from ``nvidia-smi``'s table header."""
    match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return match.group(1) if match else None


def parse_rocm_smi_json(text: str) -> tuple[list[dict[str, str]], str | None]:
    """Cards and driver version from ``rocm-smi --showproductname --showmeminfo vram --json``."""
    data = json.loads(text)
    cards = [v for k, v in sorted(data.items()) if k.startswith("card") and isinstance(v, dict)]
    system = data.get("system") or {}
    return cards, system.get("Driver version")


def _rocm_card_name(card: dict[str, str]) -> str | None:
    for key in ("Card Series", "Card series", "Device Name", "Card Model", "Card model"):
        value = card.get(key)
        if value and value != "N/A":
            return value
    return None


def _run(argv: list[str], timeout: float = 10.0) -> str | None:
    """stdout of a short-lived tool, or None if it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _stdlib_platform.processor() or None


def _host_memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / GIB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _detect_nvidia() -> PlatformInfo | None:
    from tprimat.hardware.smi_text import parse_nvidia_smi_table

    query = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"])
    table_text = _run(["nvidia-smi"]) or ""
    rows = parse_nvidia_smi_query(query) if query else []
    table = parse_nvidia_smi_table(table_text) if table_text else None
    notes: list[str] = []
    if not rows and table is not None and table.gpus:
        # no CSV answer (old driver, restricted container): the default table says the same
        driver = table.driver_version or ""
        rows = [
            {"name": g.name or "", "memory_mib": str(g.memory_total_mib or ""), "driver": driver} for g in table.gpus
        ]
        notes.append("read from nvidia-smi's default table (the CSV query gave no answer)")
    if not rows:
        return None
    names = sorted({r["name"] for r in rows})
    if len(names) > 1:
        notes.append(f"mixed devices: {', '.join(names)}")
    try:
        memory = int(float(rows[0]["memory_mib"])) * MIB / GIB
    except ValueError:
        memory = None
    count = len(rows)
    partition = None
    if table is not None and table.mig_devices:
        partition, count, memory, whole = _mig_view(table, _run(["nvidia-smi", "-L"]) or "", len(rows))
        migs = len(table.mig_devices)
        if whole:
            notes.append(
                f"MIG enabled on some GPUs only: {migs} MIG device(s) and {whole} whole GPU(s) of {len(rows)}; "
                "the devices differ, so no single peak applies (no MFU)"
            )
        else:
            notes.append(
                f"MIG enabled: {count} MIG device(s) of {len(rows)} GPU(s); each device is a partition "
                f"({partition.mode}, {partition.sm_count or '?'} SMs); MFU uses its share of the peak, "
                "none when that share is unknown"
            )
    elif table is not None:
        empty = [str(g.index) for g in table.gpus if g.mig_mode == "Enabled"]
        if empty:
            notes.append(
                f"MIG mode is enabled on GPU {', '.join(empty)} with no MIG devices: CUDA cannot run on "
                f"{'it' if len(empty) == 1 else 'them'} until MIG devices are created"
            )
    return PlatformInfo(
        platform="nvidia",
        device_name=rows[0]["name"],
        device_count=count,
        memory_per_device_gib=memory,
        driver_version=rows[0]["driver"] or None,
        stack="cuda",
        stack_version=parse_cuda_version(table_text),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="nvidia-smi",
        notes=tuple(notes),
        partition=partition,
    )


def _mig_view(table: SmiText, listing: str, gpus: int) -> tuple[DevicePartition, int, float | None, int]:
    """(partition, device count, memory per MIG device in GiB, whole GPUs) from the table's ``MIG devices:``
    box and ``nvidia-smi -L``: GPUs without MIG devices count as whole GPUs beside them."""
    from tprimat.hardware.partitions import mig_partition
    from tprimat.hardware.smi_text import parse_nvidia_smi_list

    migs = table.mig_devices
    listed = parse_nvidia_smi_list(listing) if listing else None
    listed_migs = listed.mig_devices if listed else ()
    profiles = {m.profile for m in listed_migs}
    sms = {m.sm_count for m in migs}
    whole = max(0, gpus - len({m.gpu for m in migs} | {m.gpu for m in listed_migs}))
    profile = profiles.pop() if len(profiles) == 1 else None
    sm_count = sms.pop() if len(sms) == 1 and not whole else None
    partition = mig_partition(profile if not whole else None, sm_count, source="nvidia-smi")
    totals = [m.memory_total_mib for m in migs if m.memory_total_mib]
    memory = min(totals) * MIB / GIB if totals else None
    return partition, len(migs) + whole, memory, whole


def _rocm_version() -> str | None:
    for candidate in (Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version",):
        try:
            return candidate.read_text().strip() or None
        except OSError:
            continue
    return None


def _detect_amd() -> PlatformInfo | None:
    if not Path("/dev/kfd").exists():
        return None
    from tprimat.hardware.smi_text import parse_rocm_smi_text

    text = _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json"])
    concise = parse_rocm_smi_text(_run(["rocm-smi"]) or "")
    cards: list[dict[str, str]] = []
    driver = None
    notes: list[str] = []
    if text:
        try:
            cards, driver = parse_rocm_smi_json(text)
        except (json.JSONDecodeError, AttributeError):
            notes.append("rocm-smi printed JSON tprimat could not read")
    else:
        notes.append("/dev/kfd present but rocm-smi is missing or failed: device details unknown")
    memory = None
    if cards and cards[0].get("VRAM Total Memory (B)", "").isdigit():
        memory = int(cards[0]["VRAM Total Memory (B)"]) / GIB
    name = _rocm_card_name(cards[0]) if cards else None
    count = len(cards)
    if not cards and concise is not None and concise.gpus:
        text_form = parse_rocm_smi_text(_run(["rocm-smi", "-i", "--showmeminfo", "vram"]) or "") or concise
        first = text_form.gpus[0]
        name, count = first.name or concise.gpus[0].name, len(concise.gpus)
        memory = first.memory_total_mib * MIB / GIB if first.memory_total_mib else None
        notes.append("read from rocm-smi's text output (no readable JSON)")
    partition, memory, note = _amd_partition_view(concise, memory)
    if note:
        notes.append(note)
    return PlatformInfo(
        platform="amd",
        device_name=name,
        device_count=count,
        memory_per_device_gib=memory,
        driver_version=driver,
        stack="rocm",
        stack_version=_rocm_version(),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="rocm-smi" if text or concise else "/dev/kfd",
        notes=tuple(notes),
        partition=partition,
    )


def _amd_partition_view(
    concise: SmiText | None, memory_gib: float | None
) -> tuple[DevicePartition | None, float | None, str | None]:
    """(partition, memory per device, note) from rocm-smi's ``Partitions`` column (``NPS1, CPX``)."""
    from tprimat.hardware.partitions import amd_partition, describe, partition_memory_gib

    if concise is None or not concise.gpus:
        return None, memory_gib, None
    modes = {(g.compute_partition, g.memory_partition) for g in concise.gpus}
    compute, memory_mode = sorted(modes, key=str)[0]
    partition = amd_partition(compute, memory_mode, source="rocm-smi")
    if partition is None:
        return None, memory_gib, None
    share = partition_memory_gib(memory_gib, partition)
    note = f"compute partition {describe(partition)}: each device is a partition of a GPU"
    if partition.per_gpu:
        note += "; peaks and memory per device are the GPU's divided by the partitions per GPU"
    else:
        note += f"; {partition.mode} is not a known mode, so MFU is not computed"
    if len(modes) > 1:
        note += f" (devices report different modes: {sorted(modes, key=str)})"
    return partition, share, note


def detect() -> PlatformInfo:
    """This machine: an NVIDIA or AMD GPU node if the tools say so, else the CPU."""
    found = _detect_nvidia() or _detect_amd()
    if found is not None:
        return found
    return PlatformInfo(
        platform="cpu",
        device_name=cpu_model(),
        device_count=os.cpu_count() or 1,
        memory_per_device_gib=_host_memory_gib(),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="/proc",
        notes=("no GPU found (no nvidia-smi answer, no /dev/kfd)",),
    )


class BuiltinPlatformPlugin:
    """The fallback every installation has; plugins with better probes answer first."""

    @hookimpl(trylast=True)
    def detect_platform(self) -> PlatformInfo:
        return detect()
