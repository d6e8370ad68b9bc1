"""Host time in GPU runtime calls (CUDA or HIP), as vendor profilers record them.

Nsight Systems and rocprofv3 record every runtime API call with its start and
end; Kineto traces carry the same calls as ``cuda_runtime`` events.  The summary
separates the calls that enqueue GPU work (their time is the **launch
overhead**) from the calls that wait for it (their time is the host waiting on
the GPU).
"""

from __future__ import annotations

import re
from typing import Any

#: Calls that enqueue GPU work (HIP spellings are read as their CUDA counterparts).
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaExtModuleLaunchKernel",
        "cudaModuleLaunchKernel",
        "cudaMemcpyWithStream",
    }
)
#: Calls that wait for GPU work.
SYNC_CALLS = frozenset(
    {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMemcpy"}
)
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def runtime_name(name: str) -> str:
    """A call's name without the API version Nsight Systems appends (``cudaLaunchKernel_v7000``)."""
    return _VERSION_SUFFIX.sub("", name)


def new_summary() -> dict[str, Any]:
    """An empty summary (see :func:`add_runtime_call`)."""
    return {"calls": 0, "total_us": 0.0, "launch_calls": 0, "launch_us": 0.0, "sync_calls": 0, "sync_us": 0.0}


def add_runtime_call(summary: dict[str, Any], name: str, dur_us: float) -> None:
    """Count one call of ``dur_us``: in every call, and in the launch or the synchronisation calls."""
    bare = "cuda" + name[3:] if name.startswith("hip") else name
    summary["calls"] += 1
    summary["total_us"] += dur_us
    if bare in LAUNCH_CALLS:
        summary["launch_calls"] += 1
        summary["launch_us"] += dur_us
    elif bare in SYNC_CALLS:
        summary["sync_calls"] += 1
        summary["sync_us"] += dur_us
