"""The vendor tools' human-readable forms, read from real outputs captured by others."""

from __future__ import annotations

import pytest

from tprimat.hardware.smi_text import (
    amd_smi_monitor_columns,
    parse_amd_smi_keys,
    parse_amd_smi_text,
    parse_nvidia_smi_list,
    parse_nvidia_smi_table,
    parse_rocm_smi_concise,
    parse_rocm_smi_keys,
    parse_rocm_smi_text,
)

B200_TABLE = "nvidia-smi_table_driver570_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt"
B200_LIST = "nvidia-smi_-L_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt"
MIG_TABLE = "nvidia-smi_table_MIG-devices_A100-40GB_2x3g.20gb_seansiddens-mps-test_excerpt.txt"
ROCM_SPX = "rocm-smi_MI300X_SPX_id-concise-showmeminfo-vram_ROCm6.3.3_issue-ROCm-ROCm-4750_excerpt.txt"
ROCM_8X = "rocm-smi_concise_8xMI300X_stas00-ml-engineering_excerpt.txt"
ROCM_CPX = "rocm-smi_concise_MI300X_CPX_NPS1_first16of63_ROCm6.3-6.4_issue-ROCm-ROCm-4750-comment3_excerpt.txt"
ROCM_CPX_MEM = "rocm-smi_showmeminfo-vram_MI300X_CPX_NPS1_GPU0-3_issue-ROCm-ROCm-4750-comment3_excerpt.txt"
AMD_STATIC = "amd-smi_static_4xMI300A_amdsmi-cli-README_excerpt.txt"
AMD_ASIC = "amd-smi_static_--asic_MI308X_amdsmi-CHANGELOG_excerpt.txt"
AMD_METRIC = "amd-smi_metric_--usage_MI3xx_amdsmi-CHANGELOG_excerpt.txt"
AMD_MONITOR = "amd-smi_monitor_-ptumv_8xMI300X_amdsmi-CHANGELOG_excerpt.txt"
AMD_MONITOR_32 = "amd-smi_monitor_-p-t-v_MI300X_partitioned-32-devices_amdsmi-CHANGELOG_excerpt.txt"


def _read(fixtures, name):
    return (fixtures / "smi" / name).read_text()


def test_nvidia_smi_default_table(fixtures):
    table = parse_nvidia_smi_table(_read(fixtures, B200_TABLE))
    assert (table.driver_version, table.cuda_version) == ("570.133.20", "12.8")
    assert [g.index for g in table.gpus] == list(range(8))
    first = table.gpus[0]
    assert (first.name, first.memory_used_mib, first.memory_total_mib) == ("NVIDIA B200", 0.0, 183359.0)
    assert (first.power_w, first.power_cap_w, first.temperature_c, first.utilization_pct) == (143.0, 1000.0, 38.0, 0.0)
    assert {g.mig_mode for g in table.gpus} == {"Disabled"} and table.mig_devices == ()
    assert table.gpus[7].power_w == 150.0 and table.gpus[7].temperature_c == 45.0


def test_nvidia_smi_table_mig_devices(fixtures):
    table = parse_nvidia_smi_table(_read(fixtures, MIG_TABLE))
    assert [(m.gpu, m.gpu_instance, m.compute_instance, m.index) for m in table.mig_devices] == [
        (0, 1, 0, 0),
        (0, 2, 0, 1),
    ]
    assert [m.memory_total_mib for m in table.mig_devices] == [20224.0, 20096.0]
    assert {m.sm_count for m in table.mig_devices} == {42}


def test_nvidia_smi_list(fixtures):
    listing = parse_nvidia_smi_list(_read(fixtures, B200_LIST))
    assert len(listing.gpus) == 8 and {g.name for g in listing.gpus} == {"NVIDIA B200"}
    assert listing.gpus[0].uuid == "GPU-993ceac9-59cd-3c1b-2aa9-762f123d778f" and listing.mig_devices == ()


def test_text_without_a_table_is_none():
    assert parse_nvidia_smi_table("iteration 1 | lm loss 3.2") is None
    assert parse_nvidia_smi_list("no gpus here") is None
    assert parse_rocm_smi_text("no rocm-smi here") is None
    assert parse_amd_smi_text("no amd-smi here") is None and amd_smi_monitor_columns("GPU 0: idle") is None


def test_amd_smi_static_names_the_model_memory_driver_and_partition(fixtures):
    static = parse_amd_smi_text(_read(fixtures, AMD_STATIC))
    assert static.tool == "amd-smi" and [g.index for g in static.gpus] == [0, 1, 2, 3]  # the CPU blocks skipped
    assert {g.name for g in static.gpus} == {"MI300A"}
    assert {g.memory_total_mib for g in static.gpus} == {64289.0}  # "64289 MB": amdsmi's bytes / 2^20
    assert {(g.compute_partition, g.memory_partition) for g in static.gpus} == {("SPX", "NPS1")}
    assert static.driver_version == "6.9.0-rc5+"  # DRIVER's VERSION, not VBIOS's (N/A)


