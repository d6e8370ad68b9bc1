"""The compiled modules and the Python code they stand for, for tests that must hold for each.

tprimat's C modules (``setup.py``: ``tprimat.plugins.megatron_core._lines``, the readers of log
lines, and ``tprimat.result._exact``, exact sums of floats) are built at install where a C
compiler is found, and give what the Python code they stand for gives.  Tests that use them run
with each form.  Where a module is not built those runs are skipped, unless the environment sets
``TPRIMAT_REQUIRE_COMPILED`` (as CI does): then they fail.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import Any

import pytest

#: Set (to anything but empty or "0"): the compiled modules must be built, their tests never skip.
REQUIRED = "TPRIMAT_REQUIRE_COMPILED"
LINES = "tprimat.plugins.megatron_core._lines"
EXACT = "tprimat.result._exact"


def compiled_or_skip(name: str = LINES) -> Any:
    """The compiled module ``name``; the test is skipped where it is not built (failed where it is required)."""
    try:
        return import_module(name)
    except ImportError:
        if os.environ.get(REQUIRED, "") not in ("", "0"):
            pytest.fail(f"{REQUIRED} is set but {name} is not built (a C compiler at install?)")
        pytest.skip(f"{name} is not built here (no C compiler at install)")
