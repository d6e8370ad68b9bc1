"""Preparing a run: every setting decided once, before any hook is called.

``tprimat run`` (and its dry run, suites and SLURM nodes) go through
:func:`prepare`, which decides, in this order:

1. the backend: ``--backend``, else ``TPRIMAT_DEFAULT_BACKEND``, else the
   backend that declares itself the default for this platform
   (``BackendSpec.default_for``), else one that declares itself the fallback
   (``"*"``), each only when it is usable here;
2. the platform the run targets: this machine, or, for a dry run of a backend
   whose platform this machine is not (planning an MI300X run on a laptop),
   that platform with the device named by ``--device``;
3. the config, layer by layer: the shipped defaults, the CPU preset (only when
   the run really trains on a CPU), the config file, ``--set``, the dedicated
   flags;
4. the methodology (``iso`` or a ``tuned`` preset for the target device) and
   its deviations.

The final config goes into :class:`~tprimat.contract.plans.LaunchContext`;
hooks only render it.  ``config.toml``, ``result.json``, the manifest and the
dry run all show this one config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat.contract.backend import BackendSpec, option_environ, require_available
from tprimat.contract.plans import LaunchContext, LaunchPlan, PreparedDataset, ProfilePlan
from tprimat.contract.registry import PluginError, Registry
from tprimat.errors import TprimatError
from tprimat.hardware.platform import PlatformInfo, trains_on_cpu, vendor_of_device
from tprimat.settings.config import BenchmarkConfig, ConfigError, default_config_dict, load_config
from tprimat.settings.methodology import Deviation, PresetError, Resolved, resolve, user_preset_dir
from tprimat.settings.models import ModelSpec, UnknownModelError, get_model
from tprimat.settings.trainers import Trainer

#: ``TPRIMAT_DEFAULT_BACKEND=name`` (every platform) or ``amd=name,nvidia=name,cpu=name``.
DEFAULT_BACKEND_ENV = "TPRIMAT_DEFAULT_BACKEND"
#: ``BackendSpec.default_for`` entry of a backend that is the default wherever no other is usable.
FALLBACK = "*"


class RunError(TprimatError):
    """A run that cannot start: unknown model, unusable backend, bad dataset."""


@attrs.frozen(kw_only=True)
class RunRequest:
    """What the user asked for (``tprimat run``'s options)."""

    backend: str | None = None
    model: str | None = None
    config_file: str | None = None
    overrides: tuple[str, ...] = ()
    iterations: int | None = None
    output: Path = Path("runs")
    run_id: str | None = None
    nproc_per_node: int | None = None
    nnodes: int | None = None
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    profile: bool = False
    #: Backend launch options by name (``BackendSpec.options``), e.g. ``{"megatron_path": "/opt/m"}``.
    options: dict[str, Any] = attrs.Factory(dict)
    #: The per-node run of a submitted SLURM job: its run directory exists (it holds the job).
    in_slurm_job: bool = False
    system_profiler: str | None = None  # "nsys" | "rocprofv3": every worker runs under it
    #: Plan for this device instead of this machine's (dry runs only), e.g. "MI300X".
    device: str | None = None
    #: Ask the backend's framework to record its allocator history and write snapshots into memory/.
    memory_snapshot: bool = False
    #: The user's labels of the run (``--tag KEY=VALUE``), recorded in the manifest and the result.
    tags: dict[str, str] = attrs.Factory(dict)

    def flag_overrides(self) -> list[str]:
        """The dedicated flags as ``section.key=value`` overrides (they win over ``--set``)."""
        pairs: list[tuple[str, Any]] = [
            ("benchmark.model", self.model),
            ("benchmark.iterations", self.iterations),
            ("launch.nproc_per_node", self.nproc_per_node),
            ("launch.nnodes", self.nnodes),
            ("launch.master_addr", self.master_addr),
            ("launch.master_port", self.master_port),
            ("profile.enabled", True if self.profile else None),
        ]
        return [f"{key}={json.dumps(value)}" for key, value in pairs if value is not None]


@attrs.frozen(kw_only=True)
class PreparedRun:
    """Everything decided before anything starts: what ``--dry-run`` prints and the result records."""

    request: RunRequest
    backend: str
    backend_reason: str
    trainer: Trainer  # the backend's BackendSpec.trainer (the memory estimate's layout)
    config: BenchmarkConfig  # the final config (after the methodology)
    methodology: Resolved
    layers: tuple[str, ...]  # where the config came from, lowest layer first
    model: ModelSpec
    platform: PlatformInfo  # the platform the run targets
    context: LaunchContext
    plan: LaunchPlan
    profile: ProfilePlan | None
    dataset: PreparedDataset | None
    notes: tuple[str, ...] = ()
    #: ``None``: the backend can run here; else one line saying what is missing and how to get it.
    unavailable: str | None = None

    @property
    def plan_digest(self) -> str:
        """The digest of what the framework is handed (:mod:`tprimat.running.digest`)."""
        from tprimat.running.digest import plan_digest

        return plan_digest(self.backend, self.plan, run_dir=self.run_dir, run_id=self.context.run_id)

    @property
    def run_dir(self) -> Path:
        return self.context.run_dir


# -- the backend ---------------------------------------------------------------------------


def _env_default(value: str, platform: str) -> str | None:
    """The backend ``TPRIMAT_DEFAULT_BACKEND`` names for ``platform`` (None: none for it)."""
    if "=" not in value:
        return value.strip() or None
    for item in value.split(","):
        key, _, name = item.partition("=")
        if key.strip() in (platform, FALLBACK) and name.strip():
            return name.strip()
    return None


def resolve_backend(
    registry: Registry, requested: str | None, platform: PlatformInfo, environ: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """The backend to use and why (see the module docstring for the order)."""
    if requested:
        registry.backend(requested)  # unknown or conflicting names are errors
        return requested, "requested with --backend"
    env = os.environ if environ is None else environ
    chosen = _env_default(env.get(DEFAULT_BACKEND_ENV, ""), platform.platform)
    if chosen:
        registry.backend(chosen)
        return chosen, f"{DEFAULT_BACKEND_ENV} names it for {platform.platform}"
    backends = registry.backends()
    skipped: list[str] = []
    for wanted, why in ((platform.platform, f"default backend on {platform.platform}"), (FALLBACK, "fallback")):
        declared = [name for name, entry in backends.items() if wanted in entry.spec.default_for and not entry.conflict]
        usable = [name for name in declared if backends[name].availability().state == "available"]
        if len(usable) > 1:
            raise RunError(
                f"several installed backends declare themselves the {why}: {', '.join(usable)}; "
                f"choose one with --backend or {DEFAULT_BACKEND_ENV}"
            )
        if usable:
            reason = why if not skipped else f"{why}; " + "; ".join(skipped)
            return usable[0], reason
        skipped += [f"{name} ({why}) is not usable here ({backends[name].availability()})" for name in declared]
    raise RunError(
        f"no usable backend for platform {platform.platform}"
        + (": " + "; ".join(skipped) if skipped else "")
        + "; choose one with --backend (see `tprimat backends`)"
    )


# -- the target platform and the config ------------------------------------------------------


def vendor_name(platform: str) -> str:
    return {"amd": "AMD", "nvidia": "NVIDIA"}.get(platform, platform)


def target_platform(machine: PlatformInfo, spec: BackendSpec, device: str | None) -> tuple[PlatformInfo, list[str]]:
    """The platform the run is planned for: this machine, or the backend's platform for a dry run.

    A ``--device`` of the other vendor than the backend's platform is refused: its tuned
    preset, environment and kernels would be the other vendor's.
    """
    if device:
        from tprimat.hardware.devices import device_keys, find_device, suggest_devices

        if find_device(device) is None:  # a near miss (H1000) would get another device's preset
            close = suggest_devices(device)
            raise RunError(
                f"--device {device}: not a device tprimat knows"
                + (f" (did you mean {' or '.join(close)}?)" if close else "")
                + f"; known: {', '.join(device_keys())}"
            )
    vendor = vendor_of_device(device)
    if spec.platform in ("amd", "nvidia") and vendor is not None and vendor != spec.platform:
        raise RunError(
            f"--device {device} is an {vendor_name(vendor)} device and backend {spec.name} runs on "
            f"{vendor_name(spec.platform)} GPUs; name a device of its vendor"
        )
    if spec.platform in ("amd", "nvidia") and machine.platform != spec.platform:
        note = (
            f"this machine is {machine.platform}, {spec.name} runs on {spec.platform}: "
            f"planned for {device or 'an unnamed ' + spec.platform + ' device'}"
            + ("" if device else " (--device names one)")
        )
        target = PlatformInfo(platform=spec.platform, device_name=device, source="assumed for planning")
        return target, [note]
    if device:
        target = attrs.evolve(machine, device_name=device, source="assumed for planning (--device)")
        return target, [f"planned for device {device} (--device), not this machine's {machine.device_name}"]
    return machine, []


def layered_config(request: RunRequest, target: PlatformInfo) -> tuple[BenchmarkConfig, list[str]]:
    """Defaults, the CPU preset (when the run trains on a CPU), the file, ``--set``, the flags."""
    layers = ["defaults (tprimat/settings/defaults.toml)"]
    cpu = trains_on_cpu(target)
    base = default_config_dict(cpu=cpu)
    if cpu:
        layers.append("CPU preset (tprimat/settings/cpu.toml): no GPU, the backend trains on the CPU")
    if request.config_file:
        layers.append(f"config file {request.config_file}")
    layers += [f"--set {item}" for item in request.overrides]
    flags = request.flag_overrides()
    if flags:
        layers.append("flags: " + ", ".join(flags))
    return load_config(request.config_file, [*request.overrides, *flags], base=base), layers


def preset_origin(methodology: Resolved) -> str:
    """Where a tuned preset was read from: a user preset is a file every run of this user shares."""
    if methodology.preset_file is None:
        return ", shipped with tprimat"
    return (
        f", from {methodology.preset_file}: the per-user preset directory ({user_preset_dir()}), "
        "shared by every tprimat run of this user"
    )


def resolve_options(spec: BackendSpec, given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The backend's launch options: the ones given, else the variables they stand for."""
    known = {option.name: option for option in spec.options}
    unknown = sorted(name for name, value in given.items() if value is not None and name not in known)
    if unknown:
        flags = ", ".join("--" + name.replace("_", "-") for name in unknown)
        accepted = ", ".join(option.flag for option in spec.options) or "none"
        raise RunError(f"{flags}: not an option of backend {spec.name} (it takes: {accepted})")
    options: dict[str, Any] = {}
    for name, option in known.items():
        value = given.get(name)
        if value is None and option.env and environ.get(option.env):
            value = environ[option.env]
        if value is not None:
            options[name] = value
    return options


def new_run_id(backend: str, model: str, output: Path) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{backend}-{model}"
    candidate, n = base, 1
    while (output / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _load_dataset(config: BenchmarkConfig) -> PreparedDataset | None:
    if config.data.dataset == "mock":
        return None
    try:
        from tprimat.data import load_prepared
    except ImportError:
        raise RunError(
            f"data.dataset = {config.data.dataset!r}: reading prepared datasets needs "
            "tprimat.data, which this installation lacks"
        ) from None
    return load_prepared(config.data.dataset)


# -- the whole decision ------------------------------------------------------------------------


def prepare(request: RunRequest, registry: Registry, environ: Mapping[str, str] | None = None) -> PreparedRun:
    """Decide everything and build the launch plan; starts nothing, writes nothing."""
    env = os.environ if environ is None else environ
    machine = registry.detect_platform()
    backend, reason = resolve_backend(registry, request.backend, machine, env)
    spec = registry.backend(backend).spec
    platform, notes = target_platform(machine, spec, request.device)
    layered, layers = layered_config(request, platform)
    try:
        model = get_model(layered.benchmark.model)
    except UnknownModelError as exc:
        raise RunError(str(exc)) from None
    try:
        methodology = resolve(
            layered,
            backend=backend,
            device_name=platform.device_name,
            platform=spec.platform,
            owned=spec.config_owned,
        )
    except PresetError as exc:
        raise RunError(f"{exc} (for a dry run elsewhere, name the target with --device)") from None
    if methodology.preset:
        layers.append(f"tuned preset {methodology.preset} ({methodology.source}){preset_origin(methodology)}")
    config = methodology.config
    options = resolve_options(spec, request.options, env)
    output = Path(request.output)
    run_id = request.run_id or new_run_id(backend, model.name, output)
    run_dir = (output / run_id).absolute()
    if run_dir.exists() and not request.in_slurm_job:
        raise RunError(f"run directory {run_dir} already exists; choose another --run-id")
    dataset = _load_dataset(config)
    if config.convergence.enabled and dataset is None:
        raise RunError(
            "convergence.enabled needs real tokens with a held-out split: set "
            "data.dataset to a directory made by `tprimat prepare-data`"
        )
    data = None
    if dataset is not None:
        if dataset.vocab_size > model.vocab_size:
            raise RunError(
                f"dataset {config.data.dataset} has token ids up to {dataset.vocab_size - 1}, "
                f"beyond the vocabulary of {model.name} ({model.vocab_size})"
            )
        data = registry.prepare_data(backend, dataset=dataset, config=config)
    context = LaunchContext(
        run_id=run_id,
        run_dir=run_dir,
        config=config,
        model=model,
        platform=platform,
        data=data,
        node_rank=request.node_rank,
        options=options,
        system_profiler=request.system_profiler,
        methodology=methodology,
        memory_snapshot=request.memory_snapshot,
    )
    profile = _profile_plan(registry, backend, context, request, notes)
    if profile is not None:
        context = attrs.evolve(context, profile=profile)
    plan = registry.launch(backend, context=context)
    if methodology.preset:
        iso_context = attrs.evolve(context, config=layered, methodology=Resolved(methodology="iso", config=layered))
        iso_plan = registry.launch(backend, context=iso_context)
        methodology = attrs.evolve(methodology, deviations=real_iso_deviations(methodology, iso_plan, backend))
        context = attrs.evolve(context, methodology=methodology)
    if request.system_profiler:
        capture = profile is not None and profile.capture_range
        plan, note = with_system_profiler(plan, request.system_profiler, run_dir, capture_range=capture)
        notes.append(note)
    return PreparedRun(
        request=request,
        backend=backend,
        backend_reason=reason,
        trainer=registry.backend(backend).spec.trainer,
        config=config,
        methodology=methodology,
        layers=tuple(layers),
        model=model,
        platform=platform,
        context=context,
        plan=plan,
        profile=profile,
        dataset=dataset,
        notes=tuple(notes),
        unavailable=unavailable_reason(registry, backend, options, env),
    )


def real_iso_deviations(tuned: Resolved, iso_plan: LaunchPlan, backend: str) -> tuple[Deviation, ...]:
    """The tuned run's deviations with the values the ``iso`` launch really has.

    A preset's environment variable or framework setting replaces what the iso launch
    sets (its platform environment, a value the framework's own experiment keeps); one
    whose iso value is already the tuned value is no deviation at all.
    """
    framework = iso_plan.framework
    iso_settings = {**framework.kept, **framework.rendered} if framework is not None else {}
    kept: list[Deviation] = []
    for deviation in tuned.deviations:
        area, _, key = deviation.setting.partition(".")
        iso = deviation.iso
        if area == "env":
            iso = iso_plan.env.get(key)
        elif area == backend:
            iso = iso_settings.get(key)
        if iso != deviation.tuned:
            kept.append(attrs.evolve(deviation, iso=iso))
    return tuple(kept)


def _profile_plan(
    registry: Registry, backend: str, context: LaunchContext, request: RunRequest, notes: list[str]
) -> ProfilePlan | None:
    if context.config.profile.enabled:
        return registry.profile(backend, context=context)
    if request.system_profiler != "nsys":
        return None
    try:  # a backend that can open a CUDA profiler range over the window answers with it
        candidate = registry.profile(backend, context=context)
    except PluginError as exc:
        if not isinstance(exc.__cause__, ConfigError):
            raise
        notes.append(f"no capture range: the profile window does not fit this run ({exc.__cause__})")
        return None
    return candidate if candidate is not None and candidate.capture_range else None


def require_backend(
    registry: Registry, backend: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> None:
    """Raise a one-line error (exit code 2) when ``backend`` cannot run on this machine."""
    registered = registry.backend(backend)
    if registered.conflict:
        raise RunError(f"backend {backend} cannot run here: {registered.conflict}")
    require_available(registered.spec, option_environ(registered.spec, options, environ))


def unavailable_reason(
    registry: Registry, backend: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> str | None:
    """What :func:`require_backend` would say, or ``None`` when the backend can run here."""
    try:
        require_backend(registry, backend, options, environ)
    except TprimatError as exc:
        return str(exc)
    return None


#: Where a system profiler's per-worker reports go, relative to the run directory.
SYSPROF_DIR = "sysprof"


def with_system_profiler(
    plan: LaunchPlan, tool: str, run_dir: Path, *, capture_range: bool = False
) -> tuple[LaunchPlan, str]:
    """The plan with every torchrun worker wrapped by ``tool`` (:mod:`tprimat.running.sysprof`), and a note.

    ``capture_range``: the backend opens a CUDA profiler range over the profile window
    (``ProfilePlan.capture_range``), so Nsight Systems records only that range.
    """
    from tprimat.running.sysprof import SystemProfiler, apply_system_profiler

    profiler = SystemProfiler(tool=tool, output_dir=run_dir / SYSPROF_DIR, capture_range=capture_range)
    wrapped = apply_system_profiler(plan, profiler)
    scope = (
        "only the profile window (the backend's cudaProfilerStart/Stop range)" if capture_range else "the whole worker"
    )
    return wrapped, (
        f"every training worker runs under {tool} (torchrun --no-python), "
        f"recording {scope}; one report per rank in {run_dir / SYSPROF_DIR}"
    )
