"""Three verdicts on an estimate: fits, within the estimator's error, does not fit; --strict refuses only the last."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.cli.run import preflight
from tprimat.errors import TprimatError
from tprimat.hardware.platform import PlatformInfo
from tprimat.memory import ESTIMATOR_ERROR, Verdict, describe_fit, error_band_gib, estimate_memory, fit_verdict
from tprimat.running.memory_check import memory_findings
from tprimat.settings.config import load_config
from tprimat.settings.methodology import resolve
from tprimat.settings.models import get_model

LLAMA = get_model("llama3.1-8b")
H100 = PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8, memory_per_device_gib=79.65)


def _nvidia_recipe():
    """NVIDIA's published 8×H100 recipe for Llama 3.1 8B, as tprimat's tuned H100 plan applies it."""
    tuned = load_config(overrides=['benchmark.methodology="tuned"'])
    config = resolve(tuned, backend="nvd_megatron", device_name=H100.device_name, platform="nvidia").config
    assert config.parallel.context == 2  # the recipe's context parallelism
    return config


def _prepared(tmp_path: Path, config):
    return SimpleNamespace(
        config=config,
        model=LLAMA,
        platform=H100,
        backend="nvd_megatron",
        trainer="megatron-core",
        run_dir=tmp_path / "runs" / "r1",
    )


@pytest.fixture
def quiet_machine(monkeypatch):
    import tprimat.running.doctor as doctor

    monkeypatch.setattr(doctor, "run_checks", lambda **_: [])


def test_nvidias_8xh100_recipe_is_within_the_estimators_error():
    estimate = estimate_memory(_nvidia_recipe(), LLAMA, device="H100")
    assert -error_band_gib(estimate) < estimate.margin_gib < 0  # a little short, well inside the error
    assert fit_verdict(estimate) is Verdict.WITHIN_ERROR
    assert estimate.fits is False  # the result's bool keeps its meaning: total above capacity
    line = describe_fit(estimate)
    assert line.startswith("within the estimator's error on H100-SXM (79.18 GiB)")
    assert "GiB short" in line and "±3.83 GiB" in line and "may or may not fit" in line


def test_memory_estimate_prints_the_middle_verdict_for_the_recipe_not_does_not_fit():
    done = CliRunner().invoke(
        cli, ["memory", "estimate", "--model", "llama3.1-8b", "--device", "H100", "--set", "parallel.context=2"]
    )
    assert done.exit_code == 0, done.output
    assert "within the estimator's error on H100-SXM" in done.output
    assert "does NOT fit" not in done.output
    assert "if it runs out of memory, try training.recompute=full" in done.output
    as_json = CliRunner().invoke(
        cli,
        ["memory", "estimate", "--model", "llama3.1-8b", "--device", "H100", "--set", "parallel.context=2", "--json"],
    )
    data = json.loads(as_json.output)
    assert data["verdict"] == "within the estimator's error" and data["fits"] is False
    assert data["error_band_gib"] == pytest.approx(ESTIMATOR_ERROR * data["allocated_gib"])


def test_strict_preflight_does_not_refuse_the_recipe_but_notes_the_verdict(tmp_path, quiet_machine, capsys):
    prepared = _prepared(tmp_path, _nvidia_recipe())
    (finding,) = memory_findings(prepared)
    assert finding.check == "memory-fit" and finding.severity == "info"
    assert "within the estimator's error" in finding.message and "may or may not fit" in finding.message
    assert "--set parallel.context=2" in finding.fix and "--capacity-gib 79.18" in finding.fix
    recorded = preflight(prepared, strict=True)  # no refusal
    assert [(f["check"], f["severity"]) for f in recorded] == [("memory-fit", "info")]
    assert "doctor: llama3.1-8b needs about" in capsys.readouterr().err


def test_strict_preflight_refuses_a_configuration_clearly_too_big(tmp_path, quiet_machine):
    too_big = load_config()  # no recompute, no context parallelism: about 21 GiB over an H100
    estimate = estimate_memory(too_big, LLAMA, device="H100")
    assert fit_verdict(estimate) is Verdict.DOES_NOT_FIT
    (finding,) = memory_findings(_prepared(tmp_path, too_big))
    assert finding.severity == "warning" and "does NOT fit" in finding.message
    assert "beyond the estimator's error" in finding.message
    with pytest.raises(TprimatError, match="refusing to start.*1 problem"):
        preflight(_prepared(tmp_path, too_big), strict=True)


def test_a_configuration_that_fits_by_more_than_the_error_says_nothing_before_a_run(tmp_path):
    config = load_config(overrides=["training.recompute=full"])
    assert fit_verdict(estimate_memory(config, LLAMA, device="H100")) is Verdict.FITS
    assert memory_findings(_prepared(tmp_path, config)) == []


def test_the_verdict_changes_at_the_error_band_either_way():
    total = estimate_memory(load_config(), LLAMA).total_gib
    band = error_band_gib(estimate_memory(load_config(), LLAMA))

    def verdict(capacity_gib):
        return fit_verdict(estimate_memory(load_config(), LLAMA, capacity_gib=capacity_gib))

    assert verdict(total + 1.01 * band) is Verdict.FITS
    assert verdict(total + 0.99 * band) is Verdict.WITHIN_ERROR
    assert verdict(total) is Verdict.WITHIN_ERROR
    assert verdict(total - 0.99 * band) is Verdict.WITHIN_ERROR
    assert verdict(total - 1.01 * band) is Verdict.DOES_NOT_FIT
    without = estimate_memory(load_config(), LLAMA)
    assert fit_verdict(without) is None and describe_fit(without) is None


def test_the_error_band_is_the_largest_error_measured_against_real_runs():
    """ESTIMATOR_ERROR is derived from the runs in docs/memory.md, "Checked against real logs"."""
    from tests.core.memory.test_against_logs import GH200_LAYOUT, GH200_RUN, LLAMA_1B, _gh200_config, _memory
    from tests.core.test_h200_runs import FITTED, _estimate, _measured_peak

    errors = {run.name: _estimate(run).allocated_gib / _measured_peak(run) - 1 for run in FITTED}
    gh200 = estimate_memory(_gh200_config(), LLAMA_1B, layout=GH200_LAYOUT, device="NVIDIA GH200 480GB")
    errors[GH200_RUN.name] = gh200.allocated_gib / _memory(GH200_RUN).peak().max_allocated_gib - 1
    assert sorted(round(100 * e, 1) for e in errors.values()) == [-1.8, 2.7, 2.8, 5.0]  # as docs/memory.md lists
    assert max(abs(e) for e in errors.values()) == pytest.approx(ESTIMATOR_ERROR, abs=0.001)
