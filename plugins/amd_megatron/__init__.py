"""``amd_megatron``: Megatron-LM pretrain_gpt.py on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

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
        hint=(
            "use the ROCm Primus image (docker/amd.Dockerfile), which sets MEGATRON_PATH to "
            "its Megatron-LM ($PRIMUS_PATH/third_party/Megatron-LM)"
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
    from tprimat.plugins.amd_megatron.launch import plan

    return plan(context)


@hookimpl(specname="prepare_data")
def map_prepared_data(backend, dataset, config):
    from tprimat.plugins.amd_megatron.data import data_arguments

    return data_arguments(dataset, config)
