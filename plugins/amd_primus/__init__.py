"""``amd_primus``: AMD Primus (Megatron-LM engine) on ROCm

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

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
def launch(backend, context):
    from tprimat.plugins.amd_primus.launch import plan

    return plan(context)


@hookimpl
def prepare_data(backend, dataset, config):
    from tprimat.plugins.amd_primus.data import data_arguments

    return data_arguments(dataset, config)
