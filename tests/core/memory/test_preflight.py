"""The run's pre-flight memory check: a warning before a run that cannot fit, a refusal with --strict."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tprimat.cli.run import preflight
from tprimat.errors import TprimatError
from tprimat.hardware.platform import PlatformInfo
from tprimat.running.memory_check import memory_findings
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model


def _prepared(tmp_path: Path, *, overrides=(), platform: PlatformInfo, backend: str = "nvd_megatron"):
    return SimpleNamespace(
        config=load_config(overrides=list(overrides)),
        model=get_model("llama3.1-8b"),
        platform=platform,
        backend=backend,
        trainer="megatron-core",
        run_dir=tmp_path / "runs" / "r1",
    )


H100 = PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8, memory_per_device_gib=79.65)
MI300X = PlatformInfo(platform="amd", device_name="AMD Instinct MI300X", device_count=8)


def test_a_configuration_that_cannot_fit_is_a_warning_naming_every_term_and_the_command(tmp_path):
    (finding,) = memory_findings(_prepared(tmp_path, platform=H100))
    assert finding.check == "memory-fit" and finding.severity == "warning"
    # nvidia-smi's 79.7 GiB total, lowered to what CUDA can allocate on an H100 (79.18 GiB).
    assert "needs about 100.5 GiB per GPU" in finding.message and "79.18 GiB" in finding.message
    assert "activations 40.0" in finding.message
    assert "training.recompute=full" in finding.fix
    assert "tprimat memory estimate --model llama3.1-8b --backend nvd_megatron" in finding.fix


def test_nothing_is_said_when_it_fits_or_when_there_is_no_gpu_to_compare_with(tmp_path):
    assert memory_findings(_prepared(tmp_path, platform=MI300X, backend="amd_primus")) == []
    assert memory_findings(_prepared(tmp_path, platform=H100, overrides=["training.recompute=full"])) == []
    assert memory_findings(_prepared(tmp_path, platform=PlatformInfo(platform="cpu"))) == []
    unknown = PlatformInfo(platform="nvidia", device_name="NVIDIA RTX 9999")
    assert memory_findings(_prepared(tmp_path, platform=unknown)) == []


@pytest.fixture
def quiet_machine(monkeypatch):
    import tprimat.running.doctor as doctor

    monkeypatch.setattr(doctor, "run_checks", lambda **_: [])


def test_run_preflight_warns_and_strict_refuses(tmp_path, quiet_machine, capsys):
    prepared = _prepared(tmp_path, platform=H100)
    recorded = preflight(prepared, strict=False)
    assert [f["check"] for f in recorded] == ["memory-fit"]
    assert "doctor: llama3.1-8b needs about" in capsys.readouterr().err
    with pytest.raises(TprimatError, match="refusing to start"):
        preflight(prepared, strict=True)
