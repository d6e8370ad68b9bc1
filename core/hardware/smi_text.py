"""Read the vendor tools' human-readable output: ``nvidia-smi``'s table and ``-L``, ``rocm-smi`` and ``amd-smi`` text.

The CSV and JSON forms (:mod:`tprimat.hardware.platform`, :mod:`tprimat.running.monitor`) are
preferred where tprimat runs the tool itself, but logs captured by others
usually hold the default forms: the ``nvidia-smi`` box table, ``nvidia-smi
-L``, ``rocm-smi``'s concise table and its ``GPU[0]\t\t: key: value``
listings (``rocm-smi -i``, ``--showmeminfo vram``), and ``amd-smi``'s nested
``GPU: 0`` blocks (``amd-smi static``, ``metric``, ``list``).  These parsers
read them from any text (a log around them is ignored) and return what they
state, in the units they state: nvidia-smi's ``MiB``, rocm-smi's bytes and
percentages.  Partition modes they show (the ``MIG M.`` column and ``MIG
devices:`` box, rocm-smi's ``Partitions`` column, amd-smi's ``PARTITION``
section) are kept for :mod:`tprimat.hardware.partitions`.  ``amd-smi monitor``'s
table names no device (its ``VRAM_TOTAL`` is a memory size, not a model), so it
is only recognised, to say so (:func:`amd_smi_monitor_columns`).
"""

from __future__ import annotations

import re

import attrs


@attrs.frozen(kw_only=True)
class SmiGpu:
    """One device as a text form shows it (None where the form does not say)."""

    index: int
    name: str | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    utilization_pct: float | None = None
    temperature_c: float | None = None
    mig_mode: str | None = None  # nvidia-smi "MIG M.": "Enabled", "Disabled", "N/A"
    memory_partition: str | None = None  # rocm-smi: "NPS1", "NPS4"
    compute_partition: str | None = None  # rocm-smi: "SPX", "DPX", "QPX", "CPX"
    uuid: str | None = None


@attrs.frozen(kw_only=True)
class MigDevice:
    """A MIG device: the ``MIG devices:`` box of the table, or a ``MIG …`` line of ``nvidia-smi -L``."""

    gpu: int
    index: int  # MIG device index on its GPU
    gpu_instance: int | None = None
    compute_instance: int | None = None
    profile: str | None = None  # "3g.20gb" (from -L)
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    sm_count: int | None = None
    uuid: str | None = None


@attrs.frozen(kw_only=True)
class SmiText:
    """What one text form says about the machine."""

    tool: str  # "nvidia-smi", "nvidia-smi -L", "rocm-smi"
    gpus: tuple[SmiGpu, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.search(r"-?\d+(?:\.\d+)?", text)
    return float(match.group()) if match else None


# -- nvidia-smi: the default table ---------------------------------------------------------

_NV_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>[\d.]+)\s+Driver Version:\s*(?P<driver>[\d.]+)(?:\s+CUDA Version:\s*(?P<cuda>[\d.]+))?"
)
# "|   0  NVIDIA B200                    Off |   00000000:8F:00.0 Off |                    0 |"
_NV_ROW1 = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s*\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:")
# "| N/A   38C    P0            143W / 1000W |       0MiB / 183359MiB |      0%      Default |"
_NV_ROW2 = re.compile(
    r"^\|\s*(?:\S+)\s+(?P<temp>\d+)C\s+P\d+\s+(?P<power>[\d.]+|N/A)W?\s*/\s*(?P<cap>[\d.]+|N/A)W?\s*\|"
    r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+|N/A)%?"
)
# "|                                         |                        |             Disabled |"
_NV_ROW3 = re.compile(r"^\|\s*\|\s*\|\s*(?P<mig>Enabled|Disabled|N/A)\s*\|$")
# "|  0    1   0   0  |     11MiB / 20224MiB | 42      0 |  3   0    2    0    0 |"
_NV_MIG = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s*\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB"
    r"\s*\|\s*(?P<sm>\d+)\s"
)


