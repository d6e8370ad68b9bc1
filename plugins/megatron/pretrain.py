"""``torchrun … pretrain_gpt.py`` plans for the Megatron-LM backends (AMD and NVIDIA alike).

The two backends differ only in the environment a platform needs
(``platform_env``, from each backend's own launcher module); the arguments are
the one settings model (:mod:`tprimat.plugins.megatron.settings`) rendered as
flags, so an ``iso`` comparison runs the same model, schedule and settings on
each side.

Without a checkout (``--megatron-path`` / ``$MEGATRON_PATH`` unset, e.g. a dry
run on a laptop) the plan names the placeholder ``${MEGATRON_PATH}`` and says
which Megatron-core version it assumed; the core marks such a plan NOT
RUNNABLE HERE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tprimat.contract import FrameworkSettings, LaunchContext, LaunchPlan
from tprimat.contract.torchrun import torchrun_argv
from tprimat.errors import TprimatError
from tprimat.plugins.megatron.framework import megatron_lm_kept, shared_values
from tprimat.plugins.megatron.settings import (
    DEFAULT_VERSION,
    SNAPSHOT_FILE,
    build_settings,
    detect_version,
    memory_snapshot,
    padded_vocab_size,
    parse_version,
    to_argv,
)
from tprimat.plugins.megatron_core.attention import refuse_attention_conflicts

#: What Megatron-LM itself asks of the environment on every platform.
MEGATRON_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
#: The path a plan names when no Megatron-LM checkout is given.
PLACEHOLDER = "${MEGATRON_PATH}"


class FrameworkMissingError(TprimatError):
    """The framework a backend drives is not where the launch needs it."""


def megatron_path(context: LaunchContext, *, hint: str) -> Path | None:
    """The Megatron-LM checkout (``--megatron-path`` or ``$MEGATRON_PATH``); None when neither is set."""
    given = context.options.get("megatron_path")
    if not given:
        return None
    path = Path(given)
    if not (path / "pretrain_gpt.py").is_file():
        raise FrameworkMissingError(
            f"Megatron-LM not found: {path}/pretrain_gpt.py does not exist "
            f"(MEGATRON_PATH or --megatron-path must name a Megatron-LM checkout); {hint}"
        )
    return path


def target_version(context: LaunchContext, checkout: Path | None, where: str) -> tuple[tuple[int, int], list[str]]:
    """The Megatron-core version to render for: ``--megatron-version``, the checkout's, or the default."""
    if context.options.get("megatron_version"):
        return parse_version(str(context.options["megatron_version"])), []
    found = detect_version(checkout) if checkout is not None else None
    if found is not None:
        return found, []
    assumed = f"{DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]}"
    if checkout is None:
        return DEFAULT_VERSION, [
            f"assumed Megatron-core {assumed} (no checkout to read it from; --megatron-version names one)"
        ]
    return DEFAULT_VERSION, [f"Megatron-core version not readable from {where}; assumed {assumed}"]


def megatron_plan(context: LaunchContext, *, backend: str, platform_env: dict[str, str], hint: str) -> LaunchPlan:
    """The full plan: torchrun prefix, ``pretrain_gpt.py`` and every argument."""
    checkout = megatron_path(context, hint=hint)
    path = checkout or Path(PLACEHOLDER)
    notes: list[str] = []
    if checkout is None:
        notes.append(
            f"no Megatron-LM checkout (--megatron-path or $MEGATRON_PATH): planned with the placeholder {PLACEHOLDER}; "
            + hint
        )
    version, version_notes = target_version(context, checkout, str(path))
    notes += version_notes
    resolved = context.methodology  # decided by the core; applied here, never changed
    config = context.config
    profile = context.profile
    extra = dict(resolved.overrides)
    if context.memory_snapshot:
        extra.update(memory_snapshot(context.run_dir))
    settings = build_settings(config, context.model, version=version, data=context.data, extra=extra)
    if config.parallel.sequence_parallel and config.parallel.tensor == 1:
        notes.append("parallel.sequence_parallel has no effect with tensor parallel size 1")
    notes.append(
        f"Megatron-core {version[0]}.{version[1]}; padded vocabulary {padded_vocab_size(config, context.model)} "
        f"({context.model.vocab_size} tokens)"
    )
    env = {
        **MEGATRON_ENV,
        **platform_env,
        "PYTHONPATH": str(path),
        **(context.data.env if context.data else {}),
        **resolved.env,
        **(profile.env if profile else {}),
    }
    refuse_attention_conflicts(config.kernels.attention_backend, env)
    added = [*resolved.args, *(profile.args if profile else ())]  # after tprimat's own arguments
    script = [str(path / "pretrain_gpt.py"), *to_argv(settings)]
    argv = [*torchrun_argv(config, node_rank=context.node_rank), *script, *added]
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        cwd=path,
        description=f"Megatron-LM pretrain_gpt.py ({backend}), {context.model.name}",
        notes=tuple(notes),
        snapshot_globs=(SNAPSHOT_FILE,) if context.memory_snapshot else (),
        framework=framework_settings(settings, version, extra_args=added),
    )


def framework_settings(
    settings: dict[str, Any], version: tuple[int, int], *, extra_args: list[str]
) -> FrameworkSettings:
    """What ``pretrain_gpt.py`` runs with: tprimat's settings and Megatron-LM's defaults for the rest."""
    kept = megatron_lm_kept(settings)
    notes = (f"arguments added after tprimat's: {' '.join(extra_args)}",) if extra_args else ()
    return FrameworkSettings(
        framework=f"Megatron-LM (core {version[0]}.{version[1]})",
        rendered=dict(settings),
        kept=kept,
        kept_from=f"Megatron-LM {version[0]}.{version[1]} argument defaults (pretrain_gpt.py)",
        shared=shared_values({**kept, **settings}),
        notes=notes,
    )
