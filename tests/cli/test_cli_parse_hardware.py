"""``tprimat parse LOG --hardware FILE``: the device from a saved nvidia-smi/rocm-smi/amd-smi output, said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.hardware.devices import find_device

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMI = FIXTURES / "smi"
CELL14 = FIXTURES / "logs/nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"
WORKLOAD = ("--backend", "nvd_nemo", "--seq-length", "2048", "--model", "llama3.1-8b", "--precision", "bf16")


def _parse(*args: str):
    return CliRunner().invoke(cli, ["parse", str(CELL14), *WORKLOAD, *args])


def _result(smi: Path) -> dict:
    done = _parse("--hardware", str(smi), "--json")
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("name", "device", "platform", "peak"),
    [
        (
            "nvidia-smi_table_driver570_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt",
            "NVIDIA B200",
            "nvidia",
            "B200",
        ),
        ("nvidia-smi_-L_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt", "NVIDIA B200", "nvidia", "B200"),
        ("rocm-smi_concise_8xMI300X_stas00-ml-engineering_excerpt.txt", "AMD Instinct MI300X", "amd", "MI300X"),
        (
            "rocm-smi_MI300X_SPX_id-concise-showmeminfo-vram_ROCm6.3.3_issue-ROCm-ROCm-4750_excerpt.txt",
            "AMD Instinct MI300X OAM",
            "amd",
            "MI300X",
        ),
        # MIG devices with their SM count: the A100's peak scaled by their share of its SMs
        ("telegraf_a100-sxm4-v12_nvidia-smi_q_x.xml", "NVIDIA A100-SXM4-80GB", "nvidia", "A100 MIG"),
    ],
)
def test_a_saved_smi_output_gives_the_device_and_the_mfu(name, device, platform, peak):
    without = json.loads(_parse("--json").stdout)
    assert without["hardware"]["device_name"] is None and without["summary"]["mfu"] is None

    data = _result(SMI / name)
    hardware = data["hardware"]
    assert hardware["device_name"] == device and data["run"]["platform"] == platform
    # said to come from the file, never as if captured while the run happened
    assert name in hardware["source"] and "not captured by tprimat at run time" in hardware["source"]
    assert hardware["captured_at"] is None
    assert any("given with --hardware" in note for note in data["provenance"]["notes"])
    assert not any(note.startswith("no run manifest") for note in data["provenance"]["notes"])
    summary = data["summary"]
    assert summary["mfu"] == pytest.approx(summary["tflops_per_gpu"] / summary["peak_tflops"])
    assert summary["peak_source"].startswith(f"{peak} bf16")


def test_the_table_also_gives_memory_and_driver():
    hardware = _result(SMI / "nvidia-smi_table_driver570_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt")["hardware"]
    assert hardware["device_count_per_node"] == 8
    assert hardware["memory_per_device_gib"] == pytest.approx(183359 / 1024)
    assert hardware["driver_version"] == "570.133.20"


def test_a_device_without_a_datasheet_peak_gives_no_mfu_and_says_why():
    data = _result(SMI / "telegraf_mi100_rocm571_rocm-smi_json.json")
    assert data["hardware"]["device_name"] == "Arcturus GL-XL [Instinct MI100]"
    assert data["summary"]["mfu"] is None
    assert any(
        "no datasheet peak for device 'Arcturus GL-XL [Instinct MI100]'" in n for n in data["provenance"]["notes"]
    )


def test_nvidia_smi_xml_gives_the_mig_devices_memory_and_driver():
    data = _result(SMI / "telegraf_a100-sxm4-v12_nvidia-smi_q_x.xml")
    hardware = data["hardware"]
    assert hardware["device_count_per_node"] == 4  # the four MIG devices of its one GPU
    assert hardware["memory_per_device_gib"] == pytest.approx(19968 / 1024)
    assert hardware["driver_version"] == "535.54.03"
    assert (hardware["partition"]["mode"], hardware["partition"]["sm_count"]) == ("MIG", 14)
    assert "nvidia-smi -q -x output saved in" in hardware["source"]
    whole = find_device(hardware["device_name"])
    assert data["summary"]["peak_tflops"] == pytest.approx(whole.tflops["bf16"] * 14 / whole.sm_count)


def test_amd_smi_static_gives_the_model_count_memory_and_driver():
    data = _result(SMI / "amd-smi_static_4xMI300A_amdsmi-cli-README_excerpt.txt")
    hardware = data["hardware"]
    assert (hardware["device_name"], hardware["device_count_per_node"]) == ("MI300A", 4)
    assert data["run"]["platform"] == "amd" and hardware["partition"] is None  # SPX: the whole GPU
    assert hardware["memory_per_device_gib"] == pytest.approx(64289 / 1024)
    assert hardware["driver_version"] == "6.9.0-rc5+"
    assert "amd-smi output saved in" in hardware["source"] and hardware["captured_at"] is None
    assert data["summary"]["mfu"] is None  # no datasheet peak for an MI300A: said, never guessed
    assert any("no datasheet peak for device 'MI300A'" in n for n in data["provenance"]["notes"])
    asic = _result(SMI / "amd-smi_static_--asic_MI308X_amdsmi-CHANGELOG_excerpt.txt")["hardware"]
    assert (asic["device_name"], asic["device_count_per_node"], asic["memory_per_device_gib"]) == ("MI308X", 1, None)


def test_a_file_that_names_no_device_is_one_error_line():
    done = _parse("--hardware", str(SMI / "nvidia-smi_query-gpu_clocks_csv_NeMo_resiliency_notebook_2025-03-07.csv"))
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1 and "names no GPU model" in done.stderr
    assert "rocm-smi" in done.stderr and "amd-smi static" in done.stderr and "Traceback" not in done.output


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("amd-smi_monitor_-ptumv_8xMI300X_amdsmi-CHANGELOG_excerpt.txt", "an amd-smi monitor table (GPU POWER"),
        ("amd-smi_monitor_-p-t-v_MI300X_partitioned-32-devices_amdsmi-CHANGELOG_excerpt.txt", "amd-smi monitor table"),
        ("amd-smi_metric_--usage_MI3xx_amdsmi-CHANGELOG_excerpt.txt", "amd-smi blocks (GPU 0-1) name no GPU model"),
    ],
)
def test_an_amd_smi_form_without_a_model_is_refused_naming_what_it_lacks(name, what):
    done = _parse("--hardware", str(SMI / name))
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.output
    assert what in done.stderr
    assert "`amd-smi static --asic` (its MARKET_NAME names the model)" in done.stderr
    assert "MI300X" not in done.stderr.replace(name, "")  # the model is never guessed from 196300 MB of VRAM


def test_an_xml_file_declaring_entities_is_refused_unread(tmp_path):
    xml = (SMI / "telegraf_a100-sxm4-v12_nvidia-smi_q_x.xml").read_text()
    hostile = tmp_path / "smi.xml"
    hostile.write_text(
        xml.replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', '<!DOCTYPE x [<!ENTITY e "e">]>')
    )
    done = _parse("--hardware", str(hostile))
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert "declares XML entities, which no nvidia-smi output does; not read" in done.stderr
