"""``tprimat parse LOG --hardware FILE``: the device from a saved nvidia-smi/rocm-smi output, said to be from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

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


def test_a_file_that_names_no_device_is_one_error_line():
    done = _parse("--hardware", str(SMI / "amd-smi_monitor_-ptumv_8xMI300X_amdsmi-CHANGELOG_excerpt.txt"))
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1 and "names no GPU model" in done.stderr
    assert "rocm-smi" in done.stderr and "Traceback" not in done.output
