"""A compiled module is loaded unless the environment asks for Python (``tprimat.contract.compiled_module``);
``compiled_state`` says which of the modules setup.py builds are in use, and if not, why."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

from tests.compiled import EXACT, LINES, compiled_or_skip
from tprimat.contract import compiled_module
from tprimat.contract.compiled import BUILT_MODULES, IN_USE, CompiledState, compiled_state


def test_no_compiled_module_where_pure_python_is_asked_for(monkeypatch):
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "1")
    assert compiled_module(LINES) is None and compiled_module(EXACT) is None
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "0")
    assert compiled_module(LINES) is compiled_or_skip(LINES)
    assert compiled_module(EXACT) is compiled_or_skip(EXACT)
    assert compiled_module("tprimat.plugins.megatron_core._no_such_module") is None


def test_setup_builds_exactly_the_modules_doctor_reports():
    tree = ast.parse((Path(__file__).parents[2] / "setup.py").read_text())
    built = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Extension"
    ]
    assert sorted(built) == sorted(BUILT_MODULES) and len(set(built)) == len(built)


def _imports(monkeypatch, failing: dict[str, ImportError]) -> None:
    """Make importlib fail for the names in ``failing`` (as where they are not built), and give
    an empty module for every other compiled module (as where it is built)."""
    real = importlib.import_module

    def import_module(name, package=None):
        if name in failing:
            raise failing[name]
        if name in BUILT_MODULES:
            return ModuleType(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", import_module)


def test_built_modules_are_in_use(monkeypatch):
    monkeypatch.delenv("TPRIMAT_PURE_PYTHON", raising=False)
    _imports(monkeypatch, {})
    assert compiled_state() == tuple(CompiledState(module=name, in_use=True, reason=IN_USE) for name in BUILT_MODULES)
    assert all(compiled_module(name) is not None for name in BUILT_MODULES)


def test_modules_turned_off_are_not_in_use_and_say_why(monkeypatch):
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "1")
    _imports(monkeypatch, {})
    assert compiled_state() == tuple(
        CompiledState(module=name, in_use=False, reason="turned off by TPRIMAT_PURE_PYTHON") for name in BUILT_MODULES
    )
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "0")
    assert all(state.in_use for state in compiled_state())


def test_a_module_not_built_is_told_from_one_turned_off(monkeypatch):
    _imports(monkeypatch, {EXACT: ModuleNotFoundError(f"No module named {EXACT!r}", name=EXACT)})
    for pure_python in ("", "1"):  # unsetting the switch would not bring a missing module in
        monkeypatch.setenv("TPRIMAT_PURE_PYTHON", pure_python)
        exact = {state.module: state for state in compiled_state()}[EXACT]
        assert exact == CompiledState(module=EXACT, in_use=False, reason="not built (no C compiler at install)")
        assert compiled_module(EXACT) is None
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "")
    assert {state.module: state.in_use for state in compiled_state()} == {LINES: True, EXACT: False}


def test_a_module_built_that_does_not_load_names_the_error(monkeypatch):
    monkeypatch.delenv("TPRIMAT_PURE_PYTHON", raising=False)
    _imports(monkeypatch, {LINES: ImportError("undefined symbol: PyFoo")})
    lines = {state.module: state for state in compiled_state()}[LINES]
    assert not lines.in_use and lines.reason == "built but does not load (undefined symbol: PyFoo)"
    assert compiled_module(LINES) is None


def test_the_modules_built_here_are_reported_in_use(monkeypatch):
    monkeypatch.delenv("TPRIMAT_PURE_PYTHON", raising=False)
    for name in BUILT_MODULES:
        compiled_or_skip(name)
    assert all(state.in_use for state in compiled_state())
