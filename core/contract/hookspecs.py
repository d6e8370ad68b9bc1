"""The hooks a tprimat plugin can implement, in the order a run calls them.

A plugin is a module (or object) with functions marked ``@tprimat.hookimpl``,
exposed through an entry point in the ``tprimat`` group.  It declares its
backends in :func:`register_backends`; the per-backend hooks
(:func:`prepare_data`, :func:`profile`, :func:`launch`,
:func:`parse_metrics`) are then called on the plugin that owns the selected
backend only, with the backend name as first argument (one plugin may serve
several backends).  By the time a per-backend hook is called the core has
decided the final config (:mod:`tprimat.running.prepare`); hooks render it and
never change it.  Everything else the core needs to know of a backend (launch
options, default platforms, log recognition, warm-up) is declared in its
:class:`~tprimat.contract.backend.BackendSpec`, not in hooks.  Heavy imports
(torch, frameworks) belong inside hook bodies.  After a run, results can be
written to experiment trackers: :func:`register_exporters` declares them, and the
core calls the one the user names.  The reference with examples is
``docs/plugins.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from tprimat.contract.backend import BackendSpec
    from tprimat.contract.exporter import ExporterSpec
    from tprimat.contract.plans import (
        DataArguments,
        LaunchContext,
        LaunchPlan,
        PreparedDataset,
        ProfilePlan,
    )
    from tprimat.contract.records import ParseEvent
    from tprimat.hardware.platform import PlatformInfo
    from tprimat.settings.config import BenchmarkConfig

hookspec = pluggy.HookspecMarker("tprimat")


# -- discovery ---------------------------------------------------------------------------


@hookspec
def register_backends() -> list[BackendSpec]:
    """Declare the backends this plugin provides.

    Called once per plugin when the registry is built.  Return a list of
    :class:`tprimat.contract.backend.BackendSpec` (name, platform, framework,
    requirements, description).  A backend name may be claimed by one
    installed plugin only; a second claim is reported as an error naming both
    distributions and the name becomes unusable until one is removed.
    """


# -- platform ----------------------------------------------------------------------------


@hookspec(firstresult=True)
def detect_platform() -> PlatformInfo | None:
    """Describe the machine this process runs on: AMD/ROCm, NVIDIA/CUDA or CPU.

    Called by ``tprimat detect`` and by the runner before a launch, on the
    machine that runs the job (never when a log is parsed elsewhere).  Return
    a :class:`tprimat.hardware.platform.PlatformInfo`, or None to let the next
    implementation answer.  tprimat's built-in fallback (run last) uses
    ``nvidia-smi``, ``amd-smi``/``rocm-smi`` and ``/dev/kfd`` and never imports torch.
    """


# -- per backend: data, profiling, launch, metrics ---------------------------------------


@hookspec(firstresult=True)
def prepare_data(backend: str, dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments | None:
    """Map a dataset made by ``tprimat prepare-data`` to this backend's data arguments.

    Called before :func:`launch` when the config names a prepared dataset
    (not ``mock``).  Return :class:`tprimat.contract.plans.DataArguments`: command-line
    arguments, config overrides and environment that make the framework read
    ``dataset.path_prefix`` with the tokenizer it was made with.
    """


@hookspec(firstresult=True)
def profile(backend: str, context: LaunchContext) -> ProfilePlan | None:
    """Say how this backend collects a torch-profiler trace for ``context.config.profile``.

    Called before :func:`launch` when profiling is enabled.  Return a
    :class:`tprimat.contract.plans.ProfilePlan`: the extra arguments/overrides/env the
    launch must carry, the globs (relative to the run directory) where traces
    appear, and the iterations that will be profiled (left out of statistics).
    """


@hookspec(firstresult=True)
def launch(backend: str, context: LaunchContext) -> LaunchPlan | None:
    """Plan the training process for one run; the core runner executes the plan.

    ``context.config`` is the final config and ``context.methodology`` what a
    tuned preset adds beyond it (environment, arguments, framework keys); the
    plan applies both and nothing else.  Return a :class:`tprimat.contract.plans.LaunchPlan`: the exact argv, added
    environment, working directory and files to write into the run directory.
    The runner starts it in its own process group, tees every rank's output
    into the run directory, feeds lines to :func:`parse_metrics` as they
    arrive and handles interruption, timeouts and failure.  ``--dry-run``
    prints this plan and starts nothing.
    """


@hookspec(firstresult=True)
def parse_metrics(backend: str, lines: Iterable[str], source: str) -> Iterator[ParseEvent] | None:
    """Turn a framework's log lines into per-iteration records, lazily.

    ``lines`` may be a file being read or a live process's output; ``source``
    names it (for ``file:line`` references).  Yield
    :class:`tprimat.contract.records.IterationRecord` (measured values only: the core
    computes tokens, throughput and everything derived) or, for a run of iteration
    lines read at once, :class:`tprimat.contract.records.IterationBlock` (the same
    records as columns), :class:`tprimat.contract.records.LogFact` (batch size, sequence length, versions
    read from the log), :class:`tprimat.contract.records.EvalRecord` (held-out
    evaluations) and :class:`tprimat.contract.records.ParseIssue` (lines skipped and
    why).  Must be a pure function of the lines: no torch, no hardware.
    """


# -- after a run: exporting results ------------------------------------------------------


@hookspec
def register_exporters() -> list[ExporterSpec]:
    """Declare the experiment trackers this plugin can write results to.

    Called once per plugin when ``tprimat export --to NAME`` or ``--report-to NAME``
    needs the exporters.  Return a list of
    :class:`tprimat.contract.exporter.ExporterSpec` (name, description, the function
    that writes one :class:`~tprimat.contract.exporter.TrackerRun`, requirements).
    A name may be claimed by one installed plugin only; a second claim is reported
    as an error naming both distributions.
    """
