"""The two benchmark methodologies: ``iso`` and ``tuned``.

``iso`` runs the config exactly as written on every platform.  ``tuned`` starts
from the same config and applies a per-device preset (``presets/<name>.toml``):
each platform's own recommended settings.  Every difference from ``iso`` is a
:class:`Deviation` that the launch plan carries and the result records, so a
tuned number always says what was changed and on whose advice.

A preset may change how the work is laid out and executed (micro-batch,
parallel layout, kernels, environment, framework switches) but never *what*
is computed: the fair fields of :mod:`tprimat.settings.fairness` (model,
dataset, sequence length, global batch, precision) are refused.

Presets come from two places: those shipped with tprimat, and the user's
preset directory (``$TPRIMAT_PRESET_DIR``, else
``$XDG_CONFIG_HOME/tprimat/presets`` or ``~/.config/tprimat/presets``), where
``tprimat tune`` writes what it found.  A user preset may name the backend and
model it was found for; it then applies only to those, and for them it is
chosen before a shipped preset of the same device.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from tprimat.errors import TprimatError
from tprimat.settings.config import BenchmarkConfig, ConfigError, config_from_dict
from tprimat.settings.fairness import FAIR_CONFIG_KEYS

#: Config keys a preset may never change: the fair fields (they define the work being compared)
#: and what makes two runs the same run (length, seed, tokenizer, FP8 recipe).
FROZEN_KEYS = frozenset(
    {
        *FAIR_CONFIG_KEYS.values(),
        "benchmark.iterations",
        "benchmark.seed",
        "data.tokenizer",
        "precision.fp8_recipe",
    }
)


class PresetError(TprimatError):
    """A missing or invalid tuned preset."""


@attrs.frozen(kw_only=True)
class Deviation:
    """One setting a tuned run changes relative to ``iso``."""

    setting: str  # "training.micro_batch_size", "env.GPU_MAX_HW_QUEUES", "amd_primus.<key>"
    iso: Any
    tuned: Any

    def __str__(self) -> str:
        return f"{self.setting}: {_show(self.iso)} -> {_show(self.tuned)}"


def _show(value: Any) -> str:
    return "unset" if value is None else json.dumps(value)


@attrs.frozen(kw_only=True)
class Tuning:
    """What a preset changes: config fields, environment, and per-backend framework settings."""

    config: dict[str, Any] = attrs.Factory(dict)  # "section.key" -> value
    env: dict[str, str] = attrs.Factory(dict)
    backends: dict[str, dict[str, Any]] = attrs.Factory(dict)  # backend -> {args, overrides, env}


def names_device(preset_devices: Sequence[str], device_name: str) -> bool:
    """Whether the reported ``device_name`` is one of ``preset_devices``.

    Both are identified with the device table (:func:`tprimat.hardware.devices.identify_device`):
    the same device model matches, whatever name each side uses ("H100" and "NVIDIA H100 80GB
    HBM3"), and a different model never does, even when its name contains the other's (a GH200 is
    not an H200, an H100 NVL not an H100 SXM).  A name the table does not know matches only the
    same name (vendor prefix and case aside).
    """
    from tprimat.hardware.devices import identify_device, normalize_device_name

    reported = identify_device(device_name)
    for entry in preset_devices:
        wanted = identify_device(entry)
        if wanted is not None and reported is not None:
            if wanted.device.key == reported.device.key:
                return True
        elif normalize_device_name(entry) == normalize_device_name(device_name):
            return True
    return False


@attrs.frozen(kw_only=True)
class Preset:
    """A device's tuned settings, and where they come from.

    The top-level tables apply to every model; ``[models."<model>"]`` tables add what a
    vendor publishes for one model only (their values win for that model), so a preset
    never carries one model's published settings over to another.
    """

    name: str
    devices: tuple[str, ...]  # the devices it is for, by any name the device table knows (names_device)
    platform: str  # amd | nvidia | any (a tune trial's preset, made for the device it runs on)
    source: str  # the public vendor material the values are taken from
    config: dict[str, Any] = attrs.Factory(dict)  # "section.key" -> value
    env: dict[str, str] = attrs.Factory(dict)
    backends: dict[str, dict[str, Any]] = attrs.Factory(dict)  # backend -> {args, overrides, env}
    models: dict[str, Tuning] = attrs.Factory(dict)  # model -> what applies to it alone
    backend: str | None = None  # a user preset found for one backend and model applies only to them
    model: str | None = None
    file: str | None = None  # the user preset file it was read from (None: shipped with tprimat)

    def applies_to(self, device_name: str, backend: str | None, model: str | None) -> bool:
        if not names_device(self.devices, device_name):
            return False
        return (self.backend is None or self.backend == backend) and (self.model is None or self.model == model)

    def tuning_for(self, model: str | None) -> Tuning:
        """The preset's changes for ``model``: every model's, then that model's own."""
        own = self.models.get(model or "", Tuning())
        backends = {name: dict(table) for name, table in self.backends.items()}
        for name, table in own.backends.items():
            merged = backends.setdefault(name, {})
            for part, value in table.items():
                merged[part] = [*merged.get(part, []), *value] if part == "args" else {**merged.get(part, {}), **value}
        return Tuning(config={**self.config, **own.config}, env={**self.env, **own.env}, backends=backends)


