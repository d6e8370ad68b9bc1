"""The search space of ``tprimat tune``: settings that change speed, never the training math.

A *knob* is a config key with the values the search may give it.  Which knobs
a backend has is the backend's to say: its :class:`~tprimat.contract.backend.BackendSpec`
carries a ``tunables`` mapping (config key or "<backend>.<switch>" -> allowed
values, or ``None`` for the core's default values); the core names no backend.

A *candidate* is one assignment of the knobs.  Candidates that the config
itself refuses (global batch not divisible by micro-batch × data-parallel size,
model-parallel sizes that do not divide the node) or that the model cannot be
split into (pipeline stages that do not divide its layers, tensor parallelism
that does not divide its heads) are dropped before anything else.  The rest
are ordered simplest first: fewest settings changed from the config as written,
then by their canonical text, so every ordering (and every tie) is
reproducible.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from tprimat.errors import TprimatError
from tprimat.settings.config import BenchmarkConfig, ConfigError, config_from_dict
from tprimat.settings.methodology import FROZEN_KEYS
from tprimat.settings.models import ModelSpec

#: Knobs that are only meaningful when the node has more than one process.
_MULTI_PROCESS = {
    "parallel.strategy",
    "parallel.distributed_optimizer",
    "parallel.overlap_grad_reduce",
    "parallel.overlap_param_gather",
    "parallel.tensor",
    "parallel.pipeline",
    "parallel.context",
}


class SpaceError(TprimatError):
    """A search space that cannot be used (unknown or frozen key, bad value)."""


#: The config's sections; a knob in any other section is a backend switch ("<backend>.<key>").
CONFIG_SECTIONS = frozenset(field.name for field in attrs.fields(BenchmarkConfig))


def is_switch(key: str) -> bool:
    """Whether ``key`` names a backend's own switch rather than a config key."""
    return key.partition(".")[0] not in CONFIG_SECTIONS


@attrs.frozen(kw_only=True)
class Candidate:
    """One configuration to try: knob -> value (config keys and backend switches)."""

    settings: tuple[tuple[str, Any], ...]  # sorted by key
    #: Each backend switch's default (its first listed value): what "unchanged" means for it.
    switch_defaults: tuple[tuple[str, Any], ...] = attrs.field(default=(), eq=False)

    @property
    def id(self) -> str:
        """``c-`` and 8 hex digits of the settings' canonical JSON: stable across runs."""
        return "c-" + hashlib.sha256(self.text.encode()).hexdigest()[:8]

    @property
    def text(self) -> str:
        return json.dumps(dict(self.settings), sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.settings)

    def config_settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.settings if not is_switch(k)}

    def switches(self) -> dict[str, dict[str, Any]]:
        """Backend switches as ``{backend: {key: value}}`` (a preset's ``[backends.<b>.overrides]``)."""
        found: dict[str, dict[str, Any]] = {}
        for key, value in self.settings:
            if is_switch(key):
                backend, _, name = key.partition(".")
                found.setdefault(backend, {})[name] = value
        return found

    def overrides(self) -> list[str]:
        """The config settings as ``--set section.key=value`` values."""
        return [f"{key}={json.dumps(value)}" for key, value in self.config_settings().items()]

    def deviations(self, base: BenchmarkConfig) -> dict[str, Any]:
        """The settings that differ from ``base`` (the config as written)."""
        data = base.to_dict()
        defaults = dict(self.switch_defaults)
        changed = {}
        for key, value in self.settings:
            section, _, name = key.partition(".")
            current = defaults.get(key) if is_switch(key) else data[section][name]
            if current != value:
                changed[key] = value
        return changed

    def describe(self, base: BenchmarkConfig) -> str:
        changed = self.deviations(base)
        if not changed:
            return "as configured"
        return ", ".join(f"{k.split('.', 1)[1]}={json.dumps(v)}" for k, v in changed.items())


def tunables_for(backend: str, spec: Any = None) -> dict[str, tuple[Any, ...] | None]:
    """What the backend declares ``tprimat tune`` may search (``BackendSpec.tunables``)."""
    declared = getattr(spec, "tunables", None)
    if declared:
        return {str(k): (tuple(v) if v is not None else None) for k, v in dict(declared).items()}
    raise SpaceError(
        f"backend {backend} declares no tunable settings; give the knobs to search with "
        "--space section.key=v1,v2 (e.g. --space training.micro_batch_size=1,2,4)"
    )


def _powers_of_two_up_to(limit: int) -> tuple[int, ...]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return tuple(values)


