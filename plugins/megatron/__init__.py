"""``megatron``: the one plugin serving the Megatron-family backends.

``amd_primus`` (Primus on ROCm), ``amd_megatron`` (Megatron-LM on ROCm) and
``nvd_megatron`` (Megatron-LM on CUDA) train with the same Megatron-LM
arguments.  This plugin keeps what they share, once:

* :mod:`~tprimat.plugins.megatron.settings`: the settings model keyed by
  Megatron-LM's argument destinations, its checks, and its two renderings
  (``pretrain_gpt.py`` flags, Primus experiment overrides);
* :mod:`~tprimat.plugins.megatron.data`: prepared-dataset settings;
* :mod:`~tprimat.plugins.megatron.profiling`: the profile window as profiler settings;
* :mod:`~tprimat.plugins.megatron.pretrain`: the ``torchrun … pretrain_gpt.py`` plan;
* :mod:`~tprimat.plugins.megatron.logparse` and :mod:`~tprimat.plugins.megatron.sniff`:
  the Megatron iteration-line parser and the log sniffers.

What NeMo 2 (the ``nvd_nemo`` plugin) shares with these backends, as they all
run on Megatron core (log-line readers, memory lines, the attention-backend
rule, dataset split, tunables), is in :mod:`tprimat.plugins.megatron_core`.

Each backend's folder (``plugins/<backend>/``) holds only its own: its
``BackendSpec``, its launcher with its platform environment, and its
log-line extensions.  The per-backend hooks below receive the backend name
and hand over to that folder.  Submodules are never named after a hook
(importing ``…megatron.launch`` would rebind ``launch`` on this package).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tprimat import hookimpl

if TYPE_CHECKING:
    from tprimat.contract import (
        BackendSpec,
        BenchmarkConfig,
        DataArguments,
        LaunchContext,
        LaunchPlan,
        PreparedDataset,
        ProfilePlan,
    )


@hookimpl
def register_backends() -> list[BackendSpec]:
    from tprimat.plugins.amd_megatron import BACKEND as AMD_MEGATRON
    from tprimat.plugins.amd_primus import BACKEND as AMD_PRIMUS
    from tprimat.plugins.nvd_megatron import BACKEND as NVD_MEGATRON

    return [AMD_PRIMUS, AMD_MEGATRON, NVD_MEGATRON]


@hookimpl
def prepare_data(backend: str, dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    from tprimat.plugins.megatron.data import data_arguments

    return data_arguments(dataset, config)


@hookimpl
def profile(backend: str, context: LaunchContext) -> ProfilePlan:
    """The config's window with the backend's own profiler settings.

    Under Nsight Systems without the torch profiler, ``pretrain_gpt.py`` opens the
    same window as a CUDA profiler range instead.
    """
    if backend == "amd_primus":
        from tprimat.plugins.amd_primus.profiling import profile_plan as primus_plan

        return primus_plan(context)
    from tprimat.plugins.megatron.profiling import nsys_plan, profile_plan

    if context.system_profiler == "nsys" and not context.config.profile.enabled:
        return nsys_plan(context)
    return profile_plan(context)


@hookimpl
def launch(backend: str, context: LaunchContext) -> LaunchPlan:
    """The plan of the backend's own launcher (its folder's ``launcher.py``), imported only when asked."""
    if backend == "amd_primus":
        from tprimat.plugins.amd_primus.launcher import plan
    elif backend == "amd_megatron":
        from tprimat.plugins.amd_megatron.launcher import plan
    else:
        from tprimat.plugins.nvd_megatron.launcher import plan
    return plan(context)


@hookimpl
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[Any]:
    """The backend's own log parser (its folder's ``parse.py``: the family parser and its extensions)."""
    if backend == "amd_primus":
        from tprimat.plugins.amd_primus.parse import parse_primus as parse
    elif backend == "amd_megatron":
        from tprimat.plugins.amd_megatron.parse import parse_rocm_megatron as parse
    else:
        from tprimat.plugins.nvd_megatron.parse import parse_megatron as parse
    return parse(lines, source)
