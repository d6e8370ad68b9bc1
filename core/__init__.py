"""tprimat: fair, auditable LLM pretraining benchmarks on AMD and NVIDIA GPUs.

The core is small: hook specifications (:mod:`tprimat.contract.hookspecs`), the plugin
registry (:mod:`tprimat.contract.registry`), the versioned result schema
(:mod:`tprimat.result.schema`) and the one place where every derived number is
computed (:mod:`tprimat.result.metrics`, :mod:`tprimat.result.flops`).  Backends are plugins.
"""

import pluggy

__version__ = "0.1.0"

#: Marker for plugin hook implementations: ``@tprimat.hookimpl``.
hookimpl = pluggy.HookimplMarker("tprimat")

__all__ = ["__version__", "hookimpl"]
