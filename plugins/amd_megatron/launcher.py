"""``amd_megatron`` launch: Megatron-LM ``pretrain_gpt.py`` on ROCm through torchrun.

Under ``iso`` the only addition to what the NVIDIA side gets is what ROCm
needs to train correctly at full speed on MI300X-class GPUs; anything more
(queue counts, kernel choices) is a ``tuned`` preset deviation.

ROCm's Primus images bake ``NVTE_FLASH_ATTN=0`` and ``NVTE_FUSED_ATTN=1`` into
their environment (Primus's ``attention_backend_patches.py``: Transformer
Engine's flash attention is unavailable on ROCm, its CK fused attention is
used).  Stock Megatron-LM asserts that these variables are unset or equal to
what ``--attention-backend`` wants, so with the image's values every backend
but ``fused`` would stop at model construction.  The plan therefore sets the
three variables to exactly what megatron-core's rule expects for the
configured backend (:data:`~tprimat.plugins.megatron_core.attention.ATTENTION_ENV`).
"""

from __future__ import annotations

from tprimat.contract import LaunchContext, LaunchPlan
from tprimat.plugins.megatron.pretrain import megatron_plan
from tprimat.plugins.megatron_core.attention import ATTENTION_ENV

#: Without it the HSA runtime reclaims scratch memory between kernels, which AMD's
#: MI300X training guides and Primus's launcher (base_env.sh) both switch off.
PLATFORM_ENV = {"HSA_NO_SCRATCH_RECLAIM": "1"}

HINT = "the ROCm Primus image (docker/amd.Dockerfile) ships Megatron-LM under $PRIMUS_PATH/third_party/Megatron-LM"


def plan(context: LaunchContext) -> LaunchPlan:
    env = {**PLATFORM_ENV, **ATTENTION_ENV[context.config.kernels.attention_backend]}
    return megatron_plan(context, backend="amd_megatron", platform_env=env, hint=HINT)
