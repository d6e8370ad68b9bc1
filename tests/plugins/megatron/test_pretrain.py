"""The ``torchrun … pretrain_gpt.py`` plan: a tuned preset's Megatron keys go through the settings model."""

from __future__ import annotations

import attrs
import pytest

from tests.plugins.launching import prepared
from tprimat.errors import TprimatError
from tprimat.plugins.megatron.settings import from_argv
from tprimat.settings.methodology import Resolved


def _tuned(run, **kwargs):
    resolved = Resolved(methodology="tuned", config=run.context.config, preset="test", **kwargs)
    return attrs.evolve(run.context, methodology=resolved)


def _dests(plan) -> dict:
    argv = list(plan.argv)
    return from_argv(argv[argv.index(next(a for a in argv if a.endswith("pretrain_gpt.py"))) + 1 :])


@pytest.mark.parametrize("backend", ["amd_megatron", "nvd_megatron"])
def test_a_tuned_destination_is_rendered_as_its_flag(backend, tmp_path):
    from tprimat.contract.registry import Registry

    run = prepared(backend, "llama3.1-8b", tmp_path)
    plan = Registry.from_environment({}).launch(
        backend,
        context=_tuned(
            run,
            overrides={"cross_entropy_fusion_impl": "te", "apply_rope_fusion": False},
            env={"X_TUNED": "1"},
            args=("--manual-gc",),
        ),
    )
    dests = _dests(attrs.evolve(plan, argv=tuple(a for a in plan.argv if a != "--manual-gc")))
    assert dests["cross_entropy_fusion_impl"] == "te" and dests["apply_rope_fusion"] is False
    assert plan.argv[-1] == "--manual-gc" and plan.env["X_TUNED"] == "1"


@pytest.mark.parametrize("backend", ["amd_megatron", "nvd_megatron"])
def test_a_tuned_key_that_is_not_a_megatron_argument_is_refused(backend, tmp_path):
    from tprimat.contract.registry import Registry

    run = prepared(backend, "llama3.1-8b", tmp_path)
    with pytest.raises(TprimatError, match="use_turbo_attention"):
        Registry.from_environment({}).launch(backend, context=_tuned(run, overrides={"use_turbo_attention": True}))


def test_primus_refuses_command_line_arguments_from_a_preset(tmp_path):
    from tprimat.plugins.amd_primus.launcher import plan

    run = prepared("amd_primus", "llama3.1-8b", tmp_path)
    with pytest.raises(TprimatError, match=r"\[backends.amd_primus.overrides\]"):
        plan(_tuned(run, args=("--manual-gc",)))
