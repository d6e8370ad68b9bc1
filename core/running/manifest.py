"""The run manifest: hardware, software and environment captured where the run happens.

``tprimat run`` writes ``manifest.json`` into the run directory at launch.
``tprimat parse`` reads it (given, or found next to the log) to fill a
result's hardware and software; without one they stay null, because the
machine parsing a log is not the machine that ran it.
"""

from __future__ import annotations

import json
import os
import platform as _stdlib_platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import cattrs

from tprimat import __version__
from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.hardware.environment import performance_environment
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.schema import Hardware, Software

MANIFEST_NAME = "manifest.json"


class ManifestError(TprimatError):
    """A manifest that cannot be read."""


@attrs.frozen(kw_only=True)
class Manifest:
    tprimat_version: str
    created_at: str
    hardware: Hardware
    software: Software
    platform: str | None = None  # amd | nvidia | cpu
    environment: dict[str, str] = attrs.Factory(dict)  # performance-relevant, secrets redacted
    command: list[str] = attrs.Factory(list)
    extra: dict[str, Any] = attrs.Factory(dict)  # findings, microbench references, ...


_converter = cattrs.Converter(forbid_extra_keys=True)


def hardware_from_platform(info: PlatformInfo, *, nodes: int = 1) -> Hardware:
    """The result's hardware section from what ``detect_platform`` found here, now."""
    return Hardware(
        device_name=info.device_name,
        device_count_per_node=info.device_count,
        nodes=nodes,
        memory_per_device_gib=info.memory_per_device_gib,
        driver_version=info.driver_version,
        hostname=info.hostname,
        cpu=info.cpu,
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        source=info.source,
        partition=info.partition,
    )


def software_from_platform(info: PlatformInfo, **known: str | None) -> Software:
    """Software versions known without importing frameworks (callers add torch etc.)."""
    return Software(
        python=_stdlib_platform.python_version(),
        cuda=info.stack_version if info.stack == "cuda" else None,
        rocm=info.stack_version if info.stack == "rocm" else None,
        container_image=os.environ.get("TPRIMAT_CONTAINER_IMAGE") or known.pop("container_image", None),
        **{k: v for k, v in known.items() if v is not None},
    )


def capture_manifest(info: PlatformInfo, *, nodes: int = 1, **software: str | None) -> Manifest:
    """A manifest of this machine, now."""
    return Manifest(
        tprimat_version=__version__,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hardware=hardware_from_platform(info, nodes=nodes),
        software=software_from_platform(info, **software),
        platform=info.platform,
        environment=performance_environment(),
        command=[os.path.basename(sys.argv[0]), *sys.argv[1:]],
    )


def write_manifest(manifest: Manifest, directory: str | Path) -> Path:
    data = _converter.unstructure(manifest)
    return atomic_write_text(Path(directory) / MANIFEST_NAME, json.dumps(data, indent=2) + "\n")


def load_manifest(path: str | Path) -> Manifest:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return _converter.structure(data, Manifest)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read manifest: {exc.strerror}") from None
    except (json.JSONDecodeError, cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ManifestError(f"{path}: not a tprimat manifest ({type(exc).__name__})") from None


def find_manifest(log_path: str | Path) -> Path | None:
    """A ``manifest.json`` beside the log or in one of its parent directories (up to 3 up)."""
    start = Path(log_path).resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in [directory, *list(directory.parents)[:3]]:
        path = candidate / MANIFEST_NAME
        if path.is_file():
            return path
    return None
