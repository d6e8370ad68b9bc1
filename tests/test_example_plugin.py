"""A third-party backend is first class: the installed example plugin (``tests/example_plugin``)
is listed, adds its own ``tprimat run`` option, has its logs auto-detected by ``tprimat parse``
and can be made a platform's default, with no line of core code naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def example_installed():
    try:
        metadata.distribution("tprimat-example-plugin")
    except metadata.PackageNotFoundError:
        if os.environ.get("CI"):
            pytest.fail("tprimat-example-plugin must be installed in CI (see .ci/run)")
        pytest.skip("pip install ./tests/example_plugin")


def tprimat(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tprimat.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        check=False,
    )


def test_its_backend_is_listed():
    done = tprimat("backends", "--json")
    toy = next(b for b in json.loads(done.stdout)["backends"] if b["name"] == "toy")
    assert toy["distribution"] == "tprimat-example-plugin" and toy["status"] == "available"


def test_its_option_is_in_run_help_and_reaches_the_backend(tmp_path):
    help_text = " ".join(tprimat("run", "--help").stdout.split())
    assert "--toy-step-ms" in help_text and "(toy; default $TOY_STEP_MS)" in help_text
    plan = tprimat("run", "--backend", "toy", "--toy-step-ms", "7", "--dry-run", "--output", str(tmp_path))
    assert plan.returncode == 0, plan.stderr
    assert "toy_train.py 12 7 4" in plan.stdout  # iterations, step ms, global batch (CPU preset)
    refused = tprimat("run", "--backend", "torch", "--toy-step-ms", "7", "--dry-run", "--output", str(tmp_path))
    assert refused.returncode == 2 and "--toy-step-ms: not an option of backend torch" in refused.stderr


def test_parse_auto_detects_its_log(tmp_path):
    done = tprimat("run", "--backend", "toy", "--iterations", "5", "--output", str(tmp_path), "--run-id", "t")
    assert done.returncode == 0, done.stderr
    log = tmp_path / "t" / "logs" / "launcher.log"
    parsed = tprimat("parse", str(log), "--json")
    assert parsed.returncode == 0, parsed.stderr
    result = json.loads(parsed.stdout)
    assert result["run"]["backend"] == "toy"
    assert any(
        note.startswith("format detected: toy (toy step line at launcher.log:")
        for note in result["provenance"]["notes"]
    )
    assert result["iterations"]["iteration"] == [1, 2, 3, 4, 5]


def test_tprimat_default_backend_makes_it_a_platform_default(tmp_path):
    plan = tprimat("run", "--dry-run", "--output", str(tmp_path), env={"TPRIMAT_DEFAULT_BACKEND": "cpu=toy"})
    assert plan.returncode == 0, plan.stderr
    assert "# backend: toy (TPRIMAT_DEFAULT_BACKEND names it for cpu)" in plan.stdout


def test_core_code_names_no_built_in_backend():
    """Only documentation and data tables in core/ may name a built-in backend or framework."""
    import io
    import re
    import tokenize

    names = re.compile(r"amd_primus|amd_megatron|nvd_megatron|nvd_nemo")
    # Data tables that describe outside formats, not behaviour: the earlier scripts' result
    # file names (train_amd_prim_*.json was written by a Primus run).
    tables = {"core/parse/legacy.py": ("LEGACY_FRAMEWORKS", "LEGACY_STACKS")}
    offenders = []
    for path in (ROOT / "core").rglob("*.py"):
        relative = str(path.relative_to(ROOT))
        text = path.read_text()
        for table in tables.get(relative, ()):  # blank out the table's own lines
            start = text.index(table + " = {")
            end = text.index("}", start)
            text = text[:start] + "\n" * text[start:end].count("\n") + text[end + 1 :]
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        previous = None
        for token in tokens:
            docstring = token.type == tokenize.STRING and (
                previous is None or previous.type in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT)
            )
            if token.type in (tokenize.NAME, tokenize.STRING) and not docstring and names.search(token.string):
                offenders.append(f"{relative}:{token.start[0]}: {token.string[:60]}")
            if token.type not in (tokenize.NL, tokenize.COMMENT):
                previous = token
    assert not offenders, "behaviour keyed on a built-in backend name:\n" + "\n".join(offenders)
