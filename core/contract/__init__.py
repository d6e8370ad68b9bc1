"""The plugin contract: hook specs, the registry, backend specs, launch plans and parse records.

Everything a plugin author needs is importable from here (see ``docs/plugins.md``).  The contract
imports only the foundation, ``tprimat.settings`` and ``tprimat.hardware``: never the result, the runner or
the tools above it.
"""
