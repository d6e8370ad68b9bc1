"""Every NeMo plan tprimat ships, checked by NeMo's and megatron-core's own configuration objects.

For each model under each methodology (planned for an H100 node), the
generated script runs its ``--check`` under the plan's environment: NeMo's
precision plugin, strategy, data module and learning-rate schedule and
megatron-core's TransformerConfig, OptimizerConfig, DDP config, micro-batch
calculator and attention-backend rule are built or run, as far as a CPU
allows.  The resolved recipe must also equal the one recorded for NeMo 2.7.3
in ``tests/fixtures/framework_settings/nemo-2.7.3/``; after checking that a
change is intended, rewrite those with ``TPRIMAT_UPDATE_GOLDEN=1 python -m pytest
-m nemo tests/plugins/nvd_nemo/test_nemo_shipped_plans.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.plugins.nvd_nemo.nemoplans import (
    RECORDED,
    SHIPPED,
    need_nemo,
    plan_environment,
    plan_name,
    script_args,
    written,
)

pytestmark = pytest.mark.nemo

UPDATE = os.environ.get("TPRIMAT_UPDATE_GOLDEN") == "1"
IDS = [plan_name(*plan) for plan in SHIPPED]


@pytest.fixture(autouse=True)
def _need_nemo():
    need_nemo()


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """``--check`` of each shipped plan, run once: (exit status, printed JSON with the run directory as <RUN_DIR>)."""
    done: dict[tuple[str, str], tuple[int, dict, str]] = {}

    def check(model: str, methodology: str) -> tuple[int, dict, str]:
        if (model, methodology) not in done:
            run = written(model, methodology, tmp_path_factory.mktemp(plan_name(model, methodology)))
            result = subprocess.run(
                [sys.executable, *script_args(run), "--check"],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=run.run_dir,
                env=plan_environment(run),
            )
            assert result.stdout, result.stderr[-3000:]
            resolved = json.loads(result.stdout.replace(str(run.run_dir), "<RUN_DIR>"))
            done[model, methodology] = (result.returncode, resolved, result.stderr)
        return done[model, methodology]

    return check


@pytest.mark.parametrize(("model", "methodology"), SHIPPED, ids=IDS)
def test_shipped_plan_is_accepted_by_nemo(checked, model, methodology):
    returncode, resolved, stderr = checked(model, methodology)
    verdict = resolved["check"]
    assert verdict["accepted"], verdict["problems"]
    assert returncode == 0, stderr[-3000:]
    ran = " | ".join(verdict["checked"])
    for what in (
        "TransformerConfig.__post_init__ again",
        "OptimizerConfig",
        "MegatronStrategy",
        "_set_attention_backend",
    ):
        assert what in ran


@pytest.mark.parametrize(("model", "methodology"), SHIPPED, ids=IDS)
def test_resolved_recipe_is_the_recorded_one(checked, model, methodology):
    """What NeMo 2.7.3 runs each shipped plan with, pinned: a change in tprimat or NeMo shows up as a diff."""
    _, resolved, _ = checked(model, methodology)
    path = RECORDED / f"{plan_name(model, methodology)}.json"
    if UPDATE:
        path.write_text(json.dumps(resolved, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    recorded = json.loads(path.read_text(encoding="utf-8"))
    installed = resolved["machine"]["versions"]["nemo_toolkit"]
    if installed != recorded["machine"]["versions"]["nemo_toolkit"]:
        pytest.skip(f"the record is NeMo {recorded['machine']['versions']['nemo_toolkit']}'s; NeMo {installed} here")
    # The versions of torch or Lightning may differ between installs; everything NeMo decides may not.
    assert {k: v for k, v in resolved.items() if k != "machine"} == {
        k: v for k, v in recorded.items() if k != "machine"
    }
