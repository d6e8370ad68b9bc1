"""Per-GPU memory capacity in GiB, the denominator of "does it fit", read from the device table.

The figures, their sources and :data:`CAPACITY_VERSION` live in the one device table
(:mod:`tprimat.hardware.devices`), which also matches a name to a device: exactly, so "H1000"
is no H100 and "GB200" no B200.  An unknown name has no capacity, and
:func:`suggest_devices` offers the closest known ones; a name that says the device but not its
memory (``GH200``: 96 GB HBM3 or 144 GB HBM3e) has none either, and the message says so.
"""

from __future__ import annotations

import attrs

from tprimat.hardware.devices import (
    CAPACITY_VERSION,
    DEVICES,
    GIB,
    identify_device,
    suggest_devices,
)

__all__ = [
    "CAPACITY_VERSION",
    "DEVICE_CAPACITIES",
    "GIB",
    "DeviceCapacity",
    "find_capacity",
    "known_devices",
    "suggest_devices",
    "unknown_device_message",
    "usable_capacity",
]


@attrs.frozen(kw_only=True)
class DeviceCapacity:
    """Total memory of one device in one memory configuration."""

    key: str  # the memory configuration's key in the device table, e.g. "H100-SXM", "GH200-96GB"
    capacity_gib: float
    source: str
    #: The figure is the runtime's own, not a datasheet's (see :class:`tprimat.hardware.devices.DeviceMemory`).
    runtime: bool = False


#: Every memory configuration of the device table that has a capacity.
DEVICE_CAPACITIES: tuple[DeviceCapacity, ...] = tuple(
    DeviceCapacity(key=m.key, capacity_gib=m.capacity_gib, source=m.capacity_source or "", runtime=m.capacity_runtime)
    for d in DEVICES
    for m in d.memories
    if m.capacity_gib is not None
)


def find_capacity(device_name: str | None) -> DeviceCapacity | None:
    """The capacity of the device ``device_name`` names exactly, if the table has one for that memory.

    A MIG device's name finds its whole GPU's row; callers that need the device's own memory
    check for the MIG profile (:func:`tprimat.hardware.partitions.mig_profile_in_name`).
    """
    match = identify_device(device_name)
    memory = match.memory if match is not None else None
    if memory is None or memory.capacity_gib is None:
        return None
    return DeviceCapacity(
        key=memory.key,
        capacity_gib=memory.capacity_gib,
        source=memory.capacity_source or "",
        runtime=memory.capacity_runtime,
    )


def unknown_device_message(device_name: str) -> str:
    """One line for a device with no capacity in the table: why, the closest known names, and the way out."""
    way_out = "give the capacity with capacity_gib / --capacity-gib"
    match = identify_device(device_name)
    if match is not None:
        why = match.memory_unknown_note or f"the table has no capacity for {match.memory and match.memory.key}"
        return f"no memory capacity known for device {device_name!r} (table {CAPACITY_VERSION}): {why}; {way_out}"
    close = suggest_devices(device_name)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"no memory capacity known for device {device_name!r} (table {CAPACITY_VERSION}; names are matched "
        f"exactly): {hint}known: {', '.join(known_devices())}; {way_out}"
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
    """The keys with a capacity in the table, for error messages and help."""
    return [row.key for row in DEVICE_CAPACITIES]