#: Environment variable naming the user preset directory.
PRESET_DIR_ENV = "TPRIMAT_PRESET_DIR"


@attrs.frozen(kw_only=True)
class Resolved:
    """The effective settings of one run under its methodology."""

    methodology: str
    config: BenchmarkConfig
    preset: str | None = None
    source: str | None = None
    preset_file: str | None = None  # a user preset's file (None: shipped or no preset)
    env: dict[str, str] = attrs.Factory(dict)
    args: tuple[str, ...] = ()
    overrides: dict[str, Any] = attrs.Factory(dict)
    deviations: tuple[Deviation, ...] = ()


def _load(name: str) -> Preset:
    text = resources.files("tprimat.settings").joinpath("presets", name).read_text(encoding="utf-8")
    return _parse(name, tomllib.loads(text))


def _tuning(data: dict[str, Any]) -> Tuning:
    return Tuning(
        config=dict(data.get("config", {})),
        env={k: str(v) for k, v in data.get("env", {}).items()},
        backends=dict(data.get("backends", {})),
    )


def _parse(name: str, data: dict[str, Any], file: str | None = None) -> Preset:
    head = data.get("preset", {})
    common = _tuning(data)
    try:
        preset = Preset(
            name=head["name"],
            devices=tuple(head["devices"]),
            platform=head["platform"],
            source=head["source"],
            config=common.config,
            env=common.env,
            backends=common.backends,
            models={model: _tuning(table) for model, table in data.get("models", {}).items()},
            backend=head.get("backend"),
            model=head.get("model"),
            file=file,
        )
    except KeyError as exc:
        raise PresetError(f"preset {name}: missing [preset] key {exc.args[0]}") from None
    for scope, tuning in [("", common), *((f"models.{m}.", t) for m, t in preset.models.items())]:
        frozen = sorted(FROZEN_KEYS & set(tuning.config))
        if frozen:
            raise PresetError(
                f"preset {name} changes {', '.join(scope + 'config.' + k for k in frozen)}, which tuned runs must keep"
            )
    return preset


def presets() -> list[Preset]:
    """Every shipped preset."""
    folder = resources.files("tprimat.settings").joinpath("presets")
    return [
        _load(entry.name) for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".toml")
    ]


def user_preset_dir() -> Path:
    """Where user presets live (``tprimat tune`` writes here)."""
    if os.environ.get(PRESET_DIR_ENV):
        return Path(os.environ[PRESET_DIR_ENV])
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "tprimat" / "presets"


def user_presets() -> list[Preset]:
    """Every preset in the user preset directory, by file name."""
    folder = user_preset_dir()
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise PresetError(f"user preset {path} cannot be read: {exc}; fix or remove it") from None
        found.append(_parse(str(path), data, file=str(path)))
    return found


def preset_for(device_name: str | None, *, backend: str | None = None, model: str | None = None) -> Preset | None:
    """The preset for ``device_name`` (None: no preset): a matching user preset first, then a
    shipped one."""
    if not device_name:
        return None
    for preset in [*user_presets(), *presets()]:
        if preset.applies_to(device_name, backend, model):
            return preset
    return None