def _mig_row(line: str) -> MigDevice | None:
    match = _NV_MIG.match(line)
    if match is None:
        return None
    return MigDevice(
        gpu=int(match["gpu"]),
        index=int(match["dev"]),
        gpu_instance=int(match["gi"]),
        compute_instance=int(match["ci"]),
        memory_used_mib=float(match["used"]),
        memory_total_mib=float(match["total"]),
        sm_count=int(match["sm"]),
    )


def _continuation_row(line: str, gpu: dict) -> None:
    """Fill ``gpu`` from the second (temperature, power, memory) or third (MIG mode) line of its box."""
    match = _NV_ROW2.match(line)
    if match and "memory_total_mib" not in gpu:
        gpu.update(
            temperature_c=float(match["temp"]),
            power_w=_number(match["power"]),
            power_cap_w=_number(match["cap"]),
            memory_used_mib=float(match["used"]),
            memory_total_mib=float(match["total"]),
            utilization_pct=_number(match["util"]),
        )
        return
    match = _NV_ROW3.match(line)
    if match and "mig_mode" not in gpu:
        gpu["mig_mode"] = match["mig"]


def parse_nvidia_smi_table(text: str) -> SmiText | None:
    """The default ``nvidia-smi`` table (any driver's layout); None when the text holds none."""
    header = _NV_HEADER.search(text)
    gpus: list[dict] = []
    migs: list[MigDevice] = []
    in_mig_box = False
    for raw in text.splitlines():
        line = raw.strip()
        if "MIG devices:" in line:
            in_mig_box = True
            continue
        if "Processes:" in line:
            in_mig_box = False
            continue
        if in_mig_box:
            mig = _mig_row(line)
            if mig is not None:
                migs.append(mig)
            continue
        match = _NV_ROW1.match(line)
        if match:
            gpus.append({"index": int(match["index"]), "name": match["name"].strip()})
            continue
        if gpus:
            _continuation_row(line, gpus[-1])
    if header is None and not gpus and not migs:
        return None
    return SmiText(
        tool="nvidia-smi",
        gpus=tuple(SmiGpu(**g) for g in gpus),
        mig_devices=tuple(migs),
        driver_version=header["driver"] if header else None,
        cuda_version=header["cuda"] if header else None,
    )


# -- nvidia-smi -L ---------------------------------------------------------------------------

_NV_LIST_GPU = re.compile(r"^\s*GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[^)]+)\)")
_NV_LIST_MIG = re.compile(r"^\s+MIG (?P<profile>\S+)\s+Device\s+(?P<dev>\d+): \(UUID: (?P<uuid>MIG-[^)]+)\)")


def parse_nvidia_smi_list(text: str) -> SmiText | None:
    """``nvidia-smi -L``: ``GPU n: <name> (UUID: …)`` lines and the ``MIG <profile> Device n`` lines under them."""
    gpus: list[SmiGpu] = []
    migs: list[MigDevice] = []
    for line in text.splitlines():
        match = _NV_LIST_GPU.match(line)
        if match:
            gpus.append(SmiGpu(index=int(match["index"]), name=match["name"], uuid=match["uuid"]))
            continue
        match = _NV_LIST_MIG.match(line)
        if match and gpus:
            migs.append(
                MigDevice(gpu=gpus[-1].index, index=int(match["dev"]), profile=match["profile"], uuid=match["uuid"])
            )
    if not gpus:
        return None
    return SmiText(tool="nvidia-smi -L", gpus=tuple(gpus), mig_devices=tuple(migs))


# -- rocm-smi: the concise table and the key/value listings ------------------------------------

