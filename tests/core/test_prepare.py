"""The core decides once, before any hook: backend, target platform, config layers, methodology."""

from __future__ import annotations

import tomllib

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.builder import result_config
from tprimat.running.dryrun import describe_plan
from tprimat.running.prepare import RunError, RunRequest, prepare


class OnThisMachine(Registry):
    """The real plugins, on a machine of the given platform (no hardware needed)."""

    def __init__(self, platform: PlatformInfo) -> None:
        super().__init__()
        self.load_entry_points()
        self._platform = platform

    def detect_platform(self) -> PlatformInfo:
        return self._platform


CPU = PlatformInfo(platform="cpu", source="test")


@pytest.fixture(scope="module")
def laptop():
    return OnThisMachine(CPU)


def _effective_config(text: str) -> dict:
    return tomllib.loads(text.split("## effective config", 1)[1].split("\n", 1)[1])


def test_a_vendor_dry_run_on_a_laptop_plans_for_the_target_gpu_not_the_cpu_preset(laptop, tmp_path):
    prepared = prepare(RunRequest(backend="nvd_nemo", model="llama3.1-8b", output=tmp_path), laptop)
    assert prepared.platform.platform == "nvidia"
    assert not any("CPU preset" in layer for layer in prepared.layers)
    text = describe_plan(prepared)
    assert "# NOT RUNNABLE HERE: backend nvd_nemo" in text
    shown = _effective_config(text)
    assert shown["training"]["seq_length"] == 8192 and shown["launch"]["nproc_per_node"] == 8
    assert shown["precision"]["dtype"] == "bf16"
    assert shown == prepared.config.to_dict() == result_config(prepared.config).settings


def test_the_cpu_preset_applies_only_to_a_backend_that_trains_on_the_cpu(laptop, tmp_path):
    prepared = prepare(RunRequest(backend="torch", output=tmp_path), laptop)
    assert prepared.platform.platform == "cpu"
    assert any("CPU preset" in layer for layer in prepared.layers)
    assert prepared.config.benchmark.model == "llama3.1-tiny" and prepared.config.training.seq_length == 256


def test_tuned_needs_the_target_device_and_records_every_deviation(laptop, tmp_path):
    tuned = ('benchmark.methodology="tuned"',)
    with pytest.raises(RunError, match="--device"):
        prepare(RunRequest(backend="nvd_nemo", model="llama3.1-8b", overrides=tuned, output=tmp_path), laptop)
    prepared = prepare(
        RunRequest(backend="nvd_nemo", model="llama3.1-8b", overrides=tuned, device="H100", output=tmp_path), laptop
    )
    assert prepared.methodology.preset == "h100"
    # the config the hook receives, the one the result records and the one the dry run shows are one
    assert prepared.context.config is prepared.config
    assert prepared.config.parallel.context == 2
    recorded = result_config(prepared.config, methodology=prepared.methodology, layers=prepared.layers)
    assert recorded.settings["parallel"]["context"] == 2
    assert recorded.preset == "h100" and "parallel.context: 1 -> 2" in recorded.deviations
    assert any(layer.startswith("tuned preset h100") for layer in recorded.layers)
    text = describe_plan(prepared)
    assert "# methodology: tuned" in text and "# tuned deviation: parallel.context: 1 -> 2" in text
    assert _effective_config(text)["parallel"]["context"] == 2


def test_cli_dry_run_for_another_platform_names_the_device(tmp_path):
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "run",
            "--backend",
            "nvd_nemo",
            "--model",
            "qwen2.5-7b",
            "--device",
            "H100",
            "--set",
            'benchmark.methodology="tuned"',
            "--dry-run",
            "--output",
            str(tmp_path),
        ],
        obj={"registry_factory": lambda: OnThisMachine(CPU)},
    )
    assert result.exit_code == 0, result.output
    assert "# platform: nvidia (H100)" in result.output
    refused = runner.invoke(
        cli,
        ["run", "--backend", "nvd_nemo", "--device", "H100", "--output", str(tmp_path)],
        obj={"registry_factory": lambda: OnThisMachine(CPU)},
    )
    assert refused.exit_code == 2 and "use it with --dry-run" in refused.output
