"""``nvidia-smi -q -x`` read from a real saved document, and documents refused unread."""

from __future__ import annotations

import pytest

from tprimat.hardware.smi_xml import MAX_CHARS, SmiXmlError, parse_nvidia_smi_xml

A100_XML = "telegraf_a100-sxm4-v12_nvidia-smi_q_x.xml"


@pytest.fixture
def a100(fixtures) -> str:
    return (fixtures / "smi" / A100_XML).read_text()


def test_the_gpu_its_versions_and_its_mig_devices(a100):
    found = parse_nvidia_smi_xml(a100)  # names the DTD nvsmi_device_v12.dtd, which is never looked for
    assert (found.tool, found.driver_version, found.cuda_version) == ("nvidia-smi -q -x", "535.54.03", "12.2")
    (gpu,) = found.gpus
    assert (gpu.name, gpu.memory_total_mib, gpu.memory_used_mib) == ("NVIDIA A100-SXM4-80GB", 81920.0, 50.0)
    assert (gpu.mig_mode, gpu.uuid) == ("Enabled", "GPU-513536b6-7d19-9063-b049-1e69664bb298")
    assert [(m.gpu, m.index, m.gpu_instance, m.compute_instance) for m in found.mig_devices] == [
        (0, 0, 3, 0),
        (0, 1, 4, 0),
        (0, 2, 5, 0),
        (0, 3, 6, 0),
    ]
    assert {(m.memory_total_mib, m.sm_count, m.profile) for m in found.mig_devices} == {(19968.0, 14, None)}


def test_mig_devices_are_only_taken_from_a_gpu_with_mig_enabled(a100):
    disabled = a100.replace("<current_mig>Enabled</current_mig>", "<current_mig>Disabled</current_mig>")
    found = parse_nvidia_smi_xml(disabled)
    assert found.gpus[0].mig_mode == "Disabled" and found.mig_devices == ()


def test_other_text_is_not_an_nvidia_smi_document():
    assert parse_nvidia_smi_xml("GPU 0: NVIDIA B200 (UUID: GPU-1)") is None
    assert parse_nvidia_smi_xml('<?xml version="1.0"?><other><gpu/></other>') is None
    assert parse_nvidia_smi_xml("<nvidia_smi_log><gpu>") is None  # cut short: not well-formed


def test_a_document_declaring_entities_is_refused_unread():
    laughs = (
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>\n'
        "<nvidia_smi_log><gpu><product_name>&b;</product_name></gpu></nvidia_smi_log>"
    )
    with pytest.raises(SmiXmlError, match="declares XML entities"):
        parse_nvidia_smi_xml(laughs)


def test_a_document_past_the_size_bound_is_refused_unread(a100):
    with pytest.raises(SmiXmlError, match="larger than any nvidia-smi -q -x output"):
        parse_nvidia_smi_xml(a100 + " " * MAX_CHARS)
