"""Every memory figure keeps its unit (GiB) and the quantity it really is, one test per source.

Quantities: allocator allocated (``mem_*allocated_gib``), allocator reserved
(``mem_*reserved_gib``) and the driver's view of device memory used (``mem_device_used_gib``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tprimat.contract.registry import Registry
from tprimat.parse.legacy import convert_legacy
from tprimat.parse.logs import parse_logs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = FIXTURES / "logs"
LEGACY = FIXTURES / "legacy"
GIB = 2**30


def _parse(relative: str):
    return parse_logs([LOGS / relative], registry=Registry.from_environment()).result


def test_primus_hip_mem_usage_is_gib_and_device_used():
    # "hip mem usage/free/total/usage_ratio: 134.62GB/153.37GB/287.98GB/46.74%": Primus computes
    # torch.cuda.mem_get_info() / 1024**3 and prints "GB"; Megatron's own "memory (GB)" fields on
    # the same line are the allocator's.
    result = _parse(
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"
    )
    first = result.iterations[0]
    assert first.mem_device_used_gib == 134.62  # not converted from GB
    assert first.mem_device_total_gib == 287.98
    assert first.mem_max_allocated_gib == pytest.approx(119.104140625)
    assert first.mem_max_reserved_gib == pytest.approx(119.82421875)
    assert first.mem_device_used_gib != first.mem_max_reserved_gib


def test_megatron_memory_mb_is_mib_of_the_allocator():
    result = _parse("megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log")
    # "[Rank 0] (after 1 iterations) memory (MB) | allocated: 14235.44 | ... reserved: 14504.00"
    first = next(r for r in result.iterations if r.mem_allocated_gib is not None)
    assert first.mem_allocated_gib == pytest.approx(14235.44 / 1024)
    assert first.mem_reserved_gib == pytest.approx(14504.00 / 1024)
    assert first.mem_device_used_gib is None


def test_nemo_max_memory_is_bytes_of_the_allocator():
    result = _parse("nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log")
    # "max_memory_reserved: 64286097408 | max_memory_allocated: 62777982976"
    assert result.summary.mem_max_reserved_gib == pytest.approx(64286097408 / GIB)
    assert result.summary.mem_max_allocated_gib == pytest.approx(62777982976 / GIB)
    assert result.summary.mem_device_used_gib is None


def test_legacy_benchmark_file_allocator_figures_gb_to_gib():
    result = convert_legacy(LEGACY / "output__benchmark_cuda_llama.627dfac.json")
    # torch.cuda.memory_allocated() / memory_reserved() divided by 1e9
    assert result.summary.mem_max_allocated_gib == pytest.approx(22.295e9 / GIB)
    assert result.summary.mem_max_reserved_gib == pytest.approx(32.588e9 / GIB)
    assert result.summary.mem_device_used_gib is None


def test_legacy_train_callback_reserved_is_device_used():
    # The training callback of the train_* files wrote "reserved" as (total - free) / 1e9 from
    # torch.cuda.mem_get_info(): the driver's view.  The real NeMo file has allocated only.
    path = LEGACY / "output_prev__train_nvd_nemo_llama.516b342.json"
    result = convert_legacy(path)
    assert result.summary.mem_max_allocated_gib == pytest.approx(36.17082e9 / GIB)
    assert result.summary.mem_max_reserved_gib is None
    data = json.loads(path.read_text())
    data["memory_metrics"]["peak_memory_reserved_gb"] = 45.0
    with_reserved = convert_legacy(path, data=data)
    assert with_reserved.summary.mem_device_used_gib == pytest.approx(45.0e9 / GIB)
    assert with_reserved.summary.mem_max_reserved_gib is None
    assert "mem_get_info" in "\n".join(with_reserved.provenance.notes)


def test_legacy_primus_extraction_is_already_gib_and_device_used():
    # The earlier extractor copied Primus's "hip mem usage" (153.81 "GB" on the MI325X line of
    # the Primus-SaFE fixture) without converting it; the legacy file calls it "_gb".
    path = LEGACY / "output_prev__train_amd_prim_llama.516b342.json"
    data = json.loads(path.read_text())
    data["memory_metrics"] = {"peak_memory_allocated_gb": 153.81, "avg_memory_allocated_gb": 150.0}
    result = convert_legacy(path, data=data)
    assert result.summary.mem_device_used_gib == 153.81  # not 153.81e9 / 2**30 (-6.9%)
    assert result.summary.mem_max_allocated_gib is None
    notes = "\n".join(result.provenance.notes)
    assert "hip mem usage" in notes and "not converted again" in notes


def test_rocm_fork_mem_usages_is_a_fraction_kept_as_reported():
    result = _parse("megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log")
    first = result.iterations[0]
    # "mem usages: 0.7524": a fraction of device memory, no unit to convert, no GiB field
    assert first.reported["mem_usage_ratio"] == 0.7524
    assert first.mem_device_used_gib is None
    # "[Rank 0] (after 1 iterations) memory (MB) | ... max allocated: 136935.04736328125"
    assert first.mem_max_allocated_gib == pytest.approx(136935.04736328125 / 1024)
