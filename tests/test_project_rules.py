"""Rules the project keeps about itself: packaging, plugin registration, documented hooks."""

from __future__ import annotations

import ast
import configparser
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tprimat.contract import hookspecs

ROOT = Path(__file__).resolve().parents[1]
SETUP = configparser.ConfigParser()
SETUP.read(ROOT / "setup.cfg")


def _entry_points() -> dict[str, str]:
    lines = SETUP["options.entry_points"]["tprimat"].strip().splitlines()
    return dict(line.split("=", 1) for line in (line.replace(" ", "") for line in lines))


def _listed_packages() -> set[str]:
    return set(SETUP["options"]["packages"].split())


def _served_backends(entry_points: dict[str, str]) -> dict[str, str]:
    """Backend name -> the entry-point plugin that registers it."""
    served: dict[str, str] = {}
    for plugin, target in entry_points.items():
        module = importlib.import_module(target)
        if hasattr(module, "register_backends"):
            served.update((spec.name, plugin) for spec in module.register_backends())
    return served


def _plugin_folders() -> list[str]:
    return sorted(
        p.name
        for p in (ROOT / "plugins").iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and (p / "__init__.py").exists()
    )


def _owners() -> dict[str, str]:
    """plugins/<folder> -> the entry-point plugin it belongs to: itself, or the plugin registering its backend."""
    entry_points = _entry_points()
    return {**_served_backends(entry_points), **{name: name for name in entry_points}}


def _imported_folders(folder: str) -> dict[str, set[str]]:
    """plugins/<other folder> -> the files of plugins/<folder> that import its modules (anywhere in their code)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "plugins" / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = (
                    [f"{node.module}.{a.name}" for a in node.names]
                    if node.module == "tprimat.plugins"
                    else [node.module]
                )
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[:2] == ["tprimat", "plugins"] and len(parts) > 2 and parts[2] != folder:
                    found.setdefault(parts[2], set()).add(str(path.relative_to(ROOT)))
    return found


def _shared_packages(owners: dict[str, str]) -> list[str]:
    """The folders of plugins/ that belong to no plugin: code several plugins share (e.g. megatron_core)."""
    return [name for name in _plugin_folders() if name not in owners]


def test_every_backend_folder_is_served_by_an_entry_point_plugin():
    entry_points = _entry_points()
    for name, target in entry_points.items():
        assert target == f"tprimat.plugins.{name}", f"entry point {name} must name tprimat.plugins.{name}"
    owners = _owners()
    assert _plugin_folders(), "no backends under plugins/"
    for name in _shared_packages(owners):
        # A folder that belongs to no plugin is shared code: it declares nothing, and two plugins use it.
        module = importlib.import_module(f"tprimat.plugins.{name}")
        declared = [
            key for key, value in vars(module).items() if type(value).__name__ in ("BackendSpec", "ExporterSpec")
        ]
        hooks = [key for key, value in vars(module).items() if hasattr(value, "tprimat_impl")]
        assert not declared and not hooks, (
            f"plugins/{name} declares {declared + hooks} but is neither an entry point ('{name} = "
            f"tprimat.plugins.{name}' in setup.cfg's [options.entry_points] tprimat group) nor a backend that "
            "an entry-point plugin registers"
        )
        users = {owners[folder] for folder in owners if name in _imported_folders(folder)}
        assert len(users) >= 2, (
            f"plugins/{name} is no plugin and only {sorted(users) or 'no plugin'} uses it: code one plugin "
            "alone uses belongs inside that plugin"
        )


def test_no_plugin_imports_another_plugins_modules():
    """A plugin imports its own modules and the shared packages (e.g. megatron_core), never another plugin's.

    Two plugins that need the same code get it from a shared package, so that each stays
    installable, testable and replaceable on its own.
    """
    owners = _owners()
    shared = set(_shared_packages(owners))
    bad = []
    for folder in _plugin_folders():
        for imported, files in _imported_folders(folder).items():
            if imported in shared or (folder in owners and owners.get(imported) == owners[folder]):
                continue
            whose = f"the {owners[imported]} plugin's" if imported in owners else "unknown"
            bad += [f"{file} imports tprimat.plugins.{imported} ({whose} modules)" for file in sorted(files)]
    assert not bad, "plugins import another plugin's modules:\n" + "\n".join(bad)


def test_a_backend_folder_served_by_another_plugin_implements_no_hooks():
    """Its hooks are the serving plugin's; a second set would never be called."""
    entry_points = _entry_points()
    for backend, plugin in _served_backends(entry_points).items():
        if backend == plugin or not (ROOT / "plugins" / backend).is_dir():
            continue
        module = importlib.import_module(f"tprimat.plugins.{backend}")
        hooks = [name for name, value in vars(module).items() if hasattr(value, "tprimat_impl")]
        assert hooks == [], f"plugins/{backend} implements {hooks}; the {plugin} plugin serves it"


