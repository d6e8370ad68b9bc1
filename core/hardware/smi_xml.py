"""Read ``nvidia-smi -q -x``: the full device query as XML, as users and monitoring agents save it.

It states what the table states and more, without a width that cuts names short:
the product name, the driver and CUDA versions, each GPU's memory (``<total>81920 MiB</total>``),
its MIG mode and, with MIG enabled, each MIG device's memory and SM count.  The values are
returned in the units the file states (MiB), as :class:`tprimat.hardware.smi_text.SmiText`,
so a saved XML and a saved table become the same hardware record.

The file comes from elsewhere, so it is read with care: the standard library's expat parser
never fetches the DTD the document names (``<!DOCTYPE nvidia_smi_log SYSTEM
"nvsmi_device_v12.dtd">``) nor any external entity; a document that declares entities of
its own (an ``nvidia-smi`` output never does: it is how entity-expansion attacks start) or
is larger than :data:`MAX_CHARS` is refused before it is parsed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from tprimat.hardware.smi_text import MigDevice, SmiGpu, SmiText

#: Largest document parsed: ``nvidia-smi -q -x`` is about 20 KB per GPU (and per MIG device group).
MAX_CHARS = 4 * 1024 * 1024
ROOT = "nvidia_smi_log"
TOOL = "nvidia-smi -q -x"
_DECLARES_ENTITY = re.compile(r"<!ENTITY", re.IGNORECASE)


class SmiXmlError(ValueError):
    """An ``nvidia-smi -q -x`` document refused before parsing (too large, or declaring entities)."""


def looks_like_nvidia_smi_xml(text: str) -> bool:
    """Whether ``text`` is an XML document whose root is ``<nvidia_smi_log>`` (judged from its start)."""
    head = text.lstrip()[:4096]
    return head.startswith("<") and f"<{ROOT}" in head


def parse_nvidia_smi_xml(text: str) -> SmiText | None:
    """The GPUs ``nvidia-smi -q -x`` lists; None when ``text`` is not such a document.

    :class:`SmiXmlError` for a document refused unread (larger than :data:`MAX_CHARS`, or
    declaring entities).
    """
    if not looks_like_nvidia_smi_xml(text):
        return None
    if len(text) > MAX_CHARS:
        raise SmiXmlError(f"{len(text)} characters is larger than any nvidia-smi -q -x output ({MAX_CHARS} at most)")
    if _DECLARES_ENTITY.search(text):
        raise SmiXmlError("the document declares XML entities, which no nvidia-smi output does; not read")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return None
    if root.tag != ROOT:
        return None
    gpus: list[SmiGpu] = []
    migs: list[MigDevice] = []
    for index, gpu in enumerate(root.findall("gpu")):
        mig_mode = _text(gpu, "mig_mode/current_mig")
        gpus.append(
            SmiGpu(
                index=index,
                name=_text(gpu, "product_name"),
                memory_total_mib=_mib(gpu, "fb_memory_usage/total"),
                memory_used_mib=_mib(gpu, "fb_memory_usage/used"),
                mig_mode=mig_mode,
                uuid=_text(gpu, "uuid"),
            )
        )
        if mig_mode == "Enabled":
            migs += [_mig_device(index, device) for device in gpu.iterfind("mig_devices/mig_device")]
    if not gpus:
        return None
    return SmiText(
        tool=TOOL,
        gpus=tuple(gpus),
        mig_devices=tuple(migs),
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
    )


def _mig_device(gpu: int, device: ElementTree.Element) -> MigDevice:
    index = _integer(device, "index")
    sm_count = _integer(device, "device_attributes/shared/multiprocessor_count")
    return MigDevice(
        gpu=gpu,
        index=index if index is not None else 0,
        gpu_instance=_integer(device, "gpu_instance_id"),
        compute_instance=_integer(device, "compute_instance_id"),
        memory_total_mib=_mib(device, "fb_memory_usage/total"),
        memory_used_mib=_mib(device, "fb_memory_usage/used"),
        sm_count=sm_count,
    )


def _text(element: ElementTree.Element, path: str) -> str | None:
    """The element's text, None where it is absent, empty or ``N/A``."""
    found = element.find(path)
    value = (found.text or "").strip() if found is not None else ""
    return value if value and value != "N/A" else None


def _integer(element: ElementTree.Element, path: str) -> int | None:
    value = _text(element, path)
    return int(value) if value is not None and value.isdigit() else None


def _mib(element: ElementTree.Element, path: str) -> float | None:
    """``81920 MiB`` as 81920.0; None for another unit or none."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*MiB", _text(element, path) or "")
    return float(match.group(1)) if match else None