def test_amd_smi_keys_follow_the_sections(fixtures):
    keys = parse_amd_smi_keys(_read(fixtures, AMD_STATIC))
    assert keys[3]["ASIC.OAM_ID"] == "3" and keys[3]["BUS.BDF"] == "0003:01:00.0"
    assert keys[0]["VBIOS.VERSION"] == "N/A" and keys[0]["DRIVER.VERSION"] == "6.9.0-rc5+"
    assert keys[0]["RAS.ECC_BLOCK_STATE.UMC"] == "DISABLED" and keys[0]["VRAM.TYPE"] == "HBM"
    assert keys[0]["BOARD.PRODUCT_NAME"] == "Aqua Vanjaram [Instinct MI300A]"


def test_amd_smi_static_asic_alone(fixtures):
    asic = parse_amd_smi_text(_read(fixtures, AMD_ASIC))  # the excerpt starts with its "$ amd-smi static --asic"
    (gpu,) = asic.gpus
    assert (gpu.name, gpu.memory_total_mib, gpu.compute_partition, asic.driver_version) == ("MI308X", None, None, None)


def test_amd_smi_forms_without_a_model_give_unnamed_devices(fixtures):
    metric = parse_amd_smi_text(_read(fixtures, AMD_METRIC))  # wrapped lists, per-XCP sub-sections
    assert [g.index for g in metric.gpus] == [0, 1] and {g.name for g in metric.gpus} == {None}
    assert parse_amd_smi_keys(_read(fixtures, AMD_METRIC))[1]["USAGE.GFX_BUSY_INST.XCP_7"].startswith("[0 %")
    for name in (AMD_MONITOR, AMD_MONITOR_32):
        text = _read(fixtures, name)
        assert parse_amd_smi_text(text) is None
        columns = amd_smi_monitor_columns(text)
        assert columns[0] == "GPU" and columns[-2:] == ("VRAM_USED", "VRAM_TOTAL")


def test_rocm_smi_6_3_concise_with_ids_and_key_value_listings(fixtures):
    text = _read(fixtures, ROCM_SPX)
    keys = parse_rocm_smi_keys(text)
    assert keys[0]["Device Name"] == "AMD Instinct MI300X OAM"
    assert keys[0]["VRAM Total Memory (B)"] == "206141652992"
    found = parse_rocm_smi_text(text)
    (gpu,) = found.gpus
    assert gpu.name == "AMD Instinct MI300X OAM"
    assert gpu.memory_total_mib == pytest.approx(206141652992 / 2**20)
    assert gpu.memory_used_mib == pytest.approx(297771008 / 2**20)
    assert (gpu.memory_partition, gpu.compute_partition) == ("NPS1", "SPX")
    assert (gpu.temperature_c, gpu.power_w, gpu.power_cap_w, gpu.utilization_pct) == (47.0, 133.0, 750.0, 0.0)


def test_rocm_smi_concise_with_a_name_row(fixtures):
    found = parse_rocm_smi_concise(_read(fixtures, ROCM_8X))
    assert len(found.gpus) == 8 and {g.name for g in found.gpus} == {"AMD Instinct MI300X"}
    assert {(g.memory_partition, g.compute_partition) for g in found.gpus} == {("NPS1", "SPX")}
    assert found.gpus[2].power_w == 180.0


def test_rocm_smi_cpx_partitions_each_report_the_whole_memory(fixtures):
    text = _read(fixtures, ROCM_CPX) + _read(fixtures, ROCM_CPX_MEM)
    found = parse_rocm_smi_text(text)
    assert len(found.gpus) == 16
    assert {(g.memory_partition, g.compute_partition) for g in found.gpus} == {("NPS1", "CPX")}
    assert {g.memory_total_mib for g in found.gpus[:4]} == {206141652992 / 2**20}


def test_monitor_falls_back_to_the_text_forms(fixtures):
    from tprimat.running.monitor import GIB, MIB, SAMPLERS, nvidia_smi_table_sampler, rocm_smi_text_sampler

    table = _read(fixtures, B200_TABLE)
    readings = nvidia_smi_table_sampler(runner=lambda argv: table).read()
    assert len(readings) == 8 and sum(r.power_w for r in readings) == 143 + 151 + 144 + 148 + 143 + 146 + 142 + 150
    assert readings[0].mem_total_gib == pytest.approx(183359 * MIB / GIB)
    rocm = _read(fixtures, ROCM_SPX)
    (reading,) = rocm_smi_text_sampler(runner=lambda argv: rocm).read()
    assert reading.mem_used_gib == pytest.approx(297771008 / GIB) and reading.power_w == 133.0
    # tried last, after the CSV/JSON forms
    assert SAMPLERS["nvidia"][-1] is nvidia_smi_table_sampler and SAMPLERS["amd"][-1] is rocm_smi_text_sampler
