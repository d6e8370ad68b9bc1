"""``amd_megatron``: Megatron-LM pretrain_gpt.py on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.contract import BackendSpec, LaunchOption, Requirements, WarmupRule
from tprimat.plugins._megatron.sniff import sniff_rocm_megatron

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
        hint=(
            "use the ROCm Primus image (docker/amd.Dockerfile), which sets MEGATRON_PATH to "
            "its Megatron-LM ($PRIMUS_PATH/third_party/Megatron-LM)"
        ),
    ),
    options=(
        LaunchOption(name="megatron_path", env="MEGATRON_PATH", kind="path",
                     help="Megatron-LM checkout (holds pretrain_gpt.py)"),
        LaunchOption(name="megatron_version", help="Megatron-core version to target, e.g. 0.15 (default: read from the checkout)"),
    ),
    sniff=sniff_rocm_megatron,
    warmup=WarmupRule(
        min_iterations=1,
        reason="Megatron's iteration 1 includes start-up (since Megatron-LM 0.16 its timers are not reset after it)",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Implementations live in submodules that are never named after a hook: importing
# ``tprimat.plugins.amd_megatron.launch`` would rebind ``launch`` on this package to the
# submodule and hide the hook function from the plugin manager.


@hookimpl
def prepare_data(backend, dataset, config):
    from tprimat.plugins.amd_megatron.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings."""
    from tprimat.plugins.amd_megatron.profiling import profile_plan

    return profile_plan(context)


@hookimpl
def launch(backend, context):
    from tprimat.plugins.amd_megatron.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.amd_megatron.parse import parse_rocm_megatron

    return parse_rocm_megatron(lines, source)
