"""``nvd_nemo``: NVIDIA NeMo 2 (Megatron strategy) on CUDA

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.contract.backend import BackendSpec, Requirements

BACKEND = BackendSpec(
    name="nvd_nemo",
    platform="nvidia",
    framework="nemo",
    description="NVIDIA NeMo 2 (Megatron strategy) on CUDA",
    requires=Requirements(
        python=("torch", "nemo", "megatron"),
        executables=("torchrun",),
        env=(),
        devices=("nvidia-gpu",),
        hint="use the NeMo image (docker/nvd.Dockerfile)",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Implementations live in submodules that are never named after a hook: importing
# ``tprimat.plugins.nvd_nemo.launch`` would rebind ``launch`` on this package to the
# submodule and hide the hook function from the plugin manager.


@hookimpl
def prepare_data(backend, dataset, config):
    from tprimat.plugins.nvd_nemo.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings.

    Under Nsight Systems without the torch profiler, the same window as a CUDA profiler range.
    """
    from tprimat.plugins.nvd_nemo.profiling import nsys_plan, profile_plan

    if context.system_profiler == "nsys" and not context.config.profile.enabled:
        return nsys_plan(context)
    return profile_plan(context)


@hookimpl
def launch(backend, context):
    from tprimat.plugins.nvd_nemo.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.nvd_nemo.parse import parse_nemo

    return parse_nemo(lines, source)