_ROCM_KV = re.compile(r"^GPU\[(?P<index>\d+)\]\s*:\s*(?P<key>[^:]+?):\s*(?P<value>.*?)\s*$")
_PARTITIONS = re.compile(r"\b(?P<mem>NPS\d|N/A)\s*,\s*(?P<compute>SPX|DPX|TPX|QPX|CPX|N/A)\b")
_CONCISE_ROW = re.compile(r"^(?P<index>\d+)\s+")
_NAME_ROW = re.compile(r"^\s{4,}(?P<name>\S.*\S)\s*$")


def parse_rocm_smi_keys(text: str) -> dict[int, dict[str, str]]:
    """``GPU[i]\t\t: Key: value`` lines (``rocm-smi -i``, ``--showmeminfo vram``, …) by device index."""
    found: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        match = _ROCM_KV.match(line.strip())
        if match:
            found.setdefault(int(match["index"]), {})[match["key"].strip()] = match["value"].strip()
    return found


def parse_rocm_smi_concise(text: str) -> SmiText | None:
    """``rocm-smi``'s default "Concise Info" table, with or without the second name line per device.

    Columns are found by their values, not their positions (ROCm releases move
    them): temperature ``°C``, power ``W``, the ``Partitions`` pair
    (``NPS1, SPX``), and the last two percentages (``VRAM%``, ``GPU%``).
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Concise Info" in line), None)
    if start is None:
        return None
    gpus: list[dict] = []
    for line in lines[start + 1 :]:
        if "End of ROCm SMI Log" in line:
            break
        if line.startswith("=") or not line.strip():
            continue
        row = _CONCISE_ROW.match(line)
        if row:
            percentages = re.findall(r"(\d+(?:\.\d+)?)%", line)
            partitions = _PARTITIONS.search(line)
            temp = re.search(r"(\d+(?:\.\d+)?)\s*°C", line)
            power = re.findall(r"(\d+(?:\.\d+)?)W\b", line)
            gpus.append(
                {
                    "index": int(row["index"]),
                    "temperature_c": float(temp.group(1)) if temp else None,
                    "power_w": float(power[0]) if power else None,
                    "power_cap_w": float(power[1]) if len(power) > 1 else None,
                    "memory_partition": partitions["mem"] if partitions else None,
                    "compute_partition": partitions["compute"] if partitions else None,
                    "utilization_pct": float(percentages[-1]) if percentages else None,
                }
            )
            continue
        name = _NAME_ROW.match(line)
        if name and gpus and "name" not in gpus[-1] and "(" not in name["name"]:
            gpus[-1]["name"] = name["name"]
    if not gpus:
        return None
    return SmiText(tool="rocm-smi", gpus=tuple(SmiGpu(**g) for g in gpus))


def parse_rocm_smi_text(text: str) -> SmiText | None:
    """Everything rocm-smi's text forms in ``text`` say: the concise table merged with the key/value listings."""
    concise = parse_rocm_smi_concise(text)
    keys = parse_rocm_smi_keys(text)
    if concise is None and not keys:
        return None
    by_index = {g.index: g for g in concise.gpus} if concise else {}
    for index, values in keys.items():
        gpu = by_index.get(index) or SmiGpu(index=index)
        total = values.get("VRAM Total Memory (B)")
        used = values.get("VRAM Total Used Memory (B)")
        power = next((v for k, v in values.items() if k.endswith("Power (W)")), None)
        use = values.get("GPU use (%)")
        by_index[index] = attrs.evolve(
            gpu,
            name=values.get("Device Name") or values.get("Card Series") or gpu.name,
            memory_total_mib=int(total) / 2**20 if total and total.isdigit() else gpu.memory_total_mib,
            memory_used_mib=int(used) / 2**20 if used and used.isdigit() else gpu.memory_used_mib,
            power_w=_number(power) if power else gpu.power_w,
            utilization_pct=_number(use) if use else gpu.utilization_pct,
        )
    return SmiText(tool="rocm-smi", gpus=tuple(by_index[i] for i in sorted(by_index)))


# -- amd-smi: the nested ``GPU: n`` blocks and the monitor table ---------------------------------

