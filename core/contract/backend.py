"""What a backend is, what it needs, and whether this machine has it.

A plugin declares its backends as :class:`BackendSpec` objects through the
``register_backends`` hook.  Availability is decided from cheap facts only
(``importlib.util.find_spec`` of top-level modules, ``shutil.which``,
environment variables, device nodes), never by importing a framework, so
``tprimat backends`` stays fast on a laptop and inside vendor containers.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

import attrs

from tprimat.errors import TprimatError

Platform = Literal["amd", "nvidia", "any"]

#: Device checks by name: each is a cheap test of this machine's device nodes.
DEVICE_CHECKS: dict[str, Callable[[], bool]] = {
    "amd-gpu": lambda: Path("/dev/kfd").exists(),
    "nvidia-gpu": lambda: Path("/dev/nvidiactl").exists()
    or Path("/proc/driver/nvidia/version").exists(),
}


@attrs.frozen(kw_only=True)
class Requirements:
    """What a backend needs on the machine that runs it."""

    python: tuple[str, ...] = ()  # top-level importable modules, e.g. "torch", "nemo"
    executables: tuple[str, ...] = ()  # programs on PATH, e.g. "torchrun"
    env: tuple[str, ...] = ()  # environment variables naming a directory, e.g. "PRIMUS_PATH"
    devices: tuple[str, ...] = ()  # keys of DEVICE_CHECKS, e.g. "nvidia-gpu"
    hint: str = ""  # how to get what is missing (an image, an install command)

    def missing(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Everything this machine lacks, in a stable order (empty: available).

        ``environ`` replaces ``os.environ`` for the ``env`` requirements (a
        ``--megatron-path`` option stands for ``$MEGATRON_PATH``).
        """
        environ = os.environ if environ is None else environ
        lacking: list[str] = []
        for module in self.python:
            if importlib.util.find_spec(module) is None:
                lacking.append(f"python package {module}")
        for program in self.executables:
            if shutil.which(program) is None:
                lacking.append(f"executable {program}")
        for name in self.env:
            value = environ.get(name)
            if not value:
                lacking.append(f"${name}")
            elif not Path(value).is_dir():
                lacking.append(f"${name} (not a directory: {value})")
        for device in self.devices:
            check = DEVICE_CHECKS.get(device)
            if check is None:
                lacking.append(f"unknown device requirement {device!r}")
            elif not check():
                lacking.append(device)
        return lacking


@attrs.frozen(kw_only=True)
class BackendSpec:
    """One platform/framework pair a plugin can train and measure."""

    name: str = attrs.field(validator=attrs.validators.matches_re(r"^[a-z][a-z0-9_]*$"))
    platform: Platform = attrs.field(validator=attrs.validators.in_(("amd", "nvidia", "any")))
    framework: str
    description: str
    requires: Requirements = Requirements()


@attrs.frozen(kw_only=True)
class Availability:
    """``available``, ``missing: <what>`` or ``error: <why>`` for one backend."""

    state: Literal["available", "missing", "error"]
    detail: str = ""
    hint: str = ""

    def __str__(self) -> str:
        return self.state if self.state == "available" else f"{self.state}: {self.detail}"


def check_availability(
    spec: BackendSpec, environ: Mapping[str, str] | None = None
) -> Availability:
    """Whether ``spec`` can run on this machine, from cheap checks only."""
    try:
        lacking = spec.requires.missing(environ)
    except Exception as exc:  # a broken finder or odd environment must not break listing
        return Availability(state="error", detail=f"{type(exc).__name__}: {exc}")
    if lacking:
        return Availability(state="missing", detail=", ".join(lacking), hint=spec.requires.hint)
    return Availability(state="available")


class BackendUnavailableError(TprimatError):
    """A backend whose framework, tools or devices this machine lacks (exit code 2)."""


def require_available(spec: BackendSpec, environ: Mapping[str, str] | None = None) -> None:
    """Raise a one-line :class:`BackendUnavailableError`: what is missing, how to get it."""
    availability = check_availability(spec, environ)
    if availability.state == "available":
        return
    message = f"backend {spec.name} ({spec.framework}) cannot run on this machine: "
    message += f"{availability.state}: {availability.detail}"
    if availability.hint:
        message += f". To get it: {availability.hint}"
    raise BackendUnavailableError(message)
