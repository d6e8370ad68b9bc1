"""The generated NeMo script at launch, on real NeMo: the resolved recipe written before training, and its checks.

The script is imported here (not started), so its start-up runs in this
process up to the point where training would begin.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.plugins.nvd_nemo.nemoplans import need_nemo, plan_environment, written
from tprimat.plugins.nvd_nemo import nemo_pretrain
from tprimat.plugins.nvd_nemo.launcher import SETTINGS

pytestmark = pytest.mark.nemo


@pytest.fixture(autouse=True)
def _need_nemo():
    need_nemo()


@pytest.fixture
def iso_run(tmp_path, monkeypatch):
    """The shipped llama3.1-8b iso plan, written out, with this process under the plan's environment."""
    run = written("llama3.1-8b", "iso", tmp_path)
    for name, value in plan_environment(run).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RANK", raising=False)
    return run


def test_launch_writes_the_resolved_recipe_beside_the_settings(iso_run):
    settings_path = iso_run.run_dir / SETTINGS
    settings, recipe = nemo_pretrain.start(nemo_pretrain.parse_args(["--settings", str(settings_path)]))
    path = iso_run.run_dir / nemo_pretrain.RESOLVED
    written_json = json.loads(path.read_text(encoding="utf-8"))
    assert written_json == json.loads(json.dumps(nemo_pretrain.resolve(recipe)))
    assert [p.name for p in iso_run.run_dir.iterdir() if p.name.endswith(".tmp")] == []
    model = written_json["model"]
    assert model["attention_backend"] == settings["kernels"]["attention_backend"]
    assert model["init_method_std"] == settings["init_method_std"]
    assert model["cross_entropy_loss_fusion"] is True and model["apply_rope_fusion"] is True
    assert written_json["environment"] == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert written_json["check"]["accepted"], written_json["check"]["problems"]
    assert written_json["set_at_setup"]["model.bf16"] is True  # from the precision plugin, at start-up
    assert written_json["ddp"]["grad_reduce_in_fp32"] is True


def test_launch_writes_where_asked_and_only_on_rank_zero(iso_run, tmp_path, monkeypatch):
    settings = str(iso_run.run_dir / SETTINGS)
    elsewhere = tmp_path / "records" / "resolved.json"
    monkeypatch.setenv("RANK", "3")
    nemo_pretrain.start(nemo_pretrain.parse_args(["--settings", settings, "--resolved-out", str(elsewhere)]))
    assert not elsewhere.exists() and not (iso_run.run_dir / nemo_pretrain.RESOLVED).exists()
    monkeypatch.setenv("RANK", "0")
    nemo_pretrain.start(nemo_pretrain.parse_args(["--settings", settings, "--resolved-out", str(elsewhere)]))
    assert json.loads(elsewhere.read_text(encoding="utf-8"))["model_class"] == "Llama31Config8B"
    assert not (iso_run.run_dir / nemo_pretrain.RESOLVED).exists()


def test_check_rejects_flash_attention_with_fused_attention_enabled(tmp_path, monkeypatch, capsys):
    """megatron-core's own rule: attention backend flash needs NVTE_FUSED_ATTN unset or 0."""
    run = written("llama3.1-8b", "iso", tmp_path, ('kernels.attention_backend="flash"',))
    for name, value in plan_environment(run).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NVTE_FLASH_ATTN", "1")
    monkeypatch.setenv("NVTE_FUSED_ATTN", "1")
    status = nemo_pretrain.main(["--settings", str(run.run_dir / SETTINGS), "--check"])
    out, err = capsys.readouterr()
    verdict = json.loads(out)["check"]
    assert status == 1 and verdict["accepted"] is False
    assert verdict["problems"] == [
        "attention backend flash and the NVTE_* environment (megatron-core LanguageModule._set_attention_backend): "
        "AssertionError: NVTE_FUSED_ATTN set to 1, but expected 0 for attention backend type flash. "
        "unset NVTE_FLASH_ATTN, NVTE_FUSED_ATTN and NVTE_UNFUSED_ATTN. Use the --attention-backend argument "
        "if you want to choose between (flash/fused/unfused/auto/local). Default is auto."
    ]
    assert "rejected: attention backend flash" in err
    assert os.environ["NVTE_FUSED_ATTN"] == "1"  # the check leaves the environment as it found it


def test_check_reports_nemo_replacing_settings_at_start_up(tmp_path, monkeypatch):
    """NeMo's start-up gives the schedule the trainer's max_steps, and the model the plugin's FP8 and layout."""
    run = written(
        "llama3.1-8b",
        "iso",
        tmp_path,
        ('precision.dtype="fp8"', "parallel.tensor=2", "benchmark.iterations=30"),
    )
    for name, value in plan_environment(run).items():
        monkeypatch.setenv(name, value)
    settings = nemo_pretrain.load_settings(str(run.run_dir / SETTINGS))
    # tprimat refuses to plan another decay length (NeMo would replace it); a settings file
    # edited by hand shows what NeMo does with one
    settings["optimizer"]["decay_steps"] = 40
    resolved = nemo_pretrain.resolve(nemo_pretrain.build_recipe(settings))
    assert resolved["lr_scheduler"]["max_steps"] == 40
    changes = resolved["set_at_setup"]
    assert changes["lr_scheduler.max_steps"] == 30
    assert changes["model.fp8"] == "hybrid" and changes["model.fp8_amax_history_len"] == 1024
    assert changes["model.tensor_model_parallel_size"] == 2
    verdict = resolved["check"]
    assert verdict["accepted"], verdict["problems"]
    assert any(line.startswith("fp8='hybrid'") for line in verdict["not_checked"])


def test_check_names_the_model_config_check_that_fails(tmp_path, monkeypatch):
    """A layout megatron-core refuses: 28 attention heads (Qwen 2.5 7B) do not split over 8 tensor-parallel ranks."""
    run = written("qwen2.5-7b", "iso", tmp_path, ("parallel.tensor=8",))
    for name, value in plan_environment(run).items():
        monkeypatch.setenv(name, value)
    settings = nemo_pretrain.load_settings(str(run.run_dir / SETTINGS))
    verdict = nemo_pretrain.resolve(nemo_pretrain.build_recipe(settings))["check"]
    assert verdict["accepted"] is False
    assert any("parallel layout" in p and "num_attention_heads (28)" in p for p in verdict["problems"]), verdict
