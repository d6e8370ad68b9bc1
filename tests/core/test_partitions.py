"""Partitions of a GPU (AMD CPX/QPX, NVIDIA MIG): detected, and never given a whole GPU's peak."""

from __future__ import annotations

import pytest

from tests.core.test_platform import _fake_tools
from tests.core.test_smi_text import MIG_TABLE, ROCM_8X, ROCM_CPX, ROCM_CPX_MEM, ROCM_SPX
from tprimat.hardware import platform as plat
from tprimat.hardware.partitions import amd_partition, mig_profile_in_name
from tprimat.result.peaks import lookup_peak
from tprimat.result.schema import DevicePartition, Hardware


def _amd_host(monkeypatch):
    monkeypatch.setattr(plat, "_detect_nvidia", lambda: None)
    monkeypatch.setattr(plat.Path, "exists", lambda self: str(self) == "/dev/kfd" or plat.os.path.exists(self))


def test_mi300x_in_cpx_is_detected_and_its_memory_and_peak_divided(tmp_path, monkeypatch, fixtures):
    _amd_host(monkeypatch)
    smi = fixtures / "smi"
    # no JSON answer (exit 1); the text forms as the reporter printed them
    spx, cpx, cpx_mem = smi / ROCM_SPX, smi / ROCM_CPX, smi / ROCM_CPX_MEM
    script = (
        f'case "$*" in *--json*) exit 1;; "-i --showmeminfo vram") cat "{spx}";; *) cat "{cpx}" "{cpx_mem}";; esac\n'
    )
    _fake_tools(tmp_path, monkeypatch, {"rocm-smi": script})
    info = plat.detect()
    assert (info.platform, info.device_count, info.device_name) == ("amd", 16, "AMD Instinct MI300X OAM")
    assert info.partition == DevicePartition(
        mode="CPX", memory_mode="NPS1", per_gpu=8, compute_fraction=0.125, source="rocm-smi"
    )
    # every partition reports the package's 192 GiB; each gets an eighth
    assert info.memory_per_device_gib == pytest.approx(206141652992 / 2**30 / 8)
    assert any("CPX (8 per GPU, NPS1)" in note for note in info.notes)
    whole = lookup_peak(info.device_name, "bf16")
    part = lookup_peak(info.device_name, "bf16", info.partition)
    assert part.tflops == pytest.approx(whole.tflops / 8) and part.device_key == "MI300X CPX"


@pytest.mark.parametrize("fixture", [ROCM_SPX, ROCM_8X])
def test_spx_is_the_whole_gpu(tmp_path, monkeypatch, fixtures, fixture):
    _amd_host(monkeypatch)
    path = fixtures / "smi" / fixture
    _fake_tools(tmp_path, monkeypatch, {"rocm-smi": f'case "$*" in *--json*) exit 1;; *) cat "{path}";; esac\n'})
    info = plat.detect()
    assert info.partition is None and info.device_name.startswith("AMD Instinct MI300X")


def test_nvidia_mig_devices_are_counted_with_their_own_memory_and_sm_share(tmp_path, monkeypatch, fixtures):
    monkeypatch.setattr(plat, "_detect_amd", lambda: None)
    table = fixtures / "smi" / MIG_TABLE
    query = "NVIDIA A100-SXM4-40GB, 40960, 535.54.03\\n"
    _fake_tools(
        tmp_path,
        monkeypatch,
        {"nvidia-smi": (f'case "$1" in --query-gpu*) printf "{query}";; -L) exit 1;; *) cat "{table}";; esac\n')},
    )
    info = plat.detect()
    assert (info.device_count, info.device_name) == (2, "NVIDIA A100-SXM4-40GB")
    assert info.memory_per_device_gib == pytest.approx(20096 / 1024)  # the smaller MIG device, not 40 GiB
    assert info.partition.sm_count == 42 and info.partition.compute_fraction is None
    peak = lookup_peak(info.device_name, "bf16", info.partition)
    assert peak.tflops == pytest.approx(312.0 * 42 / 108)  # A100: 108 SMs
    assert "MIG" in peak.device_key and "scaled by" in peak.source


