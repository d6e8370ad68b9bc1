"""The two readers of figures at fixed offsets, for tests that must hold for each.

The compiled reader (``_offsets``, built at install where a C compiler is found) and the fast
lane's Python reader give the same values; tests of the fast lane run with each (the fixture
``offsets_reader`` of ``tests/plugins/megatron/conftest.py``).  Where the compiled one is not
built its runs are skipped, unless the environment sets ``TPRIMAT_REQUIRE_COMPILED`` (as CI
does): then they fail.
"""

from __future__ import annotations

import os

import pytest

from tprimat.plugins.megatron_core import offsets

#: Set (to anything but empty or "0"): the compiled reader must be built, its tests never skip.
REQUIRED = "TPRIMAT_REQUIRE_COMPILED"


def compiled_or_skip() -> offsets.ItemsReader:
    """The compiled reader; the test is skipped where it is not built (failed where it is required)."""
    from importlib import import_module

    try:
        return import_module("tprimat.plugins.megatron_core._offsets").read_items
    except ImportError:
        if os.environ.get(REQUIRED, "") not in ("", "0"):
            pytest.fail(f"{REQUIRED} is set but the compiled reader is not built (a C compiler at install?)")
        pytest.skip("the compiled reader is not built here (no C compiler at install)")
