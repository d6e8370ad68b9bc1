"""``nvd_megatron`` launch: Megatron-LM ``pretrain_gpt.py`` on CUDA through torchrun."""

from __future__ import annotations

from tprimat.contract import LaunchContext, LaunchPlan
from tprimat.plugins.megatron.pretrain import megatron_plan

#: NVIDIA needs nothing beyond what Megatron-LM asks for on every platform.
PLATFORM_ENV: dict[str, str] = {}

HINT = "the NeMo image (docker/nvd.Dockerfile) ships Megatron-LM at /opt/megatron-lm"


def plan(context: LaunchContext) -> LaunchPlan:
    return megatron_plan(context, backend="nvd_megatron", platform_env=PLATFORM_ENV, hint=HINT)
