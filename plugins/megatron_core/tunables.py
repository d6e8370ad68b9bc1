"""What ``tprimat tune`` may search on a backend that trains with Megatron core.

Megatron-LM, Primus and NeMo 2 expose the same megatron-core parallelism,
recomputation and overlap settings, so they share one search space; a backend
adds its own keys to it (Primus: its Turbo attention).
"""

from __future__ import annotations

#: Config keys ``tprimat tune`` may vary, and the values it tries (None: the values from the config).
TUNABLES: dict[str, tuple[object, ...] | None] = {
    "training.micro_batch_size": None,
    "training.recompute": ("none", "selective", "full"),
    "parallel.tensor": None,
    "parallel.pipeline": None,
    "parallel.context": None,
    "parallel.distributed_optimizer": (False, True),
    "parallel.overlap_grad_reduce": (False, True),
    "parallel.overlap_param_gather": (False, True),
}
