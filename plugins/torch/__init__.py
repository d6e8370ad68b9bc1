"""``torch``: plain PyTorch (transformers models, DDP or FSDP2) on AMD, NVIDIA or CPU.

The framework-neutral reference: the same training program on every vendor,
so that hardware differences can be told apart from framework differences.
It is the default backend where no vendor backend is available (a CPU-only
machine runs a tiny model).  The trainer is :mod:`tprimat.plugins.torch.train`,
launched by torchrun; its per-iteration lines are read back by
:mod:`tprimat.plugins.torch.protocol`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from tprimat import hookimpl
from tprimat.contract import BackendSpec, LogMatch, Requirements

if TYPE_CHECKING:
    from tprimat.contract import (
        BenchmarkConfig,
        DataArguments,
        LaunchContext,
        LaunchPlan,
        PreparedDataset,
        ProfilePlan,
    )


def sniff_torch(lines: Sequence[str], source: str) -> LogMatch | None:
    """The trainer's own iteration record (``TPRIMAT_ITER {...}``), which no other program prints."""
    from tprimat.plugins.torch.protocol import ITER_MARKER

    for number, line in enumerate(lines, 1):
        if ITER_MARKER in line:
            return LogMatch(confidence=0.99, evidence=f"torch-backend iteration record at {source}:{number}")
    return None


BACKEND = BackendSpec(
    name="torch",
    platform="any",
    framework="pytorch",
    description="PyTorch + transformers (DDP/FSDP2) on any device; the reference and CPU default",
    requires=Requirements(
        python=("torch", "transformers"),
        hint="pip install 'tprimat[ml]' (torch 2.13.0 and transformers)",
    ),
    # The default on a machine without a GPU, and wherever no vendor backend is usable.
    default_for=("cpu", "*"),
    sniff=sniff_torch,
    trainer="pytorch",
    tunables={
        "training.micro_batch_size": None,
        "training.recompute": ("none", "full"),  # whole decoder layers only
        "parallel.strategy": ("ddp", "fsdp2"),
    },
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


@hookimpl
def prepare_data(backend: str, dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    from tprimat.plugins.torch.launcher import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend: str, context: LaunchContext) -> ProfilePlan:
    from tprimat.plugins.torch.launcher import profile_plan

    return profile_plan(context)


@hookimpl
def launch(backend: str, context: LaunchContext) -> LaunchPlan:
    from tprimat.plugins.torch.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[object]:
    from tprimat.plugins.torch.protocol import parse_lines

    return parse_lines(lines, source)


# Submodules are not named after hooks (``launch``, ``profile``): importing
# ``tprimat.plugins.torch.launch`` would rebind this module's ``launch`` hook
# to the submodule and hide the hook from every later registry.
