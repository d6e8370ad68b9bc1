"""Which machine is this?  The built-in ``detect_platform`` fallback.

Hardware identity is captured where a run happens and stored in its
manifest; it is never taken from the machine that parses a log.  This
fallback asks the vendors' command-line tools (``nvidia-smi``, ``amd-smi`` or
``rocm-smi``) and device nodes, and never imports torch, so it works in any
container and on a laptop.  Parsing is split from probing so that real tool
outputs can be tested without the tools.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform as _stdlib_platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Literal

import attrs

from tprimat import hookimpl

GIB = 2**30
MIB = 2**20


@attrs.frozen(kw_only=True)
class PlatformInfo:
    """What ``detect_platform`` found on this machine."""

    platform: Literal["amd", "nvidia", "cpu"]
    device_name: str | None = None
    device_count: int = 0
    memory_per_device_gib: float | None = None
    driver_version: str | None = None
    stack: Literal["rocm", "cuda"] | None = None
    stack_version: str | None = None
    hostname: str | None = None
    cpu: str | None = None
    source: str = ""  # the tool that answered, e.g. "nvidia-smi"
    notes: tuple[str, ...] = ()


def parse_nvidia_smi_query(text: str) -> list[dict[str, str]]:
    """Rows of ``nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,nounits``.

    Accepts output with or without the header line and with or without units.
    """
    rows = []
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) < 3 or cells[0].lower() == "name":
            continue
        rows.append({"name": cells[0], "memory_mib": cells[1], "driver": cells[2]})
    return rows


def parse_cuda_version(text: str) -> str | None:
    """The ``CUDA Version: X.Y`` from ``nvidia-smi``'s table header."""
    match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return match.group(1) if match else None


def parse_rocm_smi_json(text: str) -> tuple[list[dict[str, str]], str | None]:
    """Cards and driver version from ``rocm-smi --showproductname --showmeminfo vram --json``."""
    data = json.loads(text)
    cards = [v for k, v in sorted(data.items()) if k.startswith("card") and isinstance(v, dict)]
    system = data.get("system") or {}
    return cards, system.get("Driver version")


def _rocm_card_name(card: dict[str, str]) -> str | None:
    for key in ("Card Series", "Card series", "Device Name", "Card Model", "Card model"):
        value = card.get(key)
        if value and value != "N/A":
            return value
    return None


def _run(argv: list[str], timeout: float = 10.0) -> str | None:
    """stdout of a short-lived tool, or None if it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _stdlib_platform.processor() or None


def _host_memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / GIB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _detect_nvidia() -> PlatformInfo | None:
    query = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                  "--format=csv,noheader,nounits"])
    if not query:
        return None
    rows = parse_nvidia_smi_query(query)
    if not rows:
        return None
    names = sorted({r["name"] for r in rows})
    notes = (f"mixed devices: {', '.join(names)}",) if len(names) > 1 else ()
    try:
        memory = int(float(rows[0]["memory_mib"])) * MIB / GIB
    except ValueError:
        memory = None
    return PlatformInfo(
        platform="nvidia",
        device_name=rows[0]["name"],
        device_count=len(rows),
        memory_per_device_gib=memory,
        driver_version=rows[0]["driver"],
        stack="cuda",
        stack_version=parse_cuda_version(_run(["nvidia-smi"]) or ""),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="nvidia-smi",
        notes=notes,
    )


def _rocm_version() -> str | None:
    for candidate in (Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version",):
        try:
            return candidate.read_text().strip() or None
        except OSError:
            continue
    return None


def _detect_amd() -> PlatformInfo | None:
    if not Path("/dev/kfd").exists():
        return None
    text = _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram",
                 "--showdriverversion", "--json"])
    cards: list[dict[str, str]] = []
    driver = None
    notes: tuple[str, ...] = ()
    if text:
        try:
            cards, driver = parse_rocm_smi_json(text)
        except (json.JSONDecodeError, AttributeError):
            notes = ("rocm-smi printed JSON tprimat could not read",)
    else:
        notes = ("/dev/kfd present but rocm-smi is missing or failed: device details unknown",)
    memory = None
    if cards and cards[0].get("VRAM Total Memory (B)", "").isdigit():
        memory = int(cards[0]["VRAM Total Memory (B)"]) / GIB
    return PlatformInfo(
        platform="amd",
        device_name=_rocm_card_name(cards[0]) if cards else None,
        device_count=len(cards),
        memory_per_device_gib=memory,
        driver_version=driver,
        stack="rocm",
        stack_version=_rocm_version(),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="rocm-smi" if text else "/dev/kfd",
        notes=notes,
    )


def detect() -> PlatformInfo:
    """This machine: an NVIDIA or AMD GPU node if the tools say so, else the CPU."""
    found = _detect_nvidia() or _detect_amd()
    if found is not None:
        return found
    return PlatformInfo(
        platform="cpu",
        device_name=cpu_model(),
        device_count=os.cpu_count() or 1,
        memory_per_device_gib=_host_memory_gib(),
        hostname=socket.gethostname(),
        cpu=cpu_model(),
        source="/proc",
        notes=("no GPU found (no nvidia-smi answer, no /dev/kfd)",),
    )


class BuiltinPlatformPlugin:
    """The fallback every installation has; plugins with better probes answer first."""

    @hookimpl(trylast=True)
    def detect_platform(self) -> PlatformInfo:
        return detect()