def _owned(table: dict[str, Any], owned: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (setting, config field) pairs of a preset's backend table that a config field owns."""
    named = [*table.get("overrides", {})]
    for word in table.get("args", ()):  # "--flag", "--flag=value"; values are not settings
        if isinstance(word, str) and word.startswith("--"):
            named.append(word.partition("=")[0])
    return [(key, owned[key]) for key in named if key in owned]


def resolve(
    config: BenchmarkConfig,
    *,
    backend: str,
    device_name: str | None,
    preset: Preset | None = None,
    platform: str | None = None,
    owned: Mapping[str, str] | None = None,
) -> Resolved:
    """Apply the config's methodology for ``backend`` on a device called ``device_name``.

    ``platform`` is the backend's platform ("amd", "nvidia"; None or "any": every
    platform): a preset written for another vendor is refused.  ``owned`` is the
    backend's :attr:`~tprimat.contract.backend.BackendSpec.config_owned`: a preset's
    backend table may not set a framework setting that a config field decides (the
    config and the result would then say one thing while the framework ran another).

    The deviations' ``iso`` values of environment variables and framework settings are
    what the preset's tables say they replace; the core then replaces them with the
    values the ``iso`` launch really has (:func:`tprimat.running.prepare.prepare`).
    """
    if config.benchmark.methodology == "iso":
        return Resolved(methodology="iso", config=config)
    chosen = preset or preset_for(device_name, backend=backend, model=config.benchmark.model)
    if chosen is None:
        known = ", ".join(f"{p.name} ({'/'.join(p.devices)})" for p in presets())
        raise PresetError(
            f"methodology 'tuned' needs a preset for device {device_name or 'unknown'!r}; "
            f'shipped presets: {known}. Use benchmark.methodology = "iso" or add a preset.'
        )
    if platform in ("amd", "nvidia") and chosen.platform not in (platform, "any"):
        raise PresetError(
            f"preset {chosen.name} is for {chosen.platform} devices and backend {backend} runs on {platform}; "
            "a tuned run uses its own vendor's preset"
        )
    tuning = chosen.tuning_for(config.benchmark.model)
    frozen = sorted(FROZEN_KEYS & set(tuning.config))
    if frozen:
        raise PresetError(f"preset {chosen.name} changes {', '.join(frozen)}, which tuned runs must keep")
    own = tuning.backends.get(backend, {})  # the preset's table for this backend
    taken = _owned(own, owned or {})
    if taken:
        listed = ", ".join(f"{key} (set from {field})" for key, field in taken)
        raise PresetError(
            f"preset {chosen.name} sets {listed} for {backend} directly; change the config field in the "
            "preset's [config] table instead, so the config, the launch and the result agree"
        )
    data = config.to_dict()
    deviations: list[Deviation] = []
    for dotted, value in tuning.config.items():
        section, _, key = dotted.partition(".")
        if section not in data or key not in data[section]:
            raise PresetError(f"preset {chosen.name}: unknown config key {dotted}")
        if data[section][key] != value:
            deviations.append(Deviation(setting=dotted, iso=data[section][key], tuned=value))
            data[section][key] = value
    try:
        tuned_config = config_from_dict(data)
    except ConfigError as exc:
        raise PresetError(f"preset {chosen.name} does not fit this config: {exc}") from None
    env = {**tuning.env, **{k: str(v) for k, v in own.get("env", {}).items()}}
    deviations += [Deviation(setting=f"env.{k}", iso=None, tuned=v) for k, v in sorted(env.items())]
    args = tuple(own.get("args", ()))
    if args:
        deviations.append(Deviation(setting="args", iso=None, tuned=list(args)))
    overrides = dict(own.get("overrides", {}))
    deviations += [Deviation(setting=f"{backend}.{k}", iso=None, tuned=v) for k, v in sorted(overrides.items())]
    return Resolved(
        methodology="tuned",
        config=tuned_config,
        preset=chosen.name,
        source=chosen.source,
        preset_file=chosen.file,
        env=env,
        args=args,
        overrides=overrides,
        deviations=tuple(deviations),
    )