def default_values(key: str, config: BenchmarkConfig) -> tuple[Any, ...]:
    """The core's values for a knob declared without values."""
    if key == "training.micro_batch_size":
        # Those the data-parallel size of a candidate does not allow are dropped later.
        return _powers_of_two_up_to(config.training.global_batch_size)
    if key in ("parallel.tensor", "parallel.pipeline", "parallel.context"):
        # Within the node: model parallelism never crosses the node's interconnect here.
        node = config.launch.nproc_per_node
        return tuple(v for v in _powers_of_two_up_to(node) if node % v == 0)
    raise SpaceError(f"knob {key} has no default values; give them with --space {key}=v1,v2")


def parse_space(items: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """``--space section.key=v1,v2`` values (each a TOML literal, else a string)."""
    import tomllib

    space: dict[str, tuple[Any, ...]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key.count(".") != 1 or not raw.strip():
            raise SpaceError(f"--space {item!r} is not of the form section.key=v1,v2")
        values = []
        for part in raw.split(","):
            part = part.strip()
            try:
                values.append(tomllib.loads(f"v = {part}")["v"])
            except tomllib.TOMLDecodeError:
                values.append(part)
        space[key] = tuple(dict.fromkeys(values))
    return space


def search_space(
    config: BenchmarkConfig,
    tunables: Mapping[str, tuple[Any, ...] | None],
    *,
    restrict: Mapping[str, tuple[Any, ...]] | None = None,
    fixed: Sequence[str] = (),
    backend: str | None = None,
) -> dict[str, tuple[Any, ...]]:
    """Knob -> values to search, in a stable order.

    ``restrict`` (``--space``) replaces a knob's values or adds a knob;
    ``fixed`` keys (set with ``--set``) are not searched.  Frozen keys
    (:data:`tprimat.settings.methodology.FROZEN_KEYS`) are refused: they define the work.
    A ``<backend>.<key>`` knob is a switch of ``backend`` itself (applied through
    the preset's ``[backends.<backend>.overrides]``); its values must be listed.
    """
    restrict = dict(restrict or {})
    defaults = config.to_dict()
    for key in [*tunables, *restrict]:
        section, _, name = key.partition(".")
        if key in FROZEN_KEYS:
            raise SpaceError(
                f"{key} defines the work being compared and is never tuned (frozen: {', '.join(sorted(FROZEN_KEYS))})"
            )
        if is_switch(key) and section == backend and name:
            if not (restrict.get(key) or tunables.get(key)):
                raise SpaceError(f"backend switch {key} needs its values: --space {key}=v1,v2")
            continue
        if section not in defaults or name not in defaults[section]:
            raise SpaceError(f"unknown config key {key} in the search space")
    both = sorted(set(restrict) & set(fixed))
    if both:
        raise SpaceError(f"{both[0]} is both fixed with --set and searched with --space; drop one of them")
    space: dict[str, tuple[Any, ...]] = {}
    for key in sorted({*tunables, *restrict}):
        if key in fixed:
            continue
        if key in _MULTI_PROCESS and config.world_size == 1 and key not in restrict:
            continue
        values = restrict.get(key) or tunables.get(key) or default_values(key, config)
        space[key] = tuple(values)
    return space


def _model_fits(config: BenchmarkConfig, model: ModelSpec) -> bool:
    p = config.parallel
    if model.num_layers % p.pipeline:
        return False
    if model.num_attention_heads % p.tensor or (
        model.num_query_groups % p.tensor and p.tensor % model.num_query_groups
    ):
        return False
    if config.training.seq_length % (2 * p.context) and p.context > 1:
        return False
    # Megatron gathers parameters in the background only from a distributed optimizer's shards.
    return not (p.overlap_param_gather and not p.distributed_optimizer)


def apply(config: BenchmarkConfig, candidate: Candidate) -> BenchmarkConfig:
    """``config`` with the candidate's settings (raises :class:`ConfigError` if they do not fit)."""
    data = config.to_dict()
    for key, value in candidate.config_settings().items():
        section, _, name = key.partition(".")
        data[section][name] = value
    return config_from_dict(data)


def candidates(
    config: BenchmarkConfig, model: ModelSpec, space: Mapping[str, tuple[Any, ...]]
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """Every valid candidate, simplest first, and the invalid ones with the reason."""
    keys = sorted(space)
    valid: list[Candidate] = []
    invalid: list[tuple[Candidate, str]] = []
    defaults = tuple((k, space[k][0]) for k in keys if is_switch(k))
    for values in itertools.product(*(space[k] for k in keys)):
        candidate = Candidate(settings=tuple(zip(keys, values, strict=True)), switch_defaults=defaults)
        try:
            tuned = apply(config, candidate)
        except ConfigError as exc:
            invalid.append((candidate, str(exc)))
            continue
        if not _model_fits(tuned, model):
            invalid.append(
                (candidate, f"{model.name} cannot be split this way (layers, heads or sequence do not divide)")
            )
            continue
        valid.append(candidate)
    valid.sort(key=lambda c: (len(c.deviations(config)), c.text))
    return valid, invalid
