"""``tprimat parse`` end to end through click."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.plugins.logfixtures import LOGS
from tprimat.cli import cli
from tprimat.result.schema import load_result

FULL15 = LOGS / "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
CELL14 = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"


def run(*args: str):
    return CliRunner().invoke(cli, ["parse", *args])


def test_summary_table_detection_and_result_file(tmp_path):
    out = tmp_path / "result.json"
    result = run(str(FULL15), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "detected nvd_megatron" in result.stderr
    assert "step time (s)" in result.stdout and "tokens/s/GPU" in result.stdout
    assert "3.116" in result.stdout  # median step time of iterations 3-15
    loaded = load_result(out)
    assert len(loaded.iterations) == 15
    assert loaded.summary.step_time_s.median == 3.116


def test_json_output_is_the_result_and_nothing_else():
    result = run("--backend", "nvd_nemo", str(CELL14), "--json", "--seq-length", "2048", "--model", "llama3.1-8b")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run"]["backend"] == "nvd_nemo"
    assert data["config"]["global_batch_size"] == 512 and data["config"]["world_size"] == 8
    columns = data["iterations"]  # one array per field of a record
    assert columns["tokens_per_s_per_gpu"][5] == 512 * 2048 / columns["step_time_s"][5] / 8


def test_unrelated_and_empty_files_give_one_line_and_exit_2(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    notes = tmp_path / "notes.txt"
    notes.write_text("nothing to see here\n" * 50)
    for path in (empty, notes):
        result = run(str(path))
        assert result.exit_code == 2
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
        assert "Traceback" not in result.output


def test_config_mismatch_and_recorded_override(tmp_path):
    config = tmp_path / "bench.toml"
    config.write_text("[training]\nglobal_batch_size = 64\nseq_length = 2048\n[launch]\nnproc_per_node = 1\n")
    result = run(str(FULL15), "--config", str(config))
    assert result.exit_code == 2
    assert "64" in result.stderr and "80" in result.stderr
    out = tmp_path / "r.json"
    result = run(str(FULL15), "--config", str(config), "--allow-mismatch", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert any("--allow-mismatch" in n for n in load_result(out).provenance.notes)


def test_set_overrides_work_like_config_show_and_world_size_needs_the_launch_keys():
    result = run(
        str(FULL15),
        "--set",
        "training.global_batch_size=80",
        "--set",
        "launch.nproc_per_node=1",
        "--seq-length",
        "2048",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config"]["config_fingerprint"].startswith("sha256:")
    result = run(str(FULL15), "--set", "training.global_batch_size=80", "--world-size", "1")
    assert result.exit_code == 2 and "launch.nproc_per_node" in result.stderr


def test_parse_is_listed_in_help():
    assert "parse" in CliRunner().invoke(cli, ["--help"]).output


def test_unknown_model_is_an_error_not_a_silent_missing_mfu():
    result = run(str(FULL15), "--model", "llama-3.1-8B")
    assert result.exit_code == 2
    assert "unknown model 'llama-3.1-8B'" in result.stderr and "llama3.1-8b" in result.stderr


def test_a_missing_log_file_is_one_error_line_without_the_usage_block(tmp_path):
    missing = tmp_path / "missing.log"
    result = run(str(missing))
    assert result.exit_code == 2
    assert result.output.splitlines() == [f"Error: Invalid value for 'PATHS...': Path '{missing}' does not exist."]
    # A command line click cannot parse still shows how to call the command.
    no_paths = run()
    assert no_paths.exit_code == 2 and "Usage: " in no_paths.output and "Missing argument" in no_paths.output
