"""Training memory: predict it before a run (:mod:`.estimate`), against device capacities (:mod:`.capacity`),
with a verdict that allows for the estimator's measured error (:mod:`.verdict`)."""

from tprimat.memory.capacity import (
    CAPACITY_VERSION,
    DEVICE_CAPACITIES,
    DeviceCapacity,
    find_capacity,
    suggest_devices,
)
from tprimat.memory.estimate import (
    MemoryEstimate,
    MemoryEstimateError,
    OptimizerLayout,
    estimate_memory,
    optimizer_layout,
)
from tprimat.memory.verdict import ESTIMATOR_ERROR, Verdict, describe_fit, error_band_gib, fit_verdict

__all__ = [
    "CAPACITY_VERSION",
    "DEVICE_CAPACITIES",
    "ESTIMATOR_ERROR",
    "DeviceCapacity",
    "MemoryEstimate",
    "MemoryEstimateError",
    "OptimizerLayout",
    "Verdict",
    "describe_fit",
    "error_band_gib",
    "estimate_memory",
    "find_capacity",
    "fit_verdict",
    "optimizer_layout",
    "suggest_devices",
]
