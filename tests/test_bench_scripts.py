"""The commands in bench/ still start: they import the package's current modules (a rename breaks them silently)."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
COMMANDS = sorted(p for p in BENCH.glob("*.py") if "__main__" in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_tprimat_name_a_bench_script_imports_exists(script):
    """Imports inside functions too (``--help`` does not run them)."""
    missing = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tprimat"):
            module = importlib.import_module(node.module)
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tprimat"):
                    importlib.import_module(alias.name)
    assert not missing


@pytest.mark.parametrize("script", COMMANDS, ids=lambda p: p.name)
def test_each_bench_command_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout


def test_the_harness_bench_measures_the_config_tprimat_run_decides():
    spec = importlib.util.spec_from_file_location("harness_overhead", BENCH / "harness_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = argparse.Namespace(model=None, set=["benchmark.iterations=7", "training.seq_length=64"])
    config, platform = module._config(args)
    assert config.benchmark.iterations == 7 and config.training.seq_length == 64
    assert config.launch.nproc_per_node == 1
    assert platform.device_name


def _shell_commands(script: Path) -> list[list[str]]:
    """The ``tprimat`` command lines of a shell script, continuation lines joined, split as the shell would."""
    import shlex

    text = script.read_text(encoding="utf-8").replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if "tprimat" in words:
            commands.append([w.rstrip(";") for w in words[words.index("tprimat") + 1 :]])
    return commands


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.sh")), ids=lambda p: p.name)
def test_every_tprimat_option_a_bench_shell_script_uses_exists(script):
    """The GPU script runs where CI cannot: its commands are checked against the CLI here."""
    from click.testing import CliRunner

    from tprimat.cli import cli

    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    commands = _shell_commands(script)
    assert commands
    for words in commands:
        path = []
        for word in words:
            if word.startswith("-") or "/" in word or "$" in word:
                break
            path.append(word)
        shown = CliRunner().invoke(cli, [*path, "--help"])
        assert shown.exit_code == 0, (path, shown.output)
        for option in (w for w in words if w.startswith("--")):
            assert option in shown.output, (path, option)
