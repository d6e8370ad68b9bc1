"""``tprimat config show`` resolves the config as ``tprimat run`` does here; a run names its user preset."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from tprimat import hookimpl
from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.settings.config import default_config_dict


class _CpuOnly:
    """This machine, as a CPU-only machine (no GPU tool answers)."""

    @hookimpl(tryfirst=True)
    def detect_platform(self) -> PlatformInfo:
        return PlatformInfo(platform="cpu", device_name="a test CPU", device_count=2, source="test")


def _invoke(*args: str, env: dict[str, str] | None = None):
    registry = Registry.from_environment()
    registry.register(_CpuOnly(), name="cpu-only")
    return CliRunner().invoke(cli, list(args), obj={"registry": registry}, env=env, catch_exceptions=False)


@pytest.mark.torch  # the CPU's default backend (torch) must be usable, as for `tprimat run`
def test_on_a_cpu_the_shown_config_is_the_cpu_preset_that_run_uses(tmp_path):
    shown = _invoke("config", "show", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    cpu = default_config_dict(cpu=True)
    assert data["config"]["training"]["seq_length"] == cpu["training"]["seq_length"]
    assert data["config"]["benchmark"]["model"] == cpu["benchmark"]["model"]
    assert data["layers"][1].startswith("CPU preset (tprimat/settings/cpu.toml)")
    assert data["backend"].startswith("torch (")

    dry = _invoke("run", "--dry-run", "--output", str(tmp_path))
    assert dry.exit_code == 0, dry.output
    run_layers = [line.removeprefix("# config layer: ") for line in dry.output.splitlines() if "config layer:" in line]
    assert run_layers == data["layers"]


def test_the_toml_form_names_each_layer_and_stays_valid_toml():
    shown = _invoke("config", "show", "--set", "training.seq_length=128")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "# layer 2: CPU preset (tprimat/settings/cpu.toml): no GPU, the backend trains on the CPU" in lines
    assert "# layer 3: --set training.seq_length=128" in lines
    assert tomllib.loads(shown.output)["training"]["seq_length"] == 128


def test_a_gpu_backend_planned_here_has_no_cpu_preset():
    data = json.loads(_invoke("config", "show", "--json", "--backend", "amd_primus", "--device", "MI300X").output)
    assert not any("cpu.toml" in layer for layer in data["layers"])
    assert data["config"]["training"]["seq_length"] == default_config_dict()["training"]["seq_length"]


def test_a_user_preset_is_named_by_its_file_and_said_to_be_per_user(tmp_path):
    folder = tmp_path / "presets"
    folder.mkdir()
    preset = folder / "mine.toml"
    preset.write_text(
        '[preset]\nname = "mine"\ndevices = ["MI300X"]\nplatform = "amd"\nsource = "tprimat tune"\n'
        'backend = "amd_primus"\nmodel = "llama3.1-8b"\n\n[config]\n"training.micro_batch_size" = 2\n'
    )
    env = {"TPRIMAT_PRESET_DIR": str(folder)}
    args = ("--backend", "amd_primus", "--model", "llama3.1-8b", "--device", "MI300X")
    dry = _invoke(
        "run", "--dry-run", *args, "--set", "benchmark.methodology=tuned", "--output", str(tmp_path / "r"), env=env
    )
    assert dry.exit_code == 0, dry.output
    (layer,) = [line for line in dry.output.splitlines() if line.startswith("# config layer: tuned preset mine")]
    assert f"from {preset}" in layer and "per-user preset directory" in layer
    assert "shared by every tprimat run of this user" in layer
    shown = _invoke(
        "config", "show", "--json", "--backend", "amd_primus", "--device", "MI300X",
        "--set", "benchmark.methodology=tuned", "--set", 'benchmark.model="llama3.1-8b"', env=env,
    )  # fmt: skip
    data = json.loads(shown.output)
    assert data["layers"][-1] == layer.removeprefix("# config layer: ")
    assert data["config"]["training"]["micro_batch_size"] == 2
