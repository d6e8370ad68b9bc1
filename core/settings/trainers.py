"""The ways a backend's trainer keeps model and optimizer state (its ``BackendSpec.trainer``).

A module of its own so that declaring a backend (:mod:`tprimat.contract.backend`)
does not load the whole benchmark config: ``tprimat backends`` imports every
backend's declaration and nothing of the config.
"""

from __future__ import annotations

from typing import Literal

#: How a backend's trainer keeps model and optimizer state, for the memory estimate:
#: "megatron-core" (Primus, Megatron-LM, NeMo: bf16 weights, fp32 main gradients and master
#: weights, optionally a distributed optimizer; tensor, pipeline and context parallelism) or
#: "pytorch" (fp32 weights under autocast, DDP or FSDP2 as ``parallel.strategy`` says; data
#: parallelism only).
Trainer = Literal["megatron-core", "pytorch"]
TRAINERS: tuple[Trainer, ...] = ("megatron-core", "pytorch")
