"""What a backend is, what it needs, and whether this machine has it.

A plugin declares its backends as :class:`BackendSpec` objects through the
``register_backends`` hook.  A spec is everything the core knows about a
backend without calling its hooks: the platform it runs on, where it is the
default, the launch options it takes (rendered into ``tprimat run --help``),
how to recognise its logs (:attr:`BackendSpec.sniff`) and how many leading
iterations its logs fold start-up into (:class:`WarmupRule`).  The core never
names a backend; it reads these declarations.

Availability is decided from cheap facts only (``importlib.util.find_spec``
of top-level modules, ``shutil.which``, environment variables, device nodes),
never by importing a framework, so ``tprimat backends`` stays fast on a laptop
and inside vendor containers.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tprimat.errors import TprimatError
from tprimat.settings.trainers import TRAINERS, Trainer

if TYPE_CHECKING:
    from tprimat.contract.exporter import ExporterSpec
    from tprimat.contract.readback import SettingsReadback
    from tprimat.contract.records import LogFact, RankPeak

Platform = Literal["amd", "nvidia", "any"]

#: Device checks by name: each is a cheap test of this machine's device nodes.
DEVICE_CHECKS: dict[str, Callable[[], bool]] = {
    "amd-gpu": lambda: Path("/dev/kfd").exists(),
    "nvidia-gpu": lambda: Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia/version").exists(),
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
class LaunchOption:
    """A ``tprimat run`` option a backend takes, e.g. ``--megatron-path`` (``name="megatron_path"``).

    The option appears in ``tprimat run --help``, is forwarded to every node by
    ``--slurm``, and reaches the backend in ``LaunchContext.options[name]``.
    ``env`` names the environment variable it stands for: when the option is
    not given, the variable's value is used, and a requirement on that variable
    counts as met when the option is given.
    """

    name: str = attrs.field(validator=attrs.validators.matches_re(r"^[a-z][a-z0-9_]*$"))
    help: str
    env: str | None = None
    kind: Literal["path", "text", "int"] = "text"  # path: an existing directory

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@attrs.frozen(kw_only=True)
class LogMatch:
    """A backend's answer to "is this log yours?": how sure, and the lines that say so."""

    confidence: float = attrs.field(validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)])
    evidence: str  # e.g. "Megatron iteration line at train.log:812, ROCm version at train.log:3"


#: ``sniff(lines, source)``: the first lines of a log file (at most ``SNIFF_LINES``) and the
#: file's name; returns a :class:`LogMatch` or None.  Must be cheap and pure: no imports of
#: frameworks, no I/O.
Sniffer = Callable[[Sequence[str], str], "LogMatch | None"]

#: ``explain(head, tail)``: the first and last lines of a file in which no training iteration
#: was found; returns what it most likely is in this backend's terms (e.g. "a Megatron-LM
#: start-up log that ends before the first iteration line"), or None.
Explainer = Callable[[Sequence[str], Sequence[str]], "str | None"]

#: How many leading lines of a file a sniffer sees.
SNIFF_LINES = 4000
#: How many leading lines of each file ``BackendSpec.stated_facts`` sees.
STATED_LINES = 5000


@attrs.frozen(kw_only=True)
class WarmupRule:
    """How many leading iterations of this backend's logs are never steady state, and why.

    The core leaves at least ``min_iterations`` out of the statistics (more if the
    config asks), and records ``reason`` in the result when the rule raised the count.
    """

    min_iterations: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    reason: str = ""


