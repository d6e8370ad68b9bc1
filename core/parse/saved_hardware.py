"""Hardware identity from a saved ``nvidia-smi``, ``rocm-smi`` or ``amd-smi`` output, for a log parsed elsewhere.

A log parsed away from the machine that ran it has no hardware identity, so no MFU (tprimat
never takes it from the machine that parses).  Users often kept the run machine's
``nvidia-smi``, ``rocm-smi`` or ``amd-smi`` output; ``tprimat parse LOG --hardware FILE``
reads the device from it with the text readers of :mod:`tprimat.hardware.smi_text`, the
``nvidia-smi -q -x`` reader of :mod:`tprimat.hardware.smi_xml` (and the JSON and CSV
readers of :mod:`tprimat.hardware.platform`).  The record says where it came from
(``Hardware.source`` names the file and the form) and has no capture time: it is what the
file says, not something tprimat saw while the run happened.  A form that names no model
(``amd-smi monitor``, ``amd-smi metric``) is refused with what it lacks: a device is never
guessed from its memory size or count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import attrs

from tprimat.errors import TprimatError
from tprimat.hardware.platform import (
    GIB,
    MIB,
    _rocm_card_name,
    parse_nvidia_smi_query,
    parse_rocm_smi_json,
    vendor_of_device,
)
from tprimat.hardware.smi_text import (
    SmiText,
    amd_smi_monitor_columns,
    parse_amd_smi_text,
    parse_nvidia_smi_list,
    parse_nvidia_smi_table,
    parse_rocm_smi_text,
)
from tprimat.hardware.smi_xml import SmiXmlError, parse_nvidia_smi_xml
from tprimat.result.schema import Hardware

#: Largest file read (SMI outputs are kilobytes; a log given by mistake can be gigabytes).
MAX_BYTES = 16 * 1024 * 1024

#: The forms read, as the refusal lists them.
FORMS = (
    "nvidia-smi (the default table)",
    "nvidia-smi -L",
    "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv",
    "nvidia-smi -q -x",
    "rocm-smi (the concise table)",
    "rocm-smi -i / --showmeminfo vram",
    "rocm-smi --showproductname --showmeminfo vram --json",
    "amd-smi static (or static --asic)",
)


@attrs.frozen(kw_only=True)
class SavedHardware:
    """The hardware a saved SMI output states, the platform, and a note saying where it came from."""

    hardware: Hardware
    platform: str  # "nvidia" | "amd"
    note: str


def read_saved_hardware(path: str | Path) -> SavedHardware:
    """The device identity that the saved SMI output at ``path`` states (:class:`TprimatError` if none)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise TprimatError(
                f"--hardware {path}: {path.stat().st_size} bytes is not a saved nvidia-smi/rocm-smi/amd-smi output"
            )
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise TprimatError(f"--hardware {path}: cannot read: {exc.strerror or exc}") from None
    readers: tuple[Callable[[str], tuple[str, Hardware] | None], ...] = (
        _rocm_json,
        _nvidia_xml,
        _smi_text,
        _nvidia_csv,
    )
    for reader in readers:
        try:
            found = reader(text)
        except SmiXmlError as exc:
            raise TprimatError(f"--hardware {path}: {exc}") from None
        if found is not None and found[1].device_name:
            form, hardware = found
            return _saved(path, form, hardware)
    lacking = _names_no_model(text)
    if lacking:
        raise TprimatError(
            f"--hardware {path}: {lacking}; give the run machine's `amd-smi static --asic` (its MARKET_NAME "
            f"names the model) or the saved output of one of: {'; '.join(FORMS)}"
        )
    raise TprimatError(
        f"--hardware {path}: names no GPU model tprimat can read; give the saved output of one of: {'; '.join(FORMS)}"
    )


def _names_no_model(text: str) -> str | None:
    """What an amd-smi form that tprimat recognises, but that names no GPU model, is; None for any other text."""
    columns = amd_smi_monitor_columns(text)
    if columns:
        return (
            f"an amd-smi monitor table ({' '.join(columns)}) names no GPU model "
            "(VRAM_TOTAL is a memory size, not a device, and the model is never guessed from it)"
        )
    found = parse_amd_smi_text(text)
    if found is not None:
        first, last = found.gpus[0].index, found.gpus[-1].index
        blocks = f"GPU {first}" if first == last else f"GPU {first}-{last}"
        return f"its amd-smi blocks ({blocks}) name no GPU model (no ASIC MARKET_NAME)"
    return None


