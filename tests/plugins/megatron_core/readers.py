"""The compiled readers of log lines and the Python ones, for tests that must hold for each.

The compiled readers (``_lines``, built at install where a C compiler is found) give what the
Python readers they stand for give; tests of the fast lanes run with each (the fixture
``line_readers`` of ``tests/plugins/megatron/conftest.py``).  Where they are not built those
runs are skipped, unless the environment sets ``TPRIMAT_REQUIRE_COMPILED`` (as CI does): then
they fail.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import Any

import pytest

#: Set (to anything but empty or "0"): the compiled readers must be built, their tests never skip.
REQUIRED = "TPRIMAT_REQUIRE_COMPILED"


def compiled_or_skip() -> Any:
    """The compiled module ``_lines``; the test is skipped where it is not built (failed where it is required)."""
    try:
        return import_module("tprimat.plugins.megatron_core._lines")
    except ImportError:
        if os.environ.get(REQUIRED, "") not in ("", "0"):
            pytest.fail(f"{REQUIRED} is set but the compiled readers are not built (a C compiler at install?)")
        pytest.skip("the compiled readers are not built here (no C compiler at install)")
