"""``amd_megatron`` launch: Megatron-LM ``pretrain_gpt.py`` on ROCm through torchrun.

Under ``iso`` the only addition to what the NVIDIA side gets is what ROCm
needs to train correctly at full speed on MI300X-class GPUs; anything more
(queue counts, kernel choices) is a ``tuned`` preset deviation.
"""

from __future__ import annotations

from tprimat.contract import LaunchContext, LaunchPlan
from tprimat.plugins.megatron.pretrain import megatron_plan

#: Without it the HSA runtime reclaims scratch memory between kernels, which AMD's
#: MI300X training guides and Primus's launcher (base_env.sh) both switch off.
PLATFORM_ENV = {"HSA_NO_SCRATCH_RECLAIM": "1"}

HINT = "the ROCm Primus image (docker/amd.Dockerfile) ships Megatron-LM under $PRIMUS_PATH/third_party/Megatron-LM"


def plan(context: LaunchContext) -> LaunchPlan:
    return megatron_plan(context, backend="amd_megatron", platform_env=PLATFORM_ENV, hint=HINT)
