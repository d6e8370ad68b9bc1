"""Which config field decides each key of ``nemo_settings.json``.

A tuned preset's ``[backends.nvd_nemo.overrides]`` are merged into the settings
file the launch script reads; these keys are decided by config fields (or the
model registry, or the benchmark's fixed rules), so the core refuses a preset
that sets one of them (see :attr:`~tprimat.contract.backend.BackendSpec.config_owned`).
Plain tables only: declaring a backend must stay cheap.
"""

from __future__ import annotations

#: Settings-file key -> the config field that decides it.
OWNER: dict[str, str] = {
    "recipe": "benchmark.model",
    "name": "tprimat run --run-id",
    "dir": "tprimat run --output",
    "num_nodes": "launch.nnodes",
    "num_gpus_per_node": "launch.nproc_per_node",
    "max_steps": "benchmark.iterations",
    "seed": "benchmark.seed",
    "seq_length": "training.seq_length",
    "micro_batch_size": "training.micro_batch_size",
    "global_batch_size": "training.global_batch_size",
    "init_method_std": "training.init_method_std",
    "vocab_size": "model.vocab_size",
    "padded_vocab_size": "model.vocab_size",
    "architecture": "model (the registry's architecture)",
    "parallel": "parallel.*",
    "optimizer": "training.* (optimizer and schedule)",
    "precision": "precision.dtype",
    "fp8_format": "precision.fp8_recipe",
    "kernels": "kernels.*",
    "recompute": "training.recompute",
    "data": "data.dataset",
    "validation": "convergence.*",
    "profile": "profile.*",
}
