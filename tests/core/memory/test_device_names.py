"""Device names are matched exactly; an unknown one is refused with suggestions; the two tables agree."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.memory import MemoryEstimateError, estimate_memory, find_capacity, suggest_devices
from tprimat.memory.capacity import DEVICE_CAPACITIES, normalize_device_name, usable_capacity
from tprimat.result.peaks import DEVICE_PEAKS, find_device, lookup_peak
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
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA GH200 120GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
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
        "NVIDIA GH200 144G HBM3e",  # the 144 GB HBM3e GH200: more memory than the table's 96 GB part
        "NVIDIA A100-SXM4-40GB",  # the table's A100 is the 80GB model
        "TPU v5",
    ],
)
def test_names_that_are_not_a_known_device_exactly_have_no_capacity(name):
    assert find_capacity(name) is None


def test_suggestions_are_the_closest_known_devices():
    assert suggest_devices("H1000") == ["H100-SXM"]
    assert suggest_devices("MI300") == ["MI300X"]
    assert suggest_devices("TPU v5") == []


def test_every_name_in_the_capacity_table_names_one_device():
    owner: dict[str, str] = {}
    for row in DEVICE_CAPACITIES:
        for name in (row.key, *row.names):
            assert owner.setdefault(normalize_device_name(name), row.key) == row.key, name


def test_the_capacity_and_peaks_tables_know_the_same_devices_by_the_same_names():
    assert sorted(row.key for row in DEVICE_CAPACITIES) == sorted(row.key for row in DEVICE_PEAKS)
    for row in DEVICE_CAPACITIES:
        for name in (row.key, *row.names):
            peak = find_device(name)
            assert peak is not None and peak.key == row.key, (name, row.key, peak and peak.key)


def test_gh200_has_its_own_row_in_the_peaks_table_with_the_hopper_gpus_peak():
    found = lookup_peak("NVIDIA GH200 480GB", "bf16")
    assert (found.device_key, found.tflops) == ("GH200", 989.4)
    assert lookup_peak("NVIDIA H100 80GB HBM3", "bf16").device_key == "H100-SXM"
