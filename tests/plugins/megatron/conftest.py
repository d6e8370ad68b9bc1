"""Fixtures of the Megatron-family plugin's tests."""

from __future__ import annotations

import pytest

from tests.plugins.megatron_core.readers import compiled_or_skip
from tprimat.plugins.megatron_core import offsets


@pytest.fixture(params=["compiled", "python"])
def offsets_reader(request, monkeypatch) -> str:
    """Run a test with the compiled reader, then with the Python one (``offsets.READ_ITEMS`` None)."""
    reader = compiled_or_skip() if request.param == "compiled" else None
    monkeypatch.setattr(offsets, "READ_ITEMS", reader)
    return request.param