def test_a_mig_device_name_without_sm_count_gets_no_peak():
    assert mig_profile_in_name("NVIDIA A100-SXM4-40GB MIG 3g.20gb") == "3g.20gb"
    assert mig_profile_in_name("NVIDIA A100-SXM4-40GB") is None
    peak = lookup_peak("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "bf16")
    assert peak.tflops is None and "partition" in peak.note and "no MFU" in peak.note
    assert lookup_peak("NVIDIA A100-SXM4-40GB", "bf16").tflops == 312.0


def test_unknown_compute_mode_refuses_the_peak():
    partition = amd_partition("TPX", "NPS1")
    assert partition is not None and partition.compute_fraction is None
    assert lookup_peak("AMD Instinct MI300X", "bf16", partition).tflops is None
    assert amd_partition("SPX", "NPS1") is None


def test_partition_survives_a_result_round_trip():
    from tprimat.result.schema import _get_converter

    hardware = Hardware(device_name="AMD Instinct MI300X", partition=amd_partition("QPX", "NPS1", "rocm-smi"))
    data = _get_converter().unstructure(hardware)
    assert data["partition"]["per_gpu"] == 4
    assert _get_converter().structure(data, Hardware) == hardware
    assert _get_converter().structure({"device_name": "x"}, Hardware).partition is None


def test_microbench_fraction_of_peak_uses_the_partition_share():
    import attrs

    from tprimat.microbench.gemm import gemm_case
    from tprimat.microbench.shapes import GemmShape
    from tprimat.microbench.store import summarize

    shape = GemmShape(name="qkv", pass_="fwd", m=8192, n=8192, k=8192)
    row = gemm_case(shape, op="matmul", dtype="bf16", dtype_used="bf16", device_index=0, times=[0.01] * 3)
    document = {"device_name": "AMD Instinct MI300X", "gemm": [row], "attention": []}
    whole = summarize(document)
    document["partition"] = attrs.asdict(amd_partition("CPX", "NPS1", "rocm-smi"))
    part = summarize(document)
    assert part["peak_tflops"]["bf16"] == pytest.approx(whole["peak_tflops"]["bf16"] / 8)
    assert part["mamf_fraction_of_peak"]["bf16"] == pytest.approx(8 * whole["mamf_fraction_of_peak"]["bf16"])


MIG_MIXED_TABLE = "nvidia-smi_-i0-table_and_-L_MIG-mixed-profiles_8xA100-SXM4-40GB_drv580_ssup2-blog_excerpt.txt"
MIG_MIXED_LIST = "nvidia-smi_-L_MIG-mixed-profiles_GPU0-of-8xA100-SXM4-40GB_drv580_ssup2-blog_excerpt.txt"
MIG_LISTINGS = {
    MIG_MIXED_LIST: (8, ["4g.20gb", "1c.2g.10gb", "1c.2g.10gb", "1g.5gb"]),
    "nvidia-smi_-L_MIG_7x1g.5gb_A100-40GB-PCIe_azure-aks-docs_excerpt.txt": (1, ["1g.5gb"] * 7),
    "nvidia-smi_-L_MIG_1x1g.5gb_A100-PCIE-40GB_drv510_yokatayama-e-learning_excerpt.txt": (1, ["1g.5gb"]),
}


@pytest.mark.parametrize("name", sorted(MIG_LISTINGS))
def test_real_mig_listings_give_each_gpu_and_its_mig_devices(fixtures, name):
    from tprimat.hardware.smi_text import parse_nvidia_smi_list

    listed = parse_nvidia_smi_list((fixtures / "smi" / name).read_text(encoding="utf-8"))
    gpus, profiles = MIG_LISTINGS[name]
    assert len(listed.gpus) == gpus
    assert [m.profile for m in listed.mig_devices] == profiles
    assert {m.gpu for m in listed.mig_devices} == {0}


def test_mig_on_one_gpu_beside_whole_gpus_gets_no_single_peak(tmp_path, monkeypatch, fixtures):
    """GPU 0 split into four MIG devices of three profiles, GPUs 1-7 whole: 11 unlike devices, no MFU."""
    monkeypatch.setattr(plat, "_detect_amd", lambda: None)
    table, listing = fixtures / "smi" / MIG_MIXED_TABLE, fixtures / "smi" / MIG_MIXED_LIST
    query = "NVIDIA A100-SXM4-40GB, 40960, 580.126.09\\n" * 8
    script = f'case "$1" in --query-gpu*) printf "{query}";; -L) cat "{listing}";; *) cat "{table}";; esac\n'
    _fake_tools(tmp_path, monkeypatch, {"nvidia-smi": script})
    info = plat.detect()
    assert info.device_count == 4 + 7
    assert info.partition is not None and info.partition.sm_count is None
    assert any("MIG enabled on some GPUs only: 4 MIG device(s) and 7 whole GPU(s) of 8" in n for n in info.notes)
    assert info.memory_per_device_gib == pytest.approx(4864 / 1024)  # the smallest device's memory
    peak = lookup_peak(info.device_name, "bf16", info.partition)
    assert peak.tflops is None and "share of the GPU's peak is unknown" in peak.note


def test_mig_mode_without_mig_devices_is_said(tmp_path, monkeypatch, fixtures):
    monkeypatch.setattr(plat, "_detect_amd", lambda: None)
    table = (
        fixtures
        / "smi"
        / "nvidia-smi_table_MIG-enabled-no-devices_A100-PCIE-40GB_drv510_yokatayama-e-learning_excerpt.txt"
    )
    query = "NVIDIA A100-PCIE-40GB, 40960, 510.47.03\\n"
    script = f'case "$1" in --query-gpu*) printf "{query}";; -L) exit 1;; *) cat "{table}";; esac\n'
    _fake_tools(tmp_path, monkeypatch, {"nvidia-smi": script})
    info = plat.detect()
    assert info.partition is None
    assert any("MIG mode is enabled on GPU 0 with no MIG devices" in n for n in info.notes)
