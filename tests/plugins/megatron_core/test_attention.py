"""megatron-core's attention-backend rule, applied before a plan starts by every backend built on it."""

from __future__ import annotations

import attrs
import pytest

from tests.plugins.launching import prepared
from tprimat.errors import TprimatError
from tprimat.plugins.megatron_core.attention import (
    ATTENTION_ENV,
    AttentionEnvError,
    attention_env_conflicts,
    refuse_attention_conflicts,
)
from tprimat.settings.methodology import Resolved


def test_a_variable_unset_or_equal_to_what_the_backend_sets_is_no_conflict():
    assert attention_env_conflicts("flash", {}) == []
    assert attention_env_conflicts("flash", {"NVTE_FLASH_ATTN": "1", "OTHER": "x"}) == []
    assert attention_env_conflicts("fused", {"NVTE_FLASH_ATTN": "1", "NVTE_UNFUSED_ATTN": "0"}) == ["NVTE_FLASH_ATTN=1"]


def test_a_conflict_is_refused_naming_the_variables_and_the_way_out():
    refuse_attention_conflicts("auto", dict(ATTENTION_ENV["auto"]))  # what megatron-core sets itself
    with pytest.raises(AttentionEnvError, match=r"'flash' with NVTE_FUSED_ATTN=1: megatron-core .* \"auto\""):
        refuse_attention_conflicts("flash", {"NVTE_FUSED_ATTN": "1"})


@pytest.mark.parametrize("backend", ["nvd_megatron", "amd_megatron", "nvd_nemo"])
def test_a_plan_whose_environment_megatron_core_would_refuse_stops_before_it_starts(backend, tmp_path):
    """Megatron-LM and NeMo 2 alike: megatron-core would assert at model build, on the GPUs."""
    from tprimat.contract.registry import Registry

    run = prepared(backend, "llama3.1-8b", tmp_path, ["kernels.attention_backend=flash"])
    tuned = Resolved(methodology="tuned", config=run.context.config, preset="test", env={"NVTE_FUSED_ATTN": "1"})
    with pytest.raises(TprimatError, match="'flash' with NVTE_FUSED_ATTN=1") as refused:
        Registry.from_environment({}).launch(backend, context=attrs.evolve(run.context, methodology=tuned))
    assert isinstance(refused.value.__cause__, AttentionEnvError) and refused.value.exit_code == 2
