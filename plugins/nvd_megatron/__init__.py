"""``nvd_megatron``: Megatron-LM pretrain_gpt.py on CUDA

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from tprimat import hookimpl
from tprimat.backend import BackendSpec, Requirements

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
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Named apart from the ``launch`` submodule: importing a submodule binds its name on
# this package and would hide a function of the same name from the plugin manager.
@hookimpl(specname="launch")
def plan_launch(backend, context):
    from tprimat.plugins.nvd_megatron.launch import plan

    return plan(context)


@hookimpl(specname="prepare_data")
def map_prepared_data(backend, dataset, config):
    from tprimat.plugins.nvd_megatron.data import data_arguments

    return data_arguments(dataset, config)