_AMD_BLOCK = re.compile(r"^(?P<kind>[A-Z]+):\s*(?P<index>\d+)\s*$")  # "GPU: 0", "CPU: 0" at column 0
_AMD_KEY = re.compile(r"^(?P<indent>\s+)(?P<key>[A-Za-z][A-Za-z0-9_ ]*?)\s*:\s*(?P<value>.*?)\s*$")
# "GPU  POWER  GPU_TEMP  MEM_TEMP  VRAM_USED  VRAM_TOTAL"
_AMD_MONITOR_HEADER = re.compile(r"^\s*GPU(?:\s{2,}[A-Z][A-Z0-9_]*)+\s*$")


def parse_amd_smi_keys(text: str) -> dict[int, dict[str, str]]:
    """amd-smi's nested text by GPU index: ``SECTION.KEY`` -> value (``ASIC.MARKET_NAME``, ``VRAM.SIZE``).

    Keys are upper-cased, with spaces as underscores (``PROTO VERSION``); ``CPU: n`` blocks,
    the continuation lines of wrapped lists and text around the blocks are skipped.
    """
    found: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    sections: list[tuple[int, str]] = []  # (indent, name) of the sections the next key is in
    for line in text.splitlines():
        block = _AMD_BLOCK.match(line)
        if block:
            current = found.setdefault(int(block["index"]), {}) if block["kind"] == "GPU" else None
            sections = []
            continue
        if line.strip() and not line[0].isspace():
            current = None  # text outside the blocks ends the one before
            continue
        match = _AMD_KEY.match(line)
        if current is None or match is None:
            continue
        indent = len(match["indent"].expandtabs())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        key = match["key"].strip().upper().replace(" ", "_")
        if match["value"]:
            current[".".join([*(name for _, name in sections), key])] = match["value"]
        else:
            sections.append((indent, key))
    return found


def _stated(value: str | None) -> str | None:
    return value if value and value != "N/A" else None


def _amd_smi_mib(size: str | None) -> float | None:
    """``VRAM.SIZE``: amd-smi prints ``64289 MB`` for the bytes divided by 2^20 (amdsmi's
    ``amdsmi_get_gpu_vram_info``, ``src/amd_smi/amd_smi.cc``), so its "MB" are MiB."""
    match = re.fullmatch(r"(\d+)\s*MB", size or "")
    return float(match.group(1)) if match else None


def parse_amd_smi_text(text: str) -> SmiText | None:
    """The devices amd-smi's ``GPU: n`` blocks describe (``static``, ``static --asic``, ``metric``, ``list``).

    Only ``static`` names the model (``ASIC.MARKET_NAME``) and gives the memory (``VRAM.SIZE``),
    the driver (``DRIVER.VERSION``) and the partition modes (``PARTITION.COMPUTE_PARTITION``,
    ``MEMORY_PARTITION``); the other forms give devices without a name.
    """
    keys = parse_amd_smi_keys(text)
    if not keys:
        return None
    gpus = tuple(
        SmiGpu(
            index=index,
            name=_stated(values.get("ASIC.MARKET_NAME")),
            memory_total_mib=_amd_smi_mib(values.get("VRAM.SIZE")),
            compute_partition=_stated(values.get("PARTITION.COMPUTE_PARTITION")),
            memory_partition=_stated(values.get("PARTITION.MEMORY_PARTITION")),
        )
        for index, values in sorted(keys.items())
    )
    drivers = {_stated(values.get("DRIVER.VERSION")) for values in keys.values()} - {None}
    return SmiText(tool="amd-smi", gpus=gpus, driver_version=drivers.pop() if len(drivers) == 1 else None)


def amd_smi_monitor_columns(text: str) -> tuple[str, ...] | None:
    """The columns of an ``amd-smi monitor`` table in ``text`` (``GPU``, ``POWER``, ``VRAM_TOTAL``...), or None."""
    for line in text.splitlines():
        if _AMD_MONITOR_HEADER.match(line):
            return tuple(line.split())
    return None
