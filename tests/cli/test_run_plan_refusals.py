"""Plans that would launch something other than what tprimat records are refused before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tprimat.cli import cli


def dry_run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["run", "--dry-run", *args], env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("backend", "device", "said"),
    [
        ("nvd_nemo", "MI300X", "--device MI300X is an AMD device and backend nvd_nemo runs on NVIDIA GPUs"),
        ("nvd_megatron", "AMD Instinct MI325X", "is an AMD device and backend nvd_megatron runs on NVIDIA GPUs"),
        ("amd_primus", "H100", "--device H100 is an NVIDIA device and backend amd_primus runs on AMD GPUs"),
        ("amd_megatron", "NVIDIA H200", "is an NVIDIA device and backend amd_megatron runs on AMD GPUs"),
    ],
)
def test_a_device_of_the_other_vendor_is_refused_in_one_line(backend, device, said, tmp_path):
    # before, the other vendor's tuned preset (its environment, its micro-batch) was applied silently
    result = dry_run(
        "--backend", backend, "--device", device, "--set", "benchmark.methodology=tuned", "--output", str(tmp_path)
    )
    assert result.exit_code == 2
    message = result.output.strip()
    assert said in message and len(message.splitlines()) == 1, message


def _user_preset(folder, backend, table: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    device, platform = ("MI300X", "amd") if backend.startswith("amd") else ("H100", "nvidia")
    (folder / "mine.toml").write_text(
        f'[preset]\nname = "mine"\ndevices = ["{device}"]\nplatform = "{platform}"\nsource = "a user"\n'
        f'backend = "{backend}"\nmodel = "llama3.1-8b"\n\n[backends.{backend}]\n{table}\n'
    )
    return {"TPRIMAT_PRESET_DIR": str(folder)}


def _tuned_with_preset(backend: str, table: str, tmp_path):
    """The tuned dry run of ``backend`` with a user preset whose backend table is ``table``."""
    env = _user_preset(tmp_path / "presets", backend, table)
    device = "MI300X" if backend.startswith("amd") else "H100"
    return dry_run(
        "--backend", backend, "--model", "llama3.1-8b", "--device", device,
        "--set", "benchmark.methodology=tuned", "--output", str(tmp_path / "runs"), env=env,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo"])
def test_a_preset_cannot_launch_another_batch_than_the_result_records(backend, tmp_path):
    result = _tuned_with_preset(backend, "overrides = { global_batch_size = 256, seq_length = 4096 }", tmp_path)
    assert result.exit_code == 2, result.output
    assert "global_batch_size (set from training.global_batch_size)" in result.output
    assert "seq_length (set from training.seq_length)" in result.output


@pytest.mark.parametrize("backend", ["amd_megatron", "nvd_megatron"])
def test_a_preset_cannot_add_a_second_flag_for_what_the_config_owns(backend, tmp_path):
    result = _tuned_with_preset(backend, 'args = ["--global-batch-size", "256"]', tmp_path)
    assert result.exit_code == 2, result.output
    assert "--global-batch-size (set from training.global_batch_size)" in result.output


def test_a_device_name_tprimat_does_not_know_is_refused_with_suggestions(tmp_path):
    # H1000 used to match the h100 preset by substring
    result = dry_run("--backend", "nvd_megatron", "--device", "H1000", "--output", str(tmp_path))
    assert result.exit_code == 2
    assert "--device H1000: not a device tprimat knows (did you mean H100-SXM" in result.output
