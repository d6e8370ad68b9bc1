"""``nvd_megatron``: Megatron-LM pretrain_gpt.py on CUDA

This folder holds what is this backend's own: its declaration (below), its
launcher (``launcher.py``) and its log-line extensions (``parse.py``).  The
``megatron`` plugin (:mod:`tprimat.plugins.megatron`) registers it and serves
its hooks with the settings, data, profiling and log parsing the Megatron
family shares.
"""

from tprimat.contract import BackendSpec, Requirements
from tprimat.plugins.megatron.explain import explain_megatron
from tprimat.plugins.megatron.family import MEGATRON_PATH_OPTION, VERSION_OPTION, WARMUP
from tprimat.plugins.megatron.owned import config_owned
from tprimat.plugins.megatron.readback import READBACK
from tprimat.plugins.megatron.sniff import sniff_megatron
from tprimat.plugins.megatron.stated import read_stated
from tprimat.plugins.megatron_core.memory_lines import memory_peaks
from tprimat.plugins.megatron_core.tunables import TUNABLES

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
            "use the NeMo image (docker/nvd.Dockerfile), which sets MEGATRON_PATH to its Megatron-LM (/opt/megatron-lm)"
        ),
    ),
    options=(
        MEGATRON_PATH_OPTION,
        VERSION_OPTION,
    ),
    sniff=sniff_megatron,
    warmup=WARMUP,
    config_owned=config_owned(),
    readback=READBACK,
    memory_peaks=memory_peaks,
    stated_facts=read_stated,
    explain=explain_megatron,
    tunables=TUNABLES,
)
