import pytest

from tprimat.hardware.devices import DEVICES
from tprimat.result.peaks import PEAKS_VERSION, lookup_peak


@pytest.mark.parametrize(
    "name, key, bf16",
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM", 989.4),
        ("NVIDIA H100 PCIe", "H100-PCIe", 756.5),
        ("NVIDIA H100 NVL", "H100-NVL", 835.5),
        ("NVIDIA H200", "H200-SXM", 989.4),
        ("NVIDIA B200", "B200", 2250.0),
        ("AMD Instinct MI300X", "MI300X", 1307.4),
        ("AMD Instinct MI300X VF", "MI300X", 1307.4),
        ("AMD Instinct MI325X", "MI325X", 1307.4),
        ("AMD Instinct MI355X", "MI355X", 2516.6),
    ],
)
def test_device_names_as_the_tools_print_them(name, key, bf16):
    found = lookup_peak(name, "bf16")
    assert (found.device_key, found.tflops) == (key, bf16)
    assert found.table_version == PEAKS_VERSION and found.source


def test_fp8_is_twice_bf16_on_hopper_and_cdna3():
    for name in ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"):
        assert lookup_peak(name, "fp8").tflops == pytest.approx(2 * lookup_peak(name, "bf16").tflops, rel=1e-3)


def test_unknown_device_gives_no_peak_and_says_why():
    found = lookup_peak("Intel(R) Xeon(R) Processor", "bf16")
    assert found.tflops is None and "no datasheet peak" in found.note


def test_unknown_dtype_and_missing_device():
    assert lookup_peak("NVIDIA A100-SXM4-80GB", "fp8").tflops is None
    assert "device unknown" in lookup_peak(None, "bf16").note


def test_every_row_has_bf16_and_a_source():
    for row in DEVICES:
        assert row.tflops["bf16"] > 0 and row.peaks_source
