"""``tprimat parse`` end to end on NeMo 1 logs, NeMo DLLogger files and NeMo 2 logs that state their config."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.plugins.nvd_nemo.nemologs import DIT, E5, GPT175B, LLAMA8B, LLAMA70B, QWEN, RESNET
from tprimat.cli import cli


def parse(*args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(cli, ["parse", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _config(data: dict) -> tuple:
    c = data["config"]
    return c["world_size"], c["global_batch_size"], c["micro_batch_size"], c["seq_length"], c["precision"]


@pytest.mark.parametrize(
    ("path", "config", "status"),
    [
        (LLAMA8B, (8, 128, 2, 8192, "fp8"), "completed"),
        (LLAMA70B, (64, 128, 1, 8192, "fp8"), "completed"),
        (QWEN, (16, 256, 4, 4096, "fp8"), "partial"),  # the file's last line has no newline
    ],
    ids=["llama3-8b", "llama3-70b", "qwen3-30b"],
)
def test_nemo1_console_logs(path, config, status):
    data, stderr = parse(str(path))
    assert f"detected nvd_nemo: NeMo DLLogger step record at {path.name}:" in stderr
    assert _config(data) == config and data["run"]["status"] == status
    columns = data["iterations"]  # one array per field of a record
    assert len(columns["iteration"]) == 20
    world, gbs, _, seq, _ = config
    for per_gpu, step_time, mean in zip(
        columns["tokens_per_s_per_gpu"],
        columns["step_time_s"],
        columns["reported"]["train_step_timing_in_s"],  # NeMo's 5-step mean, beside the recovered time
        strict=True,
    ):
        assert per_gpu == gbs * seq / step_time / world  # the core's, not NeMo's
        assert mean > 0
    assert any("per-step times recovered from consecutive means" in n for n in data["provenance"]["notes"])


def test_nemos_tflops_in_the_result():
    data, _ = parse(str(LLAMA8B))
    assert any("reported.tflops_per_gpu=1753.06" in n for n in data["provenance"]["notes"])
    # A one-value column beside the per-iteration reported ones; tprimat's own TFLOP/s is not it.
    run_figure = data["summary"]["reported"]["tflops_per_gpu_run"]
    assert (run_figure["count"], run_figure["median"]) == (1, 1753.06)
    data, _ = parse(str(QWEN))
    notes = data["provenance"]["notes"]
    assert not any("reported.tflops_per_gpu=" in n for n in notes)
    assert "tflops_per_gpu_run" not in data["summary"]["reported"]
    assert any("'TFLOPs per sec per GPU=-1.00'" in n and "not a figure" in n for n in notes)


def test_a_nemo_dllogger_file():
    data, stderr = parse(str(GPT175B))
    assert "NeMo DLLogger JSON step record" in stderr
    assert _config(data) == (None, 2048, 1, 2048, "fp8")
    assert data["summary"]["tokens_per_s_per_gpu"] is None  # the file does not say how many GPUs
    assert any("give --world-size" in n for n in data["provenance"]["notes"])
    data, _ = parse(str(GPT175B), "--world-size", "256")
    columns = data["iterations"]
    assert columns["tokens_per_s_per_gpu"][10] == 2048 * 2048 / columns["step_time_s"][10] / 256


def test_another_programs_dllogger_file_is_refused_with_the_reason():
    result = CliRunner().invoke(cli, ["parse", str(RESNET)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "a DLLogger JSON stream (line 1 starts with 'DLLL {') that is not NeMo's" in result.stderr


def test_nemo2_logs_that_state_their_config():
    data, _ = parse(str(DIT))
    assert _config(data) == (2, 8, 1, 1024, "bf16")  # NeMo-Run's table; MEMBER: 1/2
    data, _ = parse(str(E5))
    assert _config(data)[:3] == (1, 64, None) and data["config"]["seq_length"] is None  # never printed
