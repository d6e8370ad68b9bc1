"""The listing commands: backends, plugins, models, detect, config show, --version."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tprimat import __version__
from tprimat.cli import COMMANDS, cli
from tprimat.contract.registry import Registry
from tprimat.contract.version import CONTRACT_VERSION
from tprimat.hardware.platform import PlatformInfo


def invoke(*args: str, registry: Registry | None = None):
    obj = {"registry_factory": (lambda: registry)} if registry is not None else {}
    return CliRunner().invoke(cli, list(args), obj=obj, catch_exceptions=False)


def test_version_and_help_list_every_command():
    assert invoke("--version").output.strip() == f"tprimat, version {__version__}"
    help_text = invoke("--help").output
    for name in COMMANDS:
        assert name in help_text


def test_backends_json_lists_builtins_with_honest_status():
    result = invoke("backends", "--json")
    data = json.loads(result.output)
    by_name = {b["name"]: b for b in data["backends"]}
    for name, platform in [
        ("amd_primus", "amd"),
        ("amd_megatron", "amd"),
        ("nvd_nemo", "nvidia"),
        ("nvd_megatron", "nvidia"),
    ]:
        entry = by_name[name]
        assert entry["platform"] == platform and entry["distribution"] == "tprimat"
        assert entry["status"].split(":")[0] in {"available", "missing", "error"}
    if not os.path.exists("/dev/kfd"):
        assert "amd-gpu" in by_name["amd_primus"]["status"]
        assert "PRIMUS_PATH" in by_name["amd_primus"]["status"] or os.environ.get("PRIMUS_PATH")


def test_backends_reports_a_missing_env_path_and_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIMUS_PATH", str(tmp_path / "nowhere"))
    data = json.loads(invoke("backends", "--json").output)
    primus = next(b for b in data["backends"] if b["name"] == "amd_primus")
    assert "$PRIMUS_PATH (not a directory" in primus["status"]
    assert "docker/amd.Dockerfile" in primus["hint"]


def test_backends_table_is_printed():
    output = invoke("backends").output
    assert "nvd_nemo" in output and "amd_primus" in output


def test_plugins_json_shows_hooks_and_errors():
    data = json.loads(invoke("plugins", "--json").output)
    names = {p["name"]: p for p in data["plugins"]}
    assert "register_backends" in names["megatron"]["hooks"]
    assert sorted(names["megatron"]["backends"]) == ["amd_megatron", "amd_primus", "nvd_megatron"]
    assert data["contract"] == CONTRACT_VERSION and isinstance(data["plugin_errors"], list)


def test_plugins_lists_each_plugins_exporters_and_whether_they_are_usable(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as where the wandb extra is not installed
    data = json.loads(invoke("plugins", "--json").output)
    names = {p["name"]: p for p in data["plugins"]}
    assert sorted(names["exporters"]["exporters"]) == ["mlflow", "tensorboard", "wandb"]
    assert names["exporters"]["backends"] == [] and names["megatron"]["exporters"] == []
    exporters = {e["name"]: e for e in data["exporters"]}
    assert exporters["wandb"]["plugin"] == "exporters" and exporters["wandb"]["distribution"] == "tprimat"
    assert exporters["wandb"]["status"] == "missing: python package wandb"
    assert exporters["wandb"]["hint"] == "pip install 'tprimat[wandb]'"
    assert exporters["wandb"]["description"].startswith("Weights & Biases")
    output = invoke("plugins").output
    assert "exporters" in output.splitlines()[2]  # the plugins table's column
    assert "wandb: pip install 'tprimat[wandb]'" in output


def test_backends_and_plugins_spell_the_load_errors_key_alike():
    assert "plugin_errors" in json.loads(invoke("backends", "--json").output)
    assert "plugin_errors" in json.loads(invoke("plugins", "--json").output)


def test_models_json_has_parameters_and_flops():
    data = json.loads(invoke("models", "--json", "--seq-length", "4096").output)
    models = {m["name"]: m for m in data["models"]}
    assert models["qwen2.5-7b"]["flops_per_token"] / 1e9 == pytest.approx(44.89, abs=0.005)
    assert models["llama3.1-8b"]["parameters"] == 8_030_261_248
    assert "s/(2h)" in data["flops_formula"]
    assert "51.47" in invoke("models").output


def test_detect_uses_the_registry_hook():
    registry = Registry()

    class FakeGPU:
        from tprimat import hookimpl

        @hookimpl
        def detect_platform(self):
            return PlatformInfo(platform="amd", device_name="AMD Instinct MI300X", device_count=8, notes=("fake",))

    registry.register(FakeGPU(), name="fake")
    data = json.loads(invoke("detect", "--json", registry=registry).output)
    assert data["device_name"] == "AMD Instinct MI300X" and data["notes"] == ["fake"]
    assert "MI300X" in invoke("detect", registry=registry).output


def test_config_show_and_errors(tmp_path):
    data = json.loads(invoke("config", "show", "--json", "--set", "training.seq_length=2048").output)
    assert data["config"]["training"]["seq_length"] == 2048
    assert data["config_fingerprint"].startswith("sha256:")
    text = invoke("config", "show").output
    assert "[training]" in text and "config_fingerprint" in text
    bad = CliRunner().invoke(cli, ["config", "show", "--set", "training.nope=1"])
    assert bad.exit_code == 2 and "unknown key training.nope" in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.global_batch_size=-1", "training.global_batch_size = -1 must be at least 1"),
        ("benchmark.iterations=0", "benchmark.iterations = 0 must be at least 1"),
        ("training.global_batch_size=abc", 'training.global_batch_size = "abc" must be a whole number'),
    ],
)
def test_an_invalid_value_is_one_line_naming_the_key_and_the_rule(override, message):
    bad = CliRunner().invoke(cli, ["config", "show", "--set", override])
    assert bad.exit_code == 2, bad.output
    (line,) = bad.output.splitlines()
    assert line.startswith(f"Error: --set {override}: ") and message in line, line


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    code = (
        "import sys; from tprimat.cli import main; sys.argv = ['tprimat', *sys.argv[1:]];\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = [m for m in ('torch', 'numpy', 'transformers', 'matplotlib', 'megatron', 'nemo')"
        " if m in sys.modules]\nprint('HEAVY=' + ','.join(heavy), file=sys.stderr)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.parametrize("args", [("backends",), ("backends", "--json"), ("plugins", "--json"), ("--help",)])
def test_listing_never_imports_heavy_packages(args):
    done = _run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert "HEAVY=\n" in done.stderr, done.stderr


def test_python_dash_m_backends_lists_the_backends_without_heavy_imports():
    # Start-up cost is what a command imports; no wall-clock figure is asserted, since the time
    # depends on the machine and its load.  `python -m tprimat.cli` goes through __main__.
    code = (
        "import runpy, sys\n"
        "try:\n    runpy.run_module('tprimat.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('torch', 'numpy', 'transformers', 'matplotlib', 'megatron', 'nemo')"
        " if m in sys.modules]\nprint('HEAVY=' + ','.join(heavy), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "backends", "--json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY=\n" in done.stderr, done.stderr
    names = {entry["name"] for entry in json.loads(done.stdout)["backends"]}
    assert {"torch", "nvd_megatron", "nvd_nemo"} <= names, names


def test_declaring_the_built_in_backends_leaves_the_benchmark_config_unloaded():
    # `tprimat backends` imports every backend's declaration; the config (attrs classes, TOML,
    # hashing) is the larger part of start-up and is needed only by commands that use one.
    code = (
        "import sys\n"
        "from tprimat.plugins import megatron, nvd_nemo, torch\n"
        "specs = [s for p in (megatron, nvd_nemo, torch) for s in p.register_backends()]\n"
        "assert len(specs) == 5, specs\n"
        "print(sorted(m for m in sys.modules if m.startswith('tprimat.settings.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['tprimat.settings.trainers']", done.stdout
