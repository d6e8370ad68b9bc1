"""The packages of core/ import only downwards, and plugins import only the contract.

Every package of ``core/`` has a place in :data:`LAYERS`, lowest first, and
imports only packages below it (the foundation modules are below everything).
A package that is not in the list fails the test, so a new one has to be
placed.  No two packages import each other, even inside a function.  Plugins
import only ``tprimat.contract``, the ``tprimat`` package itself (``hookimpl``,
``errors``) and ``tprimat.plugins`` modules (which plugin may import which:
``tests/test_project_rules.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"

FOUNDATION = {"tprimat", "tprimat.errors", "tprimat.atomic", "tprimat.secrets", "tprimat.workers"}
#: Every package of core/, lowest first: each may import the packages before it, never one after it.
LAYERS = [
    "hardware",
    "settings",
    "contract",
    "memory",
    "result",
    "data",
    "convergence",
    "microbench",
    "trace",
    "running",
    "parse",
    "compare",
    "mlperf",
    "suite",
    "tune",
    "export",
    "cli",
]
#: The contract's one facade over services above it (a backend's training program reads prepared
#: data and writes MLLOG through it); it imports them inside functions, on first use.
FACADES = {"contract/services.py": {"data", "convergence", "mlperf"}}


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
    return found


def _package(target: str) -> str | None:
    """The core package ``target`` names (None: a foundation module, or a name of ``tprimat`` itself)."""
    if target in FOUNDATION or target in {"tprimat.hookimpl", "tprimat.__version__"}:
        return None
    return target.split(".")[1]


def _targets(module: str, names: list[str]) -> list[str]:
    return [module] if module != "tprimat" else [f"tprimat.{n}" for n in names]


def test_every_package_has_a_layer():
    packages = sorted(p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert sorted(set(packages) - set(LAYERS)) == [], "place each new core package in LAYERS"


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_nothing_above_it(layer):
    below = set(LAYERS[: LAYERS.index(layer)])
    bad = []
    for path in (CORE / layer).rglob("*.py"):
        facade = FACADES.get(str(path.relative_to(CORE)), set())
        for line, module, names in _imports(path):
            if not module.startswith("tprimat"):
                continue
            for target in _targets(module, names):
                package = _package(target)
                if package is None or package == layer or package in below or package in facade:
                    continue
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, f"core/{layer} imports from a layer above it:\n" + "\n".join(bad)


def test_only_tests_use_the_testing_kit():
    users = [
        str(path.relative_to(ROOT))
        for folder in (CORE, ROOT / "plugins")
        for path in folder.rglob("*.py")
        if path.name != "testing.py" and any(m == "tprimat.testing" for _, m, _ in _imports(path))
    ]
    assert users == []


def test_plugins_import_only_the_contract():
    allowed = {"tprimat.contract", "tprimat.errors", "tprimat.hookimpl"}
    bad = []
    for path in (ROOT / "plugins").rglob("*.py"):
        for line, module, names in _imports(path):
            if not module.startswith("tprimat") or module.startswith("tprimat.plugins"):
                continue
            for target in _targets(module, names):
                if not any(target == a or target.startswith(a + ".") for a in allowed):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "plugins import tprimat beyond tprimat.contract:\n" + "\n".join(bad)


def test_plugins_import_only_public_names():
    bad = []
    for path in (ROOT / "plugins").rglob("*.py"):
        own = "tprimat.plugins." + path.relative_to(ROOT / "plugins").parts[0]
        for line, module, names in _imports(path):
            if not module.startswith("tprimat") or module.startswith(own):
                continue
            private = [n for n in names if n.startswith("_")]
            private += [part for part in module.split(".") if part.startswith("_")]
            if private:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {', '.join(private)} from {module}")
    assert not bad, "plugins import private names:\n" + "\n".join(bad)
