"""Megatron-core's own checks accept every shipped Megatron-family plan, and refuse real mistakes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core")

from tests.plugins.launching import prepared  # noqa: E402
from tprimat.plugins.megatron.corecheck import (  # noqa: E402
    CoreCheck,
    MegatronCoreMissingError,
    check_with_megatron_core,
)
from tprimat.plugins.megatron.settings import ARGS  # noqa: E402
from tprimat.plugins.megatron_core.attention import ATTENTION_ENV  # noqa: E402

BACKENDS = ["amd_primus", "amd_megatron", "nvd_megatron"]
MODELS = ["llama3.1-8b", "qwen2.5-7b"]
METHODOLOGIES = ["iso", "tuned"]


def plan_inputs(backend: str, model: str, methodology: str, tmp_path: Path) -> tuple[dict, dict[str, str], int]:
    """The settings, environment and world size of the plan ``tprimat run`` would launch on the target GPU."""
    run = prepared(backend, model, tmp_path, [f'benchmark.methodology="{methodology}"'])
    # what the plan renders; Primus's own keys (use_turbo_attention) are not Megatron-LM arguments
    settings = {key: value for key, value in run.plan.framework.rendered.items() if key in ARGS}
    world_size = run.config.launch.nnodes * run.config.launch.nproc_per_node
    return settings, dict(run.plan.env), world_size


def check(settings: dict, env: dict[str, str], world_size: int = 8) -> CoreCheck:
    return check_with_megatron_core(settings, env, world_size=world_size)


@pytest.mark.parametrize("methodology", METHODOLOGIES)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_shipped_plan_is_accepted_by_megatron_core(backend, model, methodology, tmp_path):
    settings, env, world_size = plan_inputs(backend, model, methodology, tmp_path)
    result = check(settings, env, world_size)
    assert result.accepted, "\n".join(result.problems)
    assert "TransformerConfig.__post_init__" in result.checked
    assert "LanguageModule._set_attention_backend" in result.checked


@pytest.fixture
def iso_plan(tmp_path) -> tuple[dict, dict[str, str], int]:
    return plan_inputs("nvd_megatron", "llama3.1-8b", "iso", tmp_path)


def test_flash_attention_with_fused_attention_switched_on_is_refused(iso_plan):
    settings, env, world_size = iso_plan
    result = check({**settings, "attention_backend": "flash"}, {**env, "NVTE_FUSED_ATTN": "1"}, world_size)
    assert not result.accepted
    (problem,) = result.problems
    assert problem.startswith("LanguageModule._set_attention_backend: attention_backend=flash, NVTE_FUSED_ATTN=1: ")
    assert "NVTE_FUSED_ATTN set to 1, but expected 0 for attention backend type flash" in problem


def test_flash_attention_leaves_fused_attention_off_in_the_environment(iso_plan):
    settings, env, world_size = iso_plan
    assert "NVTE_FUSED_ATTN" not in env
    result = check({**settings, "attention_backend": "flash"}, env, world_size)
    assert result.accepted, result.problems
    assert result.env_after["NVTE_FUSED_ATTN"] == "0"
    assert result.env_after["NVTE_FLASH_ATTN"] == "1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"recompute_granularity": "full", "recompute_method": None, "recompute_num_layers": 1},
            "TransformerConfig.__post_init__: recompute_granularity, recompute_method: "
            'Using recompute_granularity: full so recompute_method must be "block" or "uniform"',
        ),
        (
            {"tensor_model_parallel_size": 2, "num_query_groups": 3},
            "TransformerConfig.__post_init__: group_query_attention, num_query_groups, tensor_model_parallel_size: "
            "num_query_groups (3) must be a multiple or divisor of tensor_model_parallel_size (2).",
        ),
        (
            {"sequence_parallel": True},
            "TransformerConfig.__post_init__: sequence_parallel: "
            "Cannot use sequence parallelism without tensor parallelism",
        ),
        (
            {"tensor_model_parallel_size": 8, "context_parallel_size": 2},
            "parallel_state.initialize_model_parallel: tensor_model_parallel_size=8, pipeline_model_parallel_size=1, "
            "context_parallel_size=2, world_size=8: world_size (8) is not divisible by 16",
        ),
        (
            {"global_batch_size": 100},
            "ConstantNumMicroBatchesCalculator: global_batch_size=100, micro_batch_size=1, data-parallel size 8: "
            "global batch size (100) is not divisible by micro batch size (1) times data parallel size (8)",
        ),
    ],
    ids=["full-recompute-without-method", "query-groups-vs-tp", "sp-without-tp", "world-size", "batch"],
)
def test_a_setting_megatron_core_rejects_is_refused_in_its_own_words(iso_plan, change, message):
    settings, env, world_size = iso_plan
    result = check({**settings, **change}, env, world_size)
    assert not result.accepted
    assert message in result.problems


def test_the_plan_environment_is_temporary(iso_plan):
    settings, env, world_size = iso_plan
    check(settings, env, world_size)  # the first call imports megatron-core, which sets variables of its own
    before = dict(os.environ)
    hook = sys.excepthook
    check({**settings, "attention_backend": "flash"}, {**env, "NVTE_FUSED_ATTN": "1", "ONLY_IN_PLAN": "1"}, world_size)
    assert dict(os.environ) == before
    assert sys.excepthook is hook


def test_what_needs_transformer_engine_is_reported_as_unchecked(iso_plan):
    settings, env, world_size = iso_plan
    assert settings["apply_rope_fusion"] is True
    result = check(settings, env, world_size)
    without_te = [line for line in result.unchecked if "apply_rope_fusion" in line]
    if importlib.util.find_spec("transformer_engine") is None:
        assert without_te and "Transformer Engine" in without_te[0]
    else:
        assert not without_te


def test_an_unknown_attention_backend_is_refused(iso_plan):
    settings, env, world_size = iso_plan
    result = check({**settings, "attention_backend": "sdpa"}, env, world_size)
    assert not result.accepted
    assert "attention_backend 'sdpa' is not one of megatron-core's" in result.problems[0]


def test_without_megatron_core_nothing_is_checked(iso_plan, monkeypatch):
    settings, env, world_size = iso_plan
    monkeypatch.setitem(sys.modules, "megatron.core", None)  # `import megatron.core` raises ImportError
    with pytest.raises(MegatronCoreMissingError, match="megatron-core cannot be imported"):
        check(settings, env, world_size)


def test_importing_the_checker_does_not_import_megatron_core():
    code = "import sys, tprimat.plugins.megatron.corecheck; print('megatron.core' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("backend", sorted(ATTENTION_ENV))
def test_the_plans_attention_environment_is_what_megatron_core_wants(backend, iso_plan):
    # the table amd_megatron's plan sets, checked against megatron-core's own rule
    settings, env, world_size = iso_plan
    result = check({**settings, "attention_backend": backend}, {**env, **ATTENTION_ENV[backend]}, world_size)
    assert result.accepted, result.problems
    assert {k: result.env_after[k] for k in ATTENTION_ENV[backend]} == ATTENTION_ENV[backend]


@pytest.mark.parametrize("methodology", METHODOLOGIES)
@pytest.mark.parametrize("model", MODELS)
def test_amd_megatron_plans_survive_the_rocm_images_baked_attention_environment(model, methodology, tmp_path):
    # Primus's ROCm images set NVTE_FLASH_ATTN=0 and NVTE_FUSED_ATTN=1; stock Megatron-LM asserts
    # them against --attention-backend, so the plan's own values must replace them.
    settings, env, world_size = plan_inputs("amd_megatron", model, methodology, tmp_path)
    baked = {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1"}
    result = check(settings, {**baked, **env}, world_size)
    assert result.accepted, "\n".join(result.problems)
    assert not check(settings, {**env, **baked}, world_size).accepted or settings["attention_backend"] == "fused"
