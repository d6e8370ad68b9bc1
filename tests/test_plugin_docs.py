"""docs/plugins.md describes the contract as the code defines it.

Every hook spec has a ``### name`` section whose text gives its signature as
the code spells it, every field of ``BackendSpec`` has a row in the docs'
table of declarations, every field of ``ExporterSpec`` a row in the table of
the ``register_exporters`` section, and the contract version the docs name is
the code's.
A hook or field added without documentation, or a signature changed without
its documentation, fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import attrs
import pytest

from tprimat.contract import hookspecs
from tprimat.contract.backend import BackendSpec
from tprimat.contract.exporter import ExporterSpec
from tprimat.contract.version import CONTRACT_VERSION

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
HOOKS = sorted(name for name, value in vars(hookspecs).items() if hasattr(value, "tprimat_spec"))


def _signature(name: str) -> str:
    """``name(a, b) -> Answer`` as the docs write it: parameter names and the return annotation."""
    function = getattr(hookspecs, name)
    signature = inspect.signature(function)
    return f"{name}({', '.join(signature.parameters)}) -> {signature.return_annotation}"


def _section(name: str) -> str:
    match = re.search(rf"^### `{name}`\n(.*?)(?=^#{{2,3}} |\Z)", DOCS, re.S | re.M)
    assert match, f"docs/plugins.md has no section ### `{name}`"
    return match.group(1)


def test_every_hook_is_a_spec_the_registry_knows():
    assert {"register_backends", "detect_platform", "prepare_data", "profile", "launch", "parse_metrics"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_each_hook_is_documented_with_its_signature(hook):
    assert f"`{_signature(hook)}`" in " ".join(_section(hook).split())


@pytest.mark.parametrize("field", [f.name for f in attrs.fields(BackendSpec)])
def test_each_backend_spec_field_has_a_row_in_the_declarations_table(field):
    assert re.search(rf"^\| `{field}` \|", DOCS, re.M), f"docs/plugins.md: no table row for BackendSpec.{field}"


@pytest.mark.parametrize("field", [f.name for f in attrs.fields(ExporterSpec)])
def test_each_exporter_spec_field_has_a_row_in_the_register_exporters_section(field):
    section = _section("register_exporters")
    assert re.search(rf"^\| `{field}` \|", section, re.M), f"docs/plugins.md: no table row for ExporterSpec.{field}"


def test_the_documented_contract_version_is_the_code_s():
    assert f'tprimat_contract = "{CONTRACT_VERSION}"' in DOCS
    assert f"provides contract {CONTRACT_VERSION}" in DOCS
    assert re.search(rf"^\| {re.escape(CONTRACT_VERSION)} \| ", DOCS, re.M), "the version table has no row for it"
    assert re.search(r"^\| 1\.1 \| .*`register_exporters`", DOCS, re.M)
