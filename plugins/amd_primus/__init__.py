"""``amd_primus``: AMD Primus (Megatron-LM engine) on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.backend import BackendSpec, Requirements

BACKEND = BackendSpec(
    name="amd_primus",
    platform="amd",
    framework="primus",
    description="AMD Primus (Megatron-LM engine) on ROCm",
    requires=Requirements(
        python=("torch",),
        executables=("torchrun",),
        env=("PRIMUS_PATH",),
        devices=("amd-gpu",),
        hint="use the ROCm Primus image (docker/amd.Dockerfile), which sets PRIMUS_PATH",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings."""
    from tprimat.plugins.amd_primus.profile import profile_plan

    return profile_plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.amd_primus.parse import parse_primus

    return parse_primus(lines, source)
