"""Comparisons at the framework level: the shared settings that change a step must match.

The two results are the earlier tool's real Primus (8x MI300X) and NeMo (8x H100) runs of
Llama 3.1 8B at sequence 2048 and global batch 64 (tests/fixtures/legacy); each is given the
framework settings of tprimat's own iso plan for that work, amd_primus and nvd_megatron.
"""

from __future__ import annotations

import attrs
import pytest
from compare_helpers import AMD, NVD, imported

from tests.plugins.launching import prepared
from tprimat.compare.model import MismatchError, build_comparison
from tprimat.compare.report import write_report
from tprimat.result.framework import framework_record
from tprimat.result.resultjson import write_result
from tprimat.settings.config import load_config

COST = load_config().cost
WORK = ["training.seq_length=2048", "training.global_batch_size=64"]


def _with_plan(result, backend, root, *, kept=None):
    """``result`` with the framework settings tprimat's iso plan of ``backend`` records."""
    run = prepared(backend, "llama3.1-8b", root, WORK)
    framework = run.plan.framework
    if kept is not None:  # what the framework itself would keep, were tprimat not to pin it
        rendered = {k: v for k, v in framework.rendered.items() if k not in kept}
        shared = {**framework.shared, "loss.eod_mask": kept.get("eod_mask_loss", framework.shared["loss.eod_mask"])}
        framework = attrs.evolve(framework, rendered=rendered, kept={**framework.kept, **kept}, shared=shared)
    record = framework_record(framework, None, None, framework=backend)
    return attrs.evolve(result, config=attrs.evolve(result.config, framework=record))


def _pair(tmp_path, *, primus_kept=None):
    primus = _with_plan(imported(AMD), "amd_primus", tmp_path / "p", kept=primus_kept)
    megatron = _with_plan(imported(NVD), "nvd_megatron", tmp_path / "m")
    return [
        write_result(primus, tmp_path / "primus.json"),
        write_result(megatron, tmp_path / "megatron.json"),
    ]


def test_iso_plans_compute_the_same_step_and_the_report_shows_what_only_changes_speed(tmp_path):
    comparison = build_comparison(_pair(tmp_path), cost=COST)
    rows = {row.name: row for row in comparison.shared_settings}
    assert not [row for row in rows.values() if row.kind == "math"]
    # Primus's experiment turns gradient-accumulation fusion off; Megatron-LM keeps it on
    assert rows["grad.accumulation_fusion"].values == [False, True]
    assert rows["grad.accumulation_fusion"].kind == "speed"
    text = write_report(comparison, tmp_path / "report", ["md"])["report.md"].read_text()
    assert "## Framework settings that differ" in text
    assert "| grad.accumulation_fusion | speed | False | True |" in text
    assert "every setting that changes what a step computes is the same" in text


def test_a_primus_run_that_masks_the_loss_at_document_ends_is_refused_by_name(tmp_path):
    # what Primus's own Llama experiment sets when nothing overrides it
    paths = _pair(tmp_path, primus_kept={"eod_mask_loss": True})
    with pytest.raises(MismatchError, match="compute different steps: loss.eod_mask differ") as caught:
        build_comparison(paths, cost=COST)
    assert dict(caught.value.rows)["loss.eod_mask"] == [True, False]
    assert caught.value.columns == ["R1", "R2"]
    assert "--allow-mismatch" in str(caught.value)


def test_with_allow_mismatch_the_report_shows_the_math_difference(tmp_path):
    paths = _pair(tmp_path, primus_kept={"eod_mask_loss": True})
    comparison = build_comparison(paths, cost=COST, allow_mismatch=True)
    text = write_report(comparison, tmp_path / "report", ["md"])["report.md"].read_text()
    assert "| loss.eod_mask | math | True | False |" in text
    assert "these runs did not train the same step" in text


def test_a_run_whose_framework_ran_other_settings_than_planned_is_refused(tmp_path):
    from tprimat.result.schema import SettingDisagreement

    paths = _pair(tmp_path)
    from tprimat.result.schema import load_result

    primus = load_result(paths[0])
    stated = SettingDisagreement(setting="micro_batch_size", planned=1, stated="2", source="train.log:212")
    framework = attrs.evolve(primus.config.framework, disagreements=[stated])
    write_result(attrs.evolve(primus, config=attrs.evolve(primus.config, framework=framework)), paths[0])
    with pytest.raises(MismatchError, match=r"R1 micro_batch_size \(planned 1, ran 2\)"):
        build_comparison(paths, cost=COST)
    comparison = build_comparison(paths, cost=COST, allow_mismatch=True)
    text = write_report(comparison, tmp_path / "report", ["md"])["report.md"].read_text()
    assert "| R1 | micro_batch_size | 1 | 2 | train.log:212 |" in text
