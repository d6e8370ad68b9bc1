"""Compiled speedups, and the one switch that turns them all off.

tprimat builds small C modules where the install finds a C compiler (``setup.py``), each
standing for Python code that gives the same results where it is not built; a plugin may
ship its own the same way.  :func:`compiled_module` imports one, or gives None where it is
not built or where the environment sets ``TPRIMAT_PURE_PYTHON`` to anything but empty or
``0`` (to compare the two forms, or to rule one out)::

    _LINES = compiled_module("my_plugin._lines")
    READ = None if _LINES is None else _LINES.read   # None: read in Python
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: The environment variable that asks for Python instead of every compiled module.
PURE_PYTHON = "TPRIMAT_PURE_PYTHON"


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module ``name``, imported; None where it is not built or :data:`PURE_PYTHON`
    asks for Python."""
    if os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
