"""Fixtures of the Megatron-family plugin's tests."""

from __future__ import annotations

import pytest

from tests.compiled import compiled_or_skip
from tprimat.plugins.megatron_core import compiled


@pytest.fixture(params=["compiled", "python"])
def line_readers(request, monkeypatch) -> str:
    """Run a test with the compiled readers of log lines, then with the Python ones."""
    module = compiled_or_skip() if request.param == "compiled" else None
    monkeypatch.setattr(compiled, "READ_ROWS", None if module is None else module.read_rows)
    monkeypatch.setattr(compiled, "TRIGGER_SPANS", None if module is None else module.trigger_spans)
    monkeypatch.setattr(compiled, "LINE_NUMBERS", None if module is None else module.line_numbers)
    return request.param