def test_every_package_is_listed_in_setup_cfg():
    listed = _listed_packages()
    for top, prefix in (("core", "tprimat"), ("plugins", "tprimat.plugins")):
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / top)
            name = ".".join([prefix, *relative.parts])
            assert name in listed, f"{init.parent} is not listed as {name} in setup.cfg packages"


def _hook_names() -> list[str]:
    return [name for name, value in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(value, "tprimat_spec")]


def test_hookspecs_are_the_documented_lifecycle():
    assert set(_hook_names()) == {
        "register_backends",
        "detect_platform",
        "prepare_data",
        "profile",
        "launch",
        "parse_metrics",
        "register_exporters",
    }


@pytest.mark.parametrize("hook", _hook_names())
def test_every_hook_is_documented_and_tested(hook):
    docs = (ROOT / "docs" / "plugins.md").read_text()
    assert re.search(rf"^### `{hook}`", docs, re.M), f"docs/plugins.md has no '### `{hook}`' section"
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    assert re.search(rf"def test_hook_{hook}\b", tests), f"no test named test_hook_{hook}"


def _installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def _require_installed(distribution: str) -> None:
    if not _installed(distribution):
        if os.environ.get("CI"):
            pytest.fail(f"{distribution} must be installed in CI (see .ci/run)")
        pytest.skip(f"{distribution} is not installed (pip install ./tests/...)")


def _backends_json() -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tprimat.cli", "backends", "--json"], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_an_installed_third_party_plugin_is_listed():
    _require_installed("tprimat-example-plugin")
    data = _backends_json()
    toy = next(b for b in data["backends"] if b["name"] == "toy")
    assert toy["distribution"] == "tprimat-example-plugin" and toy["status"] == "available"


def test_an_installed_broken_plugin_shows_as_error_without_breaking_the_listing():
    _require_installed("tprimat-broken-plugin")
    data = _backends_json()
    errors = {e["plugin"]: e["status"] for e in data["plugin_errors"]}
    assert errors["broken_import"].startswith("error: import failed: ModuleNotFoundError")
    assert errors["broken_hooks"].startswith("error: invalid hooks")
    assert {"amd_primus", "nvd_nemo"} <= {b["name"] for b in data["backends"]}


def test_no_plugin_submodule_is_named_after_a_hook():
    """Importing ``plugins/x/launch.py`` would rebind ``launch`` on the plugin package to the
    submodule and silently unregister the hook function of the same name."""
    hooks = set(_hook_names())
    for module in (ROOT / "plugins").glob("*/*.py"):
        if module.parent.name.startswith("_"):
            continue  # shared helper packages are not plugins and implement no hooks
        assert module.stem not in hooks, f"{module} is named after the {module.stem} hook"


def test_no_function_is_longer_than_a_hundred_lines():
    """A function that long does several jobs: split it into named steps."""
    long = []
    for folder in ("core", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 100:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
