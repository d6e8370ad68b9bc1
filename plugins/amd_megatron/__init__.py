"""``amd_megatron``: Megatron-LM pretrain_gpt.py on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.backend import BackendSpec, Requirements

BACKEND = BackendSpec(
    name="amd_megatron",
    platform="amd",
    framework="megatron-lm",
    description="Megatron-LM pretrain_gpt.py on ROCm",
    requires=Requirements(
        python=("torch",),
        executables=("torchrun",),
        env=("MEGATRON_PATH",),
        devices=("amd-gpu",),
        hint="use the ROCm Primus image (docker/amd.Dockerfile) and set MEGATRON_PATH to a ROCm Megatron-LM checkout",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings."""
    from tprimat.plugins.amd_megatron.profile import profile_plan

    return profile_plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.amd_megatron.parse import parse_rocm_megatron

    return parse_rocm_megatron(lines, source)
