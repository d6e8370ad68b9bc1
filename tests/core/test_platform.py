import json
import shutil

import pytest

from tprimat.hardware import platform as plat

B200_TABLE = "nvidia-smi_table_driver570_8xB200_2025-06-20_gcp-a4_gpu-recipes_excerpt.txt"


def test_nvidia_query_rows():
    text = "NVIDIA H100 80GB HBM3, 81559, 550.54.15\nNVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
    rows = plat.parse_nvidia_smi_query(text)
    assert len(rows) == 2 and rows[0] == {"name": "NVIDIA H100 80GB HBM3", "memory_mib": "81559", "driver": "550.54.15"}
    with_header = "name, memory.total [MiB], driver_version\nNVIDIA B200, 183359, 570.133.20\n"
    assert plat.parse_nvidia_smi_query(with_header)[0]["name"] == "NVIDIA B200"


def test_cuda_version_from_a_real_nvidia_smi_table(fixtures):
    text = (fixtures / "smi" / B200_TABLE).read_text()
    assert plat.parse_cuda_version(text) == "12.8"
    assert plat.parse_cuda_version("no table here") is None


def test_rocm_smi_json_from_a_real_mi100(fixtures):
    text = (fixtures / "smi" / "telegraf_mi100_rocm571_rocm-smi_json.json").read_text()
    cards, driver = plat.parse_rocm_smi_json(text)
    assert len(cards) == 6 and driver == "6.2.4"
    assert plat._rocm_card_name(cards[0]) == "Arcturus GL-XL [Instinct MI100]"
    assert int(cards[0]["VRAM Total Memory (B)"]) / plat.GIB == pytest.approx(31.984, abs=1e-3)


def _fake_tools(tmp_path, monkeypatch, scripts: dict[str, str]):
    for name, body in scripts.items():
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    for tool in ("sh", "cat", "printf"):  # what the fake tools themselves need
        (tmp_path / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(tmp_path))


def test_detect_nvidia_through_nvidia_smi(tmp_path, monkeypatch, fixtures):
    table = fixtures / "smi" / B200_TABLE
    query = "".join("NVIDIA B200, 183359, 570.133.20\n" for _ in range(8))
    _fake_tools(
        tmp_path,
        monkeypatch,
        {"nvidia-smi": (f'case "$1" in --query-gpu*) printf "{query}";; *) cat "{table}";; esac\n')},
    )
    info = plat.detect()
    assert (info.platform, info.device_name, info.device_count) == ("nvidia", "NVIDIA B200", 8)
    assert info.memory_per_device_gib == pytest.approx(183359 / 1024)
    assert (info.stack, info.stack_version, info.driver_version) == ("cuda", "12.8", "570.133.20")
    assert info.source == "nvidia-smi"


def test_detect_amd_through_rocm_smi(tmp_path, monkeypatch, fixtures):
    monkeypatch.setattr(plat, "_detect_nvidia", lambda: None)
    monkeypatch.setattr(plat.Path, "exists", lambda self: str(self) == "/dev/kfd" or plat.os.path.exists(self))
    data = fixtures / "smi" / "telegraf_mi100_rocm571_rocm-smi_json.json"
    _fake_tools(tmp_path, monkeypatch, {"rocm-smi": f'cat "{data}"\n'})
    info = plat.detect()
    assert (info.platform, info.device_count, info.stack) == ("amd", 6, "rocm")
    assert "MI100" in info.device_name and info.driver_version == "6.2.4"


def test_detect_without_any_gpu_tool_is_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(plat, "_detect_amd", lambda: None)
    info = plat.detect()
    assert info.platform == "cpu" and info.device_count >= 1 and info.notes


def test_broken_rocm_smi_json_is_noted_not_raised(tmp_path, monkeypatch):
    monkeypatch.setattr(plat, "_detect_nvidia", lambda: None)
    monkeypatch.setattr(plat.Path, "exists", lambda self: str(self) == "/dev/kfd" or plat.os.path.exists(self))
    _fake_tools(tmp_path, monkeypatch, {"rocm-smi": "echo '{not json'\n"})
    info = plat.detect()
    assert info.platform == "amd" and info.device_name is None and info.notes
    assert json.dumps(info.notes)
