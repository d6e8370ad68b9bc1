"""The layers of core/ import only downwards, and plugins import only public names.

Layers, lowest first: the foundation modules, settings and hardware, the plugin
contract, the result.  (Running, the tools and the CLI sit above and may use
everything below.)  A newcomer reading the contract never has to read the
runner to understand it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"

FOUNDATION = {"tprimat", "tprimat.errors", "tprimat.atomic", "tprimat.secrets", "tprimat.workers"}
#: package -> the tprimat packages (besides the foundation and itself) it may import
ALLOWED = {
    "settings": set(),
    "hardware": set(),
    "contract": {"settings", "hardware"},
    "memory": {"settings", "hardware"},
    "result": {"settings", "hardware", "contract", "memory"},
}


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_nothing_above_it(layer):
    bad = []
    for path in (CORE / layer).rglob("*.py"):
        for line, module, names in _imports(path):
            if not module.startswith("tprimat"):
                continue
            targets = [module] if module != "tprimat" else [f"tprimat.{n}" for n in names]
            for target in targets:
                if target in FOUNDATION or target == "tprimat.hookimpl" or target == "tprimat.__version__":
                    continue
                package = target.split(".")[1]
                if package != layer and package not in ALLOWED[layer]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not bad, f"core/{layer} imports from a layer above it:\n" + "\n".join(bad)


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