def _saved(path: Path, form: str, hardware: Hardware) -> SavedHardware:
    source = f"{form} output saved in {path} (given with --hardware; not captured by tprimat at run time)"
    hardware = attrs.evolve(hardware, source=source, captured_at=None)
    vendor = vendor_of_device(hardware.device_name) or ("amd" if form.startswith(("rocm", "amd-smi")) else "nvidia")
    count = f"{hardware.device_count_per_node} × " if hardware.device_count_per_node else ""
    note = f"hardware from {form} output {path} (given with --hardware): {count}{hardware.device_name}"
    return SavedHardware(hardware=hardware, platform=vendor, note=note)


def _nvidia_xml(text: str) -> tuple[str, Hardware] | None:
    found = parse_nvidia_smi_xml(text)
    if found is None or not any(g.name for g in found.gpus):
        return None
    return found.tool, _from_smi_text(found)


def _smi_text(text: str) -> tuple[str, Hardware] | None:
    for parse in (parse_nvidia_smi_table, parse_nvidia_smi_list, parse_rocm_smi_text, parse_amd_smi_text):
        found = parse(text)
        if found is not None and any(g.name for g in found.gpus):
            return found.tool, _from_smi_text(found)
    return None


def _from_smi_text(found: SmiText) -> Hardware:
    from tprimat.hardware.partitions import amd_partition, mig_partition

    named = [g for g in found.gpus if g.name]
    totals = [g.memory_total_mib for g in found.gpus if g.memory_total_mib]
    partition = None
    count = len(found.gpus)
    if found.mig_devices:  # each CUDA device is a MIG device
        profiles = {m.profile for m in found.mig_devices}
        sms = {m.sm_count for m in found.mig_devices}
        partition = mig_partition(
            profiles.pop() if len(profiles) == 1 else None,
            sms.pop() if len(sms) == 1 else None,
            source=found.tool,
        )
        count = len(found.mig_devices)
        totals = [m.memory_total_mib for m in found.mig_devices if m.memory_total_mib]
    else:
        modes = {(g.compute_partition, g.memory_partition) for g in found.gpus if g.compute_partition}
        if len(modes) == 1:
            compute, memory_mode = modes.pop()
            partition = amd_partition(compute, memory_mode, source=found.tool)
    return Hardware(
        device_name=named[0].name,
        device_count_per_node=count,
        memory_per_device_gib=min(totals) * MIB / GIB if totals else None,
        driver_version=found.driver_version,
        partition=partition,
    )


def _rocm_json(text: str) -> tuple[str, Hardware] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        cards, driver = parse_rocm_smi_json(text)
    except (ValueError, AttributeError, json.JSONDecodeError):
        return None
    names = [name for name in (_rocm_card_name(card) for card in cards) if name]
    if not names:
        return None
    total = cards[0].get("VRAM Total Memory (B)", "")
    memory = int(total) / GIB if total.isdigit() else None
    hardware = Hardware(device_name=names[0], device_count_per_node=len(cards), memory_per_device_gib=memory)
    return "rocm-smi --json", attrs.evolve(hardware, driver_version=driver)


def _nvidia_csv(text: str) -> tuple[str, Hardware] | None:
    header = next((line.strip().lower() for line in text.splitlines() if line.strip()), "")
    if not (header.startswith("name,") and "memory.total" in header and "driver_version" in header):
        return None  # the columns are known by their header only
    rows = [row for row in parse_nvidia_smi_query(text) if vendor_of_device(row["name"]) == "nvidia"]
    if not rows:
        return None
    try:
        memory = float(rows[0]["memory_mib"].split()[0]) * MIB / GIB
    except (ValueError, IndexError):
        memory = None
    hardware = Hardware(
        device_name=rows[0]["name"],
        device_count_per_node=len(rows),
        memory_per_device_gib=memory,
        driver_version=rows[0]["driver"] or None,
    )
    return "nvidia-smi --query-gpu", hardware
