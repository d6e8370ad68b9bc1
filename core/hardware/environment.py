"""The environment variables that change performance, as a run or a microbenchmark records them.

Communication libraries, the GPU runtimes, PyTorch, the frameworks and the
tokenizer all read switches from the environment; two runs that differ only
there can differ in speed, so the manifest and the microbenchmark document keep
every such variable that is set, with secrets redacted.
"""

from __future__ import annotations

import os

from tprimat.secrets import redact_env

#: Environment variables that change performance; recorded when set.
PERFORMANCE_ENV_PREFIXES = (
    "NCCL_",
    "RCCL_",
    "HSA_",
    "HIP_",
    "ROCM_",
    "CUDA_",
    "TORCH_",
    "PYTORCH_",
    "NVTE_",
    "TE_",
    "OMP_",
    "GPU_MAX_HW_QUEUES",
    "PRIMUS_",
    "MEGATRON_",
    "NEMO_",
    "HF_",
    "TOKENIZERS_",
    "NVIDIA_",
    "MIOPEN_",
    "ROCBLAS_",
    "HIPBLASLT_",
    "TORCHINDUCTOR_",
    "UB_",
)


def performance_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that affect performance, secrets redacted."""
    env = os.environ if environ is None else environ
    chosen = {k: v for k, v in env.items() if k.startswith(PERFORMANCE_ENV_PREFIXES)}
    return redact_env(dict(sorted(chosen.items())))
