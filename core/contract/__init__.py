"""The plugin contract: everything a backend plugin imports from tprimat.

A plugin needs only the names below (``from tprimat.contract import
BackendSpec, LaunchPlan, ...``) and the ``@tprimat.hookimpl`` marker:

* declaring a backend: :class:`BackendSpec`, :class:`Requirements`,
  :class:`LaunchOption`, :class:`LogMatch`, :class:`WarmupRule`;
* the per-backend hooks' arguments and answers: :class:`LaunchContext`,
  :class:`LaunchPlan`, :class:`FrameworkSettings`, :class:`ProfilePlan`, :class:`DataArguments`,
  :class:`PreparedDataset`, :class:`PlatformInfo`;
* profiling: :class:`ProfileWindow` and :func:`check_profile_config`;
* what ``parse_metrics`` reads, a log as :class:`LogFile` (its lines, or its bytes in
  chunks, whose lines :func:`newline_count` counts), and what it yields:
  :class:`IterationRecord` (or a run of them as one :class:`IterationBlock`), :class:`LogFact`,
  :class:`EvalRecord`, :class:`ParseIssue`; a value
  a log prints, typed by one set of rules: :func:`typed_value`; a compiled module of the
  plugin's own, or None where it is not built or ``TPRIMAT_PURE_PYTHON`` asks for Python:
  :func:`compiled_module`;
* declaring an experiment-tracker exporter: :class:`ExporterSpec`, and what it
  receives: :class:`TrackerRun`, :class:`ExportTarget`;
* the final config and model a hook renders: :class:`BenchmarkConfig`, :class:`ModelSpec`,
  :func:`get_model`, :func:`load_config`, :class:`ConfigError`; the error to raise for an
  expected failure, :class:`TprimatError`;
* services for a backend's own training program (prepared data, the held-out split, the
  MLLOG writer): :mod:`tprimat.contract.services`;
* :data:`CONTRACT_VERSION`, the version of this contract; a plugin states the one it
  needs with ``tprimat_contract = "1.0"`` (:mod:`tprimat.contract.version`).

The hook specs are :mod:`tprimat.contract.hookspecs`; the registry that
loads plugins and routes hooks is :mod:`tprimat.contract.registry`.  The
contract imports only the foundation modules, :mod:`tprimat.settings` and
:mod:`tprimat.hardware`, never the result, the runner or the tools above it.
Names are resolved on first use so that importing one of them stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time they load on first use
    # ruff: noqa: F401
    from tprimat import hookimpl
    from tprimat.contract.backend import SNIFF_LINES, BackendSpec, LaunchOption, LogMatch, Requirements, WarmupRule
    from tprimat.contract.compiled import compiled_module
    from tprimat.contract.logfile import LogFile, newline_count
    from tprimat.contract.plans import (
        DataArguments,
        FrameworkSettings,
        LaunchContext,
        LaunchPlan,
        PreparedDataset,
        ProfilePlan,
    )
    from tprimat.contract.readback import Disagreement, SettingsReadback, StatedSettings
    from tprimat.contract.records import (
        REPEATED_LINE,
        EvalRecord,
        FigureColumns,
        IterationBlock,
        IterationRecord,
        LineSources,
        LogFact,
        ParseIssue,
        RankPeak,
        RepeatedLine,
    )
    from tprimat.contract.values import typed_value
    from tprimat.contract.version import CONTRACT_VERSION
    from tprimat.contract.window import ProfileWindow, check_profile_config
    from tprimat.errors import TprimatError
    from tprimat.hardware.platform import PlatformInfo
    from tprimat.settings.config import BenchmarkConfig, ConfigError, load_config
    from tprimat.settings.models import ModelSpec, get_model

_EXPORTS = {
    "BackendSpec": "backend",
    "Requirements": "backend",
    "LaunchOption": "backend",
    "LogMatch": "backend",
    "WarmupRule": "backend",
    "SNIFF_LINES": "backend",
    "LaunchContext": "plans",
    "LaunchPlan": "plans",
    "FrameworkSettings": "plans",
    "StatedSettings": "readback",
    "Disagreement": "readback",
    "SettingsReadback": "readback",
    "ProfilePlan": "plans",
    "ProfileWindow": "window",
    "check_profile_config": "window",
    "DataArguments": "plans",
    "PreparedDataset": "plans",
    "LogFile": "logfile",
    "newline_count": "logfile",
    "IterationRecord": "records",
    "IterationBlock": "records",
    "FigureColumns": "records",
    "LineSources": "records",
    "LogFact": "records",
    "EvalRecord": "records",
    "ParseIssue": "records",
    "RankPeak": "records",
    "REPEATED_LINE": "records",
    "RepeatedLine": "records",
    "ExporterSpec": "exporter",
    "ExportTarget": "exporter",
    "TrackerRun": "exporter",
    "typed_value": "values",
    "compiled_module": "compiled",
    "CONTRACT_VERSION": "version",
    # the final config and the model a hook renders, and the error a plugin raises
    "BenchmarkConfig": "tprimat.settings.config",
    "ConfigError": "tprimat.settings.config",
    "load_config": "tprimat.settings.config",
    "ModelSpec": "tprimat.settings.models",
    "get_model": "tprimat.settings.models",
    "TprimatError": "tprimat.errors",
}

__all__ = [*_EXPORTS, "PlatformInfo", "hookimpl"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = _EXPORTS[name]
        return getattr(importlib.import_module(module if "." in module else f"tprimat.contract.{module}"), name)
    if name == "PlatformInfo":
        from tprimat.hardware.platform import PlatformInfo

        return PlatformInfo
    if name == "hookimpl":
        from tprimat import hookimpl

        return hookimpl
    raise AttributeError(f"module 'tprimat.contract' has no attribute {name!r}")
