"""``nvd_nemo``: NVIDIA NeMo 2 (Megatron strategy) on CUDA

The plugin declares the backend and answers availability from cheap checks;
see ``docs/plugins.md`` for the hooks a backend implements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tprimat import hookimpl
from tprimat.contract import BackendSpec, LogMatch, Requirements
from tprimat.plugins.megatron_core.memory_lines import memory_peaks
from tprimat.plugins.megatron_core.tunables import TUNABLES
from tprimat.plugins.nvd_nemo.explain import explain_nemo
from tprimat.plugins.nvd_nemo.owned import OWNER
from tprimat.plugins.nvd_nemo.readback import READBACK
from tprimat.plugins.nvd_nemo.stated import read_stated

if TYPE_CHECKING:
    from tprimat.contract import (
        BenchmarkConfig,
        DataArguments,
        LaunchContext,
        LaunchPlan,
        PreparedDataset,
        ProfilePlan,
    )

_STEP_RE = re.compile(r"Training epoch \d+, iteration \d+/\d+\s*\|.*global_step")
_DLL_STEP_RE = re.compile(
    r"DLL \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? - \d+ .*\b(?:train_step_timing|reduced_train_loss) : "
)
_DLLL_STEP_RE = re.compile(r'DLLL \{.*"step": \d+\b.*"(?:train_step_timing|reduced_train_loss)')


def sniff_nemo(lines: Sequence[str], source: str) -> LogMatch | None:
    """NeMo 2's per-step line, NeMo 1's DLLogger step record (stdout or JSON), or NeMo's end-of-run step-time list."""
    for number, line in enumerate(lines, 1):
        if "Training epoch" in line and _STEP_RE.search(line):
            return LogMatch(confidence=0.95, evidence=f"NeMo 2 step line at {source}:{number}")
        if "DLL" in line:
            if _DLL_STEP_RE.search(line):
                return LogMatch(confidence=0.95, evidence=f"NeMo DLLogger step record at {source}:{number}")
            if _DLLL_STEP_RE.search(line):
                return LogMatch(confidence=0.95, evidence=f"NeMo DLLogger JSON step record at {source}:{number}")
        if "train_step_timing in s: [" in line:
            return LogMatch(confidence=0.9, evidence=f"NeMo step-time list at {source}:{number}")
    return None


BACKEND = BackendSpec(
    name="nvd_nemo",
    platform="nvidia",
    framework="nemo",
    description="NVIDIA NeMo 2 (Megatron strategy) on CUDA",
    requires=Requirements(
        python=("torch", "nemo", "megatron"),
        executables=("torchrun",),
        env=(),
        devices=("nvidia-gpu",),
        hint="use the NeMo image (docker/nvd.Dockerfile)",
    ),
    default_for=("nvidia",),
    config_owned=OWNER,
    readback=READBACK,
    # NeMo trains with Megatron-core: the same layout and overlap switches as the Megatron family.
    tunables=TUNABLES,
    memory_peaks=memory_peaks,
    sniff=sniff_nemo,
    explain=explain_nemo,
    stated_facts=read_stated,
)


@hookimpl
def register_backends() -> list[BackendSpec]:
    return [BACKEND]


# Implementations live in submodules that are never named after a hook: importing
# ``tprimat.plugins.nvd_nemo.launch`` would rebind ``launch`` on this package to the
# submodule and hide the hook function from the plugin manager.


@hookimpl
def prepare_data(backend: str, dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    from tprimat.plugins.nvd_nemo.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend: str, context: LaunchContext) -> ProfilePlan:
    """Profile the config's iteration window with this backend's own torch-profiler settings.

    Under Nsight Systems without the torch profiler, the same window as a CUDA profiler range.
    """
    from tprimat.plugins.nvd_nemo.profiling import nsys_plan, profile_plan

    if context.system_profiler == "nsys" and not context.config.profile.enabled:
        return nsys_plan(context)
    return profile_plan(context)


@hookimpl
def launch(backend: str, context: LaunchContext) -> LaunchPlan:
    from tprimat.plugins.nvd_nemo.launcher import plan

    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    from tprimat.plugins.nvd_nemo.parse import parse_nemo

    return parse_nemo(lines, source)
