"""A compiled module is loaded unless the environment asks for Python (``tprimat.contract.compiled_module``)."""

from __future__ import annotations

from tests.compiled import EXACT, LINES, compiled_or_skip
from tprimat.contract import compiled_module


def test_no_compiled_module_where_pure_python_is_asked_for(monkeypatch):
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "1")
    assert compiled_module(LINES) is None and compiled_module(EXACT) is None
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "0")
    assert compiled_module(LINES) is compiled_or_skip(LINES)
    assert compiled_module(EXACT) is compiled_or_skip(EXACT)
    assert compiled_module("tprimat.plugins.megatron_core._no_such_module") is None
