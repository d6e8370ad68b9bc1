"""Device names are matched exactly against the one device table; an unknown one is refused with suggestions."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.hardware.devices import DEVICES, find_device, identify_device, normalize_device_name
from tprimat.memory import MemoryEstimateError, estimate_memory, find_capacity, suggest_devices
from tprimat.memory.capacity import usable_capacity
from tprimat.result.peaks import lookup_bandwidth, lookup_peak
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

LLAMA = get_model("llama3.1-8b")


def _estimate(*args: str):
    return CliRunner().invoke(cli, ["memory", "estimate", "--model", "llama3.1-8b", *args])


def test_a_mistyped_device_is_refused_with_a_suggestion_not_taken_for_an_h100():
    done = _estimate("--device", "H1000")
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert "no memory capacity known for device 'H1000'" in done.output and "did you mean H100-SXM?" in done.output
    assert find_capacity("H1000") is None and find_device("H1000") is None


def test_gb200_is_not_given_the_b200s_capacity_or_peak():
    for name in ("GB200", "NVIDIA GB200"):
        assert find_capacity(name) is None
        with pytest.raises(MemoryEstimateError, match="did you mean B200 or GH200"):
            estimate_memory(load_config(), LLAMA, device=name)
        assert lookup_peak(name, "bf16").tflops is None  # no MFU from the B200's datasheet either
    assert _estimate("--device", "GB200").exit_code == 2
    # On a GB200 machine the run's pre-flight check uses the measured memory, not the B200's 178.35 GiB.
    assert usable_capacity("NVIDIA GB200", 184.0) == 184.0


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("H100", "H100-SXM"),
        ("h100-sxm", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100-SXM"),  # the whole GPU's row (the MIG check refuses it)
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("H200-NVL", "H200-NVL"),
        ("NVIDIA H200", "H200-SXM"),
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA GH200 120GB", "GH200-96GB"),
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("MI300X", "MI300X"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI250X/MI250", "MI250X"),
    ],
)
def test_names_as_vendor_tools_print_them_and_short_forms_are_known(name, key):
    assert find_capacity(name).key == key


@pytest.mark.parametrize(
    "name",
    [
        "H1000",
        "H100X",
        "MI300",
        "MI3000X",
        "GH200",  # 96 GB HBM3 or 144 GB HBM3e: the name does not say which
        "A100",  # 40GB or 80GB
        "NVIDIA A100-SXM4-40GB",  # the table has no capacity for the 40GB model
        "TPU v5",
    ],
)
def test_names_that_are_not_a_known_device_exactly_have_no_capacity(name):
    assert find_capacity(name) is None


def test_suggestions_are_the_closest_known_devices():
    assert suggest_devices("H1000") == ["H100-SXM"]
    assert suggest_devices("MI300") == ["MI300X"]
    assert suggest_devices("TPU v5") == []


def test_every_name_in_the_device_table_names_one_device():
    owner: dict[str, str] = {}
    for device in DEVICES:
        names = [device.key, *device.names] + [n for m in device.memories for n in (m.key, *m.names)]
        for name in names:
            assert owner.setdefault(normalize_device_name(name), device.key) == device.key, name
            assert find_device(name) is device, name


def test_a_name_that_does_not_say_the_memory_gets_the_peak_and_no_capacity_or_bandwidth():
    """GH200 ships with 96 GB HBM3 (4 TB/s) or 144 GB HBM3e (4.9 TB/s), one Hopper GPU; "GH200" does not say which."""
    assert identify_device("GH200").memory is None
    assert lookup_peak("GH200", "bf16").tflops == 989.4
    assert lookup_bandwidth("GH200").tbs is None and "GH200-96GB or GH200-144GB" in lookup_bandwidth("GH200").note
    with pytest.raises(MemoryEstimateError, match="does not say which GH200"):
        estimate_memory(load_config(), LLAMA, device="GH200")
    assert estimate_memory(load_config(), LLAMA, device="GH200", capacity_gib=95).capacity_gib == 95
    assert (
        find_capacity("NVIDIA GH200 480GB").capacity_gib == 95.0 and lookup_bandwidth("NVIDIA GH200 480GB").tbs == 4.0
    )
    hbm3e = find_capacity("NVIDIA GH200 144G HBM3e")
    assert hbm3e.capacity_gib == pytest.approx(144e9 / 2**30, abs=0.01) and not hbm3e.runtime
    assert lookup_bandwidth("NVIDIA GH200 144G HBM3e").tbs == 4.9


def test_gh200_names_have_the_hopper_gpus_peak():
    for name in ("NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e"):
        found = lookup_peak(name, "bf16")
        assert (found.device_key, found.tflops) == ("GH200", 989.4)
    assert lookup_peak("NVIDIA H100 80GB HBM3", "bf16").device_key == "H100-SXM"


def test_every_device_has_a_vendor_a_bf16_peak_and_sourced_memory_figures():
    for device in DEVICES:
        assert device.vendor in ("amd", "nvidia") and device.tflops["bf16"] > 0 and device.peaks_source
        assert device.memories, device.key
        for memory in device.memories:
            assert memory.capacity_gib is None or (memory.capacity_source and 10 < memory.capacity_gib < 400)
            assert (memory.bandwidth_tbs is None) == (memory.bandwidth_source is None), memory.key
