"""Compiled speedups, and the one switch that turns them all off.

tprimat builds small C modules where the install finds a C compiler (``setup.py``), each
standing for Python code that gives the same results where it is not built; a plugin may
ship its own the same way.  :func:`compiled_module` imports one, or gives None where it is
not built or where the environment sets ``TPRIMAT_PURE_PYTHON`` to anything but empty or
``0`` (to compare the two forms, or to rule one out)::

    _LINES = compiled_module("my_plugin._lines")
    READ = None if _LINES is None else _LINES.read   # None: read in Python

:func:`compiled_state` says, for each module tprimat itself builds, whether it is in use here
and if not, why (``tprimat doctor`` prints it).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import attrs

#: The environment variable that asks for Python instead of every compiled module.
PURE_PYTHON = "TPRIMAT_PURE_PYTHON"


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module ``name``, imported; None where it is not built or :data:`PURE_PYTHON`
    asks for Python."""
    if _pure_python_asked():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: The compiled modules this distribution builds.  setup.py's ``ext_modules`` must name
#: exactly these (a test compares them), so that ``tprimat doctor`` reports every one.
BUILT_MODULES = ("tprimat.plugins.megatron_core._lines", "tprimat.result._exact")

#: Why a compiled module is or is not in use (:attr:`CompiledState.reason`).
IN_USE = "built, in use"
TURNED_OFF = f"turned off by {PURE_PYTHON}"
NOT_BUILT = "not built (no C compiler at install)"
NOT_LOADED = "built but does not load"


@attrs.frozen(kw_only=True)
class CompiledState:
    """Whether one compiled module is in use here, and if not, why."""

    module: str
    in_use: bool
    reason: str


def compiled_state() -> tuple[CompiledState, ...]:
    """Whether each of :data:`BUILT_MODULES` is in use, as :func:`compiled_module` decides,
    and if not, why: not built (no C compiler at install), built but failing to load (the error
    is named: an install for another Python, a broken build), or turned off by
    :data:`PURE_PYTHON`.  A module that is missing is said to be missing even where
    :data:`PURE_PYTHON` is set, as unsetting it would not bring it in.  Results are the same
    either way; only speed differs, so this is for ``tprimat doctor`` to tell, not a finding."""
    turned_off = _pure_python_asked()
    states = []
    for name in BUILT_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            reason = NOT_BUILT
        except ImportError as error:
            reason = f"{NOT_LOADED} ({error})"
        else:
            reason = TURNED_OFF if turned_off else IN_USE
        states.append(CompiledState(module=name, in_use=reason == IN_USE, reason=reason))
    return tuple(states)


def _pure_python_asked() -> bool:
    return os.environ.get(PURE_PYTHON, "") not in ("", "0")
