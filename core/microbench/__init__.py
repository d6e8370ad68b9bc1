"""GEMM and attention microbenchmarks: what this GPU achieves on the model's own kernels.

``tprimat microbench`` times the model's GEMM shapes (forward and both
backward GEMMs of every linear layer, through ``torch.matmul``,
``F.linear`` and, where the stack has it, FP8 ``torch._scaled_mm``), a sweep
around them for the maximum achievable matmul FLOP/s (MAMF), and causal,
full and sliding-window attention through SDPA and flash-attn.  See
``docs/microbench.md`` for the method and the formulas.

This package imports without torch; only :mod:`tprimat.microbench.runner`'s
``run_microbench`` loads it.  Other commands use :func:`latest_for_device`
and :func:`mamf_utilisation`.
"""

from tprimat.microbench.formulas import attended_pairs, attention_flops, gemm_flops
from tprimat.microbench.shapes import GemmShape, model_gemm_shapes, sweep_shapes
from tprimat.microbench.store import (
    ENV_DIRECTORY,
    KIND,
    SCHEMA_VERSION,
    MicrobenchError,
    default_directory,
    latest_for_device,
    load,
    mamf_utilisation,
    save,
    summarize,
)

__all__ = [
    "ENV_DIRECTORY",
    "KIND",
    "SCHEMA_VERSION",
    "GemmShape",
    "MicrobenchError",
    "attended_pairs",
    "attention_flops",
    "default_directory",
    "gemm_flops",
    "latest_for_device",
    "load",
    "mamf_utilisation",
    "model_gemm_shapes",
    "save",
    "summarize",
    "sweep_shapes",
]
