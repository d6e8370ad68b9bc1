"""Errors name the key and the rule in one line; output outside a terminal keeps paths whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CELL14 = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Usage:" not in result.output and "Traceback" not in result.output
    return result.stderr


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("training.global_batch_size=-1", "training.global_batch_size = -1 must be at least 1"),
        ("cost.train_tokens=-1", "cost.train_tokens: must be > 0, got -1"),
        ('training.recompute="everything"', "training.recompute: must be one of 'none', 'selective', 'full', got"),
        ('precision.dtype="fp4"', "precision.dtype: must be one of 'bf16', 'fp8', 'fp32', got 'fp4'"),
    ],
)
def test_a_bad_setting_names_the_key_and_the_rule(setting, expected):
    message = _one_error_line(CliRunner().invoke(cli, ["config", "show", "--set", setting]))
    assert expected in message and f"--set {setting}" in message
    assert "invalid value @" not in message and "unknown error" not in message


def test_a_bad_value_in_a_config_file_names_the_key_and_the_line(tmp_path):
    config = tmp_path / "bench.toml"
    config.write_text("[convergence]\nvalidation_fraction = 2.0\n")
    message = _one_error_line(CliRunner().invoke(cli, ["config", "show", "--config", str(config)]))
    assert f"{config}:2: convergence.validation_fraction: must be < 1, got 2.0" in message


def test_a_missing_log_and_an_unknown_model_are_one_line_without_usage(tmp_path):
    missing = _one_error_line(CliRunner().invoke(cli, ["parse", str(tmp_path / "absent.log")]))
    assert "absent.log" in missing and "does not exist" in missing
    unknown = _one_error_line(CliRunner().invoke(cli, ["memory", "estimate", "--model", "llama-nonesuch"]))
    assert "unknown model 'llama-nonesuch'" in unknown and "llama3.1-8b" in unknown


def test_a_long_path_is_printed_whole_on_one_line_outside_a_terminal(tmp_path):
    long_name = CELL14.stem + "_copied-from-the-scratch-directory-of-a-long-benchmark-campaign.log"
    log = tmp_path / long_name
    shutil.copyfile(CELL14, log)
    result = CliRunner().invoke(cli, ["parse", str(log)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # rich printed this note; at 80 columns it cut the name in two
    note = f"note  format detected: nvd_nemo (NeMo 2 step line at {long_name}:139)"
    assert any(line.strip() == note for line in lines), result.stdout
    assert len(note) > 80
