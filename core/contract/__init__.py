"""The plugin contract: everything a backend plugin imports from tprimat.

A plugin needs only the names below (``from tprimat.contract import
BackendSpec, LaunchPlan, ...``) and the ``@tprimat.hookimpl`` marker:

* declaring a backend: :class:`BackendSpec`, :class:`Requirements`,
  :class:`LaunchOption`, :class:`LogMatch`, :class:`WarmupRule`;
* the per-backend hooks' arguments and answers: :class:`LaunchContext`,
  :class:`LaunchPlan`, :class:`FrameworkSettings`, :class:`ProfilePlan`, :class:`DataArguments`,
  :class:`PreparedDataset`, :class:`PlatformInfo`;
* profiling: :class:`ProfileWindow` and :func:`check_profile_config`;
* what ``parse_metrics`` yields: :class:`IterationRecord`, :class:`LogFact`,
  :class:`EvalRecord`, :class:`ParseIssue`;
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
from typing import Any

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
    "IterationRecord": "records",
    "LogFact": "records",
    "EvalRecord": "records",
    "ParseIssue": "records",
    "RankPeak": "records",
    "REPEATED_LINE": "records",
    "RepeatedLine": "records",
    "CONTRACT_VERSION": "version",
}

__all__ = [*_EXPORTS, "PlatformInfo", "hookimpl"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"tprimat.contract.{_EXPORTS[name]}"), name)
    if name == "PlatformInfo":
        from tprimat.hardware.platform import PlatformInfo

        return PlatformInfo
    if name == "hookimpl":
        from tprimat import hookimpl

        return hookimpl
    raise AttributeError(f"module 'tprimat.contract' has no attribute {name!r}")