@attrs.frozen(kw_only=True)
class BackendSpec:
    """One platform/framework pair a plugin can train and measure, and what the core needs to know of it."""

    name: str = attrs.field(validator=attrs.validators.matches_re(r"^[a-z][a-z0-9_]*$"))
    platform: Platform = attrs.field(validator=attrs.validators.in_(("amd", "nvidia", "any")))
    framework: str
    description: str
    requires: Requirements = Requirements()
    #: Launch options the backend takes (``tprimat run --<name>``).
    options: tuple[LaunchOption, ...] = ()
    #: Platforms ("amd", "nvidia", "cpu") on which ``tprimat run`` picks this backend when no
    #: ``--backend`` is given and it is usable.  ``TPRIMAT_DEFAULT_BACKEND`` overrides it.
    default_for: tuple[str, ...] = ()
    #: Recognises this backend's logs for ``tprimat parse`` (None: never auto-detected).
    sniff: Sniffer | None = attrs.field(default=None, eq=False)
    warmup: WarmupRule = WarmupRule()
    #: What ``tprimat tune`` may search: a config key ("training.micro_batch_size") or a
    #: framework switch of this backend ("<backend>.<key>", applied like a tuned preset's
    #: overrides) -> its allowed values (None: the core derives them from the config).
    #: Only settings that change speed, never the training math.
    tunables: Mapping[str, tuple[Any, ...] | None] = attrs.field(factory=dict, eq=False)
    #: Reads the per-rank memory peaks a log file of this backend reports (allocator or
    #: driver lines); the result shows them beside the memory estimate (None: none read).
    memory_peaks: Callable[[Path], Sequence[RankPeak]] | None = attrs.field(default=None, eq=False)
    #: Says what a file of this backend's framework with no training iteration most likely is.
    explain: Explainer | None = attrs.field(default=None, eq=False)
    #: Recognises a directory laid out by this backend's framework (e.g. one directory per
    #: rank) and returns the files to read, oldest first, with a note; None: not its layout.
    find_logs: Callable[[Path], tuple[list[Path], str] | None] | None = attrs.field(default=None, eq=False)
    #: The stream a log file belongs to (one process's log and its rotations), as any value
    #: that compares equal for the files of one stream, or None for a file of its own.  Files
    #: next to each other in the list read, and of one stream, are read as one: each file
    #: continues the parser's state at the end of the one before (None: each file on its own).
    log_stream: Callable[[Path], Hashable | None] | None = attrs.field(default=None, eq=False)
    #: Reads what the start of a log file states about the run outside the iteration lines
    #: (argument dumps, echoed command lines, config dumps): ``(lines, source, parsed facts)``
    #: -> (facts, notes).  A fact ``profiled_iterations`` marks those iterations profiled.
    stated_facts: Callable[[Sequence[str], str, Mapping[str, Any]], tuple[list[LogFact], list[str]]] | None = (
        attrs.field(default=None, eq=False)
    )
    #: How its trainer keeps model and optimizer state (see :data:`tprimat.settings.trainers.Trainer`):
    #: the memory estimate's layout of weights, gradients and optimizer states.
    trainer: Trainer = attrs.field(default="megatron-core", validator=attrs.validators.in_(TRAINERS))
    #: The framework settings this backend derives from config fields (or the model registry):
    #: setting -> field, e.g. ``"global_batch_size": "training.global_batch_size"``,
    #: ``"--global-batch-size": "training.global_batch_size"``, ``"num_layers": "model.num_layers"``.
    #: Keys are spelled as a tuned preset's ``overrides`` keys or ``args`` flags would spell them;
    #: the core refuses a preset that sets one of them, naming the field that owns it.
    config_owned: Mapping[str, str] = attrs.field(factory=dict, eq=False)
    #: Reads back what the framework says it ran with (its argument dump, its resolved config)
    #: and compares it with the rendered settings, after a run and in ``tprimat parse``.
    readback: SettingsReadback | None = attrs.field(default=None, eq=False)


@attrs.frozen(kw_only=True)
class Availability:
    """``available``, ``missing: <what>`` or ``error: <why>`` for one backend."""

    state: Literal["available", "missing", "error"]
    detail: str = ""
    hint: str = ""

    def __str__(self) -> str:
        return self.state if self.state == "available" else f"{self.state}: {self.detail}"


def option_environ(
    spec: BackendSpec, options: Mapping[str, object], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a requirement check sees: a given option counts as its variable."""
    merged = dict(os.environ if environ is None else environ)
    for option in spec.options:
        if option.env and options.get(option.name):
            merged[option.env] = str(options[option.name])
    return merged


def check_availability(spec: BackendSpec | ExporterSpec, environ: Mapping[str, str] | None = None) -> Availability:
    """Whether ``spec`` (a backend, or an exporter) can be used on this machine, from cheap checks only."""
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
