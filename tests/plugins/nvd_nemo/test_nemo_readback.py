"""The recipe NeMo resolved at launch, read back from the log and checked against the plan.

The resolved recipes are NeMo 2.7.3's own for the shipped plans
(tests/fixtures/framework_settings/nemo-2.7.3, README there), put on the log line the launch
script prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.shipped import shipped_run
from tprimat.plugins.nvd_nemo.readback import READBACK

RESOLVED = Path(__file__).resolve().parents[2] / "fixtures" / "framework_settings" / "nemo-2.7.3"


def _log(plan: str) -> list[str]:
    resolved = json.loads((RESOLVED / f"{plan}-h100.json").read_text())
    return [
        "[NeMo W 2026-11-28 04:30:00 nemo_logging:405] a warning before the recipe\n",
        "TPRIMAT_NEMO_RESOLVED " + json.dumps(resolved, separators=(",", ":")) + "\n",
        "Training epoch 0, iteration 0/49 | lr: 0 | global_step: 0 | reduced_train_loss: 11.9\n",
    ]


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("methodology", ["iso", "tuned"])
def test_what_nemo_resolved_for_a_shipped_plan_agrees_with_the_plan(model, methodology, tmp_path):
    run = shipped_run("nvd_nemo", model, methodology, tmp_path)
    stated = READBACK.read(_log(f"{model}-{methodology}"), "launcher.log")
    assert stated.source == "launcher.log:2"
    assert stated.values["model.num_layers"] == run.model.num_layers
    assert READBACK.disagreements(run.plan.framework.rendered, stated) == []


def test_a_setting_nemo_ran_otherwise_is_a_disagreement_naming_where_it_is(tmp_path):
    run = shipped_run("nvd_nemo", "llama3.1-8b", "iso", tmp_path)
    stated = READBACK.read(_log("llama3.1-8b-iso"), "launcher.log")
    rendered = {**run.plan.framework.rendered, "micro_batch_size": 2}
    (one,) = READBACK.disagreements(rendered, stated)
    assert (one.setting, one.planned, one.stated) == ("micro_batch_size", 2, 1)
    assert one.source == "launcher.log:2 (data.micro_batch_size)"


def test_the_shared_settings_nemo_ran_with_fill_in_what_the_plan_could_not_know(tmp_path):
    from tprimat.result.framework import framework_record

    run = shipped_run("nvd_nemo", "llama3.1-8b", "iso", tmp_path)
    assert run.plan.framework.shared["grad.accumulation_fusion"] is None  # decided where NeMo imports
    stated = READBACK.read(_log("llama3.1-8b-iso"), "launcher.log")
    record = framework_record(run.plan.framework, stated, READBACK, framework="nemo")
    # the recipe was resolved on a CPU without APEX: NeMo left the fusion off
    assert record.shared["grad.accumulation_fusion"] is False
    assert record.shared == {**run.plan.framework.shared, "grad.accumulation_fusion": False}
    assert record.disagreements == []
    assert record.stated_from == "NeMo recipe as the launch script resolved it at launcher.log:2"


def test_a_decay_length_nemo_would_replace_at_set_up_is_refused_when_planned(tmp_path):
    # NeMo's MegatronStrategy.setup sets the schedule's max_steps to trainer.max_steps
    # (set_at_setup.lr_scheduler.max_steps in the resolved recipe)
    from tests.plugins.launching import prepared
    from tprimat.contract.registry import PluginError

    with pytest.raises(PluginError, match="training.lr_decay_iterations = 30: NeMo's MegatronStrategy"):
        prepared("nvd_nemo", "llama3.1-8b", tmp_path, ["training.lr_decay_iterations=30"])
