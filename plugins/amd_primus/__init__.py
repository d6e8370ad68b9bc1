"""``amd_primus``: AMD Primus (Megatron-LM engine) on ROCm

This folder holds what is this backend's own: its declaration (below), its
launcher (``launcher.py``) and its log-line extensions (``parse.py``).  The
``megatron`` plugin (:mod:`tprimat.plugins.megatron`) registers it and serves
its hooks with the settings, data, profiling and log parsing the Megatron
family shares.
"""

from tprimat.contract import BackendSpec, LaunchOption, Requirements
from tprimat.plugins.amd_primus.logtree import find_logs, log_stream
from tprimat.plugins.megatron.explain import explain_primus
from tprimat.plugins.megatron.family import VERSION_OPTION, WARMUP
from tprimat.plugins.megatron.owned import config_owned
from tprimat.plugins.megatron.readback import READBACK
from tprimat.plugins.megatron.sniff import sniff_primus
from tprimat.plugins.megatron.stated import read_stated
from tprimat.plugins.megatron_core.memory_lines import memory_peaks
from tprimat.plugins.megatron_core.tunables import TUNABLES

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
        LaunchOption(
            name="primus_gpu",
            help="Primus experiment folder to start from (MI300X, MI355X; default from the device)",
        ),
        VERSION_OPTION,
    ),
    default_for=("amd",),
    sniff=sniff_primus,
    warmup=WARMUP,
    config_owned=config_owned(),
    readback=READBACK,
    memory_peaks=memory_peaks,
    stated_facts=read_stated,
    explain=explain_primus,
    find_logs=find_logs,
    log_stream=log_stream,
    # a Primus switch ("<backend>.<key>"); the first value is Primus's own default
    tunables={**TUNABLES, "amd_primus.use_turbo_attention": (False, True)},
)
