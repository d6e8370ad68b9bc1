"""``amd_primus``: AMD Primus (Megatron-LM engine) on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.contract import BackendSpec, LaunchOption, Requirements, WarmupRule
from tprimat.plugins._megatron.sniff import sniff_primus

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
    options=(
        LaunchOption(name="primus_path", env="PRIMUS_PATH", kind="path", help="Primus checkout"),
        LaunchOption(name="primus_gpu", help="Primus experiment folder to start from (MI300X, MI355X; default from the device)"),
        LaunchOption(name="megatron_version", help="Megatron-core version to target, e.g. 0.15 (default: read from the checkout)"),
    ),
    default_for=("amd",),
    sniff=sniff_primus,
    warmup=WarmupRule(
        min_iterations=1,
        reason="Megatron's iteration 1 includes start-up (since Megatron-LM 0.16 its timers are not reset after it)",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Implementations live in submodules that are never named after a hook: importing
# ``tprimat.plugins.amd_primus.launch`` would rebind ``launch`` on this package to the
# submodule and hide the hook function from the plugin manager.


@hookimpl
def prepare_data(backend, dataset, config):
    from tprimat.plugins.amd_primus.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings."""
    from tprimat.plugins.amd_primus.profiling import profile_plan

    return profile_plan(context)


@hookimpl
def launch(backend, context):
    from tprimat.plugins.amd_primus.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.amd_primus.parse import parse_primus

    return parse_primus(lines, source)
