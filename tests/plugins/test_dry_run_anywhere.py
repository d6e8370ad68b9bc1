"""A dry run plans every framework backend on a CPU machine with no checkout and nothing set."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract import backend as backend_module

PLACEHOLDERS = {
    "amd_primus": "${PRIMUS_PATH}",
    "amd_megatron": "${MEGATRON_PATH}",
    "nvd_megatron": "${MEGATRON_PATH}",
    "nvd_nemo": None,
}


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("backend", sorted(PLACEHOLDERS))
def test_a_dry_run_needs_no_framework_checkout(backend, model, tmp_path, monkeypatch):
    for name in ("MEGATRON_PATH", "PRIMUS_PATH", "TPRIMAT_DEFAULT_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    for name in ("amd-gpu", "nvidia-gpu"):
        monkeypatch.setitem(backend_module.DEVICE_CHECKS, name, lambda: False)
    out = CliRunner().invoke(
        cli, ["run", "--backend", backend, "--model", model, "--dry-run", "--output", str(tmp_path / "runs")]
    )
    assert out.exit_code == 0, out.output
    text = out.output
    assert "# NOT RUNNABLE HERE" in text and "## command" in text
    assert f'model = "{model}"' in text  # the effective config is printed
    placeholder = PLACEHOLDERS[backend]
    if placeholder is not None:
        assert f"placeholder {placeholder}" in text and placeholder in text.split("## command")[1]
        assert "assumed Megatron-core 0.15" in text
    if backend == "amd_primus":
        assert "examples/megatron/configs/MI300X/" in text and "micro_batch_size: 1" in text
    assert not (tmp_path / "runs").exists()  # nothing was written
