"""Every setting a Primus experiment decides, read from Primus's own config tree.

A Primus experiment names a module config (``modules.pre_trainer.config``,
e.g. ``pre_trainer.yaml`` under ``primus/configs/modules/<framework>/``) and a
model config (``modules.pre_trainer.model`` under
``primus/configs/models/<framework>/``); each file may ``extends:`` others
(paths relative to it, applied in order, the file's own keys last), values may
read the environment as ``${NAME:default}``, and the experiment's
``overrides`` come last.  :func:`experiment_values` follows that chain and
returns the merged Megatron settings, so a plan can record what Primus keeps
with its real values.  A file the chain names but the tree lacks is reported,
not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

_VARIABLE = re.compile(r"\$\{(\w+)(?::([^}]*))?\}")


@attrs.frozen(kw_only=True)
class ExperimentValues:
    """The merged settings of one experiment, the files they came from, and what was missing."""

    values: dict[str, Any]
    files: tuple[str, ...]  # relative to the Primus checkout, in the order applied
    missing: tuple[str, ...] = ()


def _substitute(text: str, environ: Mapping[str, str]) -> str:
    """``${NAME:default}`` as the environment or the default gives it (``${NAME}``: empty when unset)."""
    return _VARIABLE.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), text)


def _load(file: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(_substitute(file.read_text(encoding="utf-8"), environ))
    return data if isinstance(data, dict) else {}


def _chain(file: Path, root: Path, environ: Mapping[str, str], seen: list[str], missing: list[str]) -> dict[str, Any]:
    """One config file over everything it extends."""
    name = _relative(file, root)
    if not file.is_file():
        missing.append(name)
        return {}
    if name in seen:  # a loop in extends: applied once
        return {}
    seen.append(name)
    data = _load(file, environ)
    merged: dict[str, Any] = {}
    for base in data.pop("extends", None) or []:
        merged.update(_chain((file.parent / str(base)).resolve(), root, environ, seen, missing))
    merged.update(data)
    return merged


def _relative(file: Path, root: Path) -> str:
    try:
        return str(file.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(file)


def experiment_values(checkout: Path, experiment: Mapping[str, Any], environ: Mapping[str, str]) -> ExperimentValues:
    """The settings Primus derives for the experiment's ``pre_trainer`` module, overrides last."""
    trainer = (experiment.get("modules") or {}).get("pre_trainer") or {}
    framework = str(trainer.get("framework", "megatron"))
    configs = checkout / "primus" / "configs"
    seen: list[str] = []
    missing: list[str] = []
    values: dict[str, Any] = {}
    for kind, key in (("modules", "config"), ("models", "model")):
        if trainer.get(key):
            file = configs / kind / framework / str(trainer[key])
            values.update(_chain(file, checkout, environ, seen, missing))
    values.update(_substituted(trainer.get("overrides") or {}, environ))
    return ExperimentValues(values=values, files=tuple(seen), missing=tuple(missing))


def _substituted(values: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """An experiment's overrides with ``${NAME:default}`` strings resolved and typed as YAML reads them."""
    import yaml

    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, str) and _VARIABLE.search(value):
            value = yaml.safe_load(_substitute(value, environ))
        out[key] = value
    return out
