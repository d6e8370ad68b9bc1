"""``nvd_megatron``: Megatron-LM pretrain_gpt.py on CUDA

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from tprimat import hookimpl
from tprimat.contract import BackendSpec, LaunchOption, Requirements, WarmupRule
from tprimat.plugins._megatron.sniff import sniff_megatron

BACKEND = BackendSpec(
    name="nvd_megatron",
    platform="nvidia",
    framework="megatron-lm",
    description="Megatron-LM pretrain_gpt.py on CUDA",
    requires=Requirements(
        python=("torch",),
        executables=("torchrun",),
        env=("MEGATRON_PATH",),
        devices=("nvidia-gpu",),
        hint=(
            "use the NeMo image (docker/nvd.Dockerfile), which sets MEGATRON_PATH to "
            "its Megatron-LM (/opt/megatron-lm)"
        ),
    ),
    options=(
        LaunchOption(name="megatron_path", env="MEGATRON_PATH", kind="path",
                     help="Megatron-LM checkout (holds pretrain_gpt.py)"),
        LaunchOption(name="megatron_version", help="Megatron-core version to target, e.g. 0.15 (default: read from the checkout)"),
    ),
    sniff=sniff_megatron,
    warmup=WarmupRule(
        min_iterations=1,
        reason="Megatron's iteration 1 includes start-up (since Megatron-LM 0.16 its timers are not reset after it)",
    ),
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Implementations live in submodules that are never named after a hook: importing
# ``tprimat.plugins.nvd_megatron.launch`` would rebind ``launch`` on this package to the
# submodule and hide the hook function from the plugin manager.


@hookimpl
def prepare_data(backend, dataset, config):
    from tprimat.plugins.nvd_megatron.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend, context):
    """Profile the config's iteration window with this backend's own torch-profiler settings.

    Under Nsight Systems without the torch profiler, the same window as a CUDA profiler range.
    """
    from tprimat.plugins.nvd_megatron.profiling import nsys_plan, profile_plan

    if context.system_profiler == "nsys" and not context.config.profile.enabled:
        return nsys_plan(context)
    return profile_plan(context)


@hookimpl
def launch(backend, context):
    from tprimat.plugins.nvd_megatron.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.nvd_megatron.parse import parse_megatron

    return parse_megatron(lines, source)
