"""``torchrun … pretrain_gpt.py`` plans for the Megatron-LM backends (AMD and NVIDIA alike).

The two backends differ only in the environment a platform needs
(``platform_env``); the Megatron arguments are built by
:mod:`tprimat.plugins._megatron.args` from the same config for both, so an
``iso`` comparison runs the same model, schedule and settings on each side.
"""

from __future__ import annotations

import os
from pathlib import Path

from tprimat.errors import TprimatError
from tprimat.contract.plans import LaunchContext, LaunchPlan
from tprimat.plugins._megatron.args import (
    DEFAULT_VERSION,
    build_megatron_args,
    detect_version,
    parse_version,
)
from tprimat.contract.torchrun import torchrun_argv

#: What Megatron-LM itself asks of the environment on every platform.
MEGATRON_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


class FrameworkMissingError(TprimatError):
    """The framework a backend drives is not where the launch needs it."""


def megatron_path(context: LaunchContext, *, hint: str) -> Path:
    """The Megatron-LM checkout: ``--megatron-path`` (options) or ``$MEGATRON_PATH``."""
    given = context.options.get("megatron_path") or os.environ.get("MEGATRON_PATH")
    if not given:
        raise FrameworkMissingError(
            "Megatron-LM not found: set MEGATRON_PATH (or pass --megatron-path) to a "
            f"Megatron-LM checkout containing pretrain_gpt.py; {hint}"
        )
    path = Path(given)
    if not (path / "pretrain_gpt.py").is_file():
        raise FrameworkMissingError(
            f"Megatron-LM not found: {path}/pretrain_gpt.py does not exist "
            f"(MEGATRON_PATH or --megatron-path must name a Megatron-LM checkout); {hint}"
        )
    return path


def megatron_plan(
    context: LaunchContext, *, backend: str, platform_env: dict[str, str], hint: str
) -> LaunchPlan:
    """The full plan: torchrun prefix, ``pretrain_gpt.py`` and every argument."""
    path = megatron_path(context, hint=hint)
    notes: list[str] = []
    if context.options.get("megatron_version"):
        version = parse_version(str(context.options["megatron_version"]))
    else:
        version = detect_version(path) or DEFAULT_VERSION
        if detect_version(path) is None:
            notes.append(
                f"Megatron-core version not readable from {path}; assumed "
                f"{DEFAULT_VERSION[0]}.{DEFAULT_VERSION[1]}"
            )
    resolved = context.methodology  # decided by the core; applied here, never changed
    config = context.config
    profile = context.profile
    extra = [*resolved.args, *(profile.args if profile else ())]
    built = build_megatron_args(
        config, context.model, version=version, data=context.data, extra=extra
    )
    notes += list(built.notes)
    notes.append(
        f"Megatron-core {version[0]}.{version[1]}; padded vocabulary {built.padded_vocab_size} "
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
    argv = [
        *torchrun_argv(config, node_rank=context.node_rank),
        str(path / "pretrain_gpt.py"),
        *built.args,
    ]
    return LaunchPlan(
        argv=tuple(argv),
        env=env,
        cwd=path,
        description=f"Megatron-LM pretrain_gpt.py ({backend}), {context.model.name}",
        notes=tuple(notes),
    )
