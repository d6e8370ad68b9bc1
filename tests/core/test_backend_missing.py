"""A backend whose framework is missing says what is missing and how to get it: exit 2, one line."""

from __future__ import annotations

import attrs
import pytest

from tprimat.contract.backend import BackendUnavailableError, require_available
from tprimat.contract.registry import Registry
from tprimat.errors import TprimatError


@pytest.mark.parametrize(
    ("backend", "needs", "hint"),
    [
        ("amd_primus", "$PRIMUS_PATH", "docker/amd.Dockerfile"),
        ("amd_megatron", "$MEGATRON_PATH", "docker/amd.Dockerfile"),
        ("nvd_megatron", "$MEGATRON_PATH", "docker/nvd.Dockerfile"),
        ("nvd_nemo", "nvidia-gpu", "docker/nvd.Dockerfile"),
    ],
)
def test_missing_framework_names_what_and_how(backend, needs, hint, monkeypatch):
    monkeypatch.delenv("PRIMUS_PATH", raising=False)
    monkeypatch.delenv("MEGATRON_PATH", raising=False)
    spec = Registry.from_environment({}).backend(backend).spec
    with pytest.raises(BackendUnavailableError) as caught:
        require_available(spec)
    message = str(caught.value)
    assert "\n" not in message
    assert needs in message and hint in message and backend in message
    assert isinstance(caught.value, TprimatError) and caught.value.exit_code == 2


@pytest.mark.parametrize("backend", ["amd_megatron", "nvd_megatron"])
def test_launch_without_megatron_plans_with_a_placeholder_and_says_where_to_point(backend, monkeypatch, tmp_path):
    from tprimat.contract.plans import LaunchContext
    from tprimat.hardware.platform import PlatformInfo
    from tprimat.settings.config import load_config
    from tprimat.settings.models import get_model

    monkeypatch.delenv("MEGATRON_PATH", raising=False)
    context = LaunchContext(
        run_id="r",
        run_dir=tmp_path,
        config=load_config(None, []),
        model=get_model("llama3.1-8b"),
        platform=PlatformInfo(platform="cpu"),
    )
    registry = Registry.from_environment({})
    # No checkout: a plan with a named placeholder (the core marks it NOT RUNNABLE HERE) that says
    # where to point and what it assumed; a path that is not a checkout is an error.
    plan = registry.launch(backend, context=context)
    assert "${MEGATRON_PATH}/pretrain_gpt.py" in plan.argv
    notes = " ".join(plan.notes)
    assert "--megatron-path or $MEGATRON_PATH" in notes and "Dockerfile" in notes
    assert "assumed Megatron-core 0.15" in notes
    context = attrs.evolve(context, options={"megatron_path": str(tmp_path)})
    with pytest.raises(TprimatError, match="pretrain_gpt.py does not exist"):
        registry.launch(backend, context=context)
