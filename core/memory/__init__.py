"""Training memory: predict it before a run (:mod:`.estimate`), against device capacities (:mod:`.capacity`)."""

from tprimat.memory.capacity import CAPACITY_VERSION, DEVICE_CAPACITIES, DeviceCapacity, find_capacity
from tprimat.memory.estimate import (
    MemoryEstimate,
    MemoryEstimateError,
    OptimizerLayout,
    estimate_memory,
    optimizer_layout,
)

__all__ = [
    "CAPACITY_VERSION",
    "DEVICE_CAPACITIES",
    "DeviceCapacity",
    "MemoryEstimate",
    "MemoryEstimateError",
    "OptimizerLayout",
    "estimate_memory",
    "find_capacity",
    "optimizer_layout",
]
