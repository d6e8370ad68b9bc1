"""``tprimat microbench``: options, errors, JSON and table output, saved results."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tprimat.cli import COMMANDS, cli
from tprimat.microbench import latest_for_device

TINY = [
    "--model",
    "llama3.1-tiny",
    "--seq-length",
    "32",
    "--micro-batch-size",
    "1",
    "--warmup",
    "1",
    "--iterations",
    "2",
    "--sweep-radius",
    "0",
    "--window",
    "8",
    "--flush-mib",
    "0.0625",
    "--device",
    "cpu",
    "--quiet",
]


def test_command_is_registered():
    assert COMMANDS["microbench"] == "tprimat.cli.microbench:microbench"
    result = CliRunner().invoke(cli, ["microbench", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--model", "--dtype", "--tp", "--json", "--output-dir"):
        assert option in result.output
    assert "gemm|attention|all" in result.output


def test_cli_module_imports_without_torch():
    code = (
        "import sys, tprimat.microbench, tprimat.cli.microbench, tprimat.microbench.runner; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "args, message",
    [
        (["gemm", "--model", "gpt-5"], "unknown model 'gpt-5'"),
        (["gemm", "--model", "llama3.1-8b", "--tp", "3"], "not divisible by tensor parallel size 3"),
        (["gemm", "--dtype", "bf16,int4"], "unknown dtype 'int4'"),
        (["matmul"], "Invalid value"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args, message, tmp_path):
    result = CliRunner().invoke(cli, ["microbench", *args, "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())


@pytest.mark.torch
def test_json_output_is_the_saved_document(tmp_path):
    result = CliRunner().invoke(cli, ["microbench", "all", *TINY, "--dtype", "bf16,fp8", "--json", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    saved = list(tmp_path.glob("microbench-*.json"))
    assert len(saved) == 1
    assert json.loads(saved[0].read_text()) == doc
    assert f"saved: {saved[0]}" in result.stderr
    assert doc["config"]["model"] == "llama3.1-tiny" and doc["config"]["dtypes"] == ["bf16", "fp8"]
    found = latest_for_device(doc["device_name"], tmp_path)
    assert found["mamf_tflops"]["bf16"] == doc["summary"]["mamf_tflops"]["bf16"]


@pytest.mark.torch
def test_table_output(tmp_path):
    result = CliRunner().invoke(
        cli, ["microbench", "all", *TINY, "--dtype", "bf16,fp8", "-o", str(tmp_path)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "llama3.1-tiny GEMMs (TP 1, 32 tokens)" in out
    for cell in (
        "qkv",
        "mlp_down",
        "bwd_weight",
        "matmul bf16",
        "linear+bias bf16",
        "32 x 256 x 128",
        "Maximum achievable matmul",
        "Attention",
        "sliding",
    ):
        assert cell in out, cell
    assert "MAMF bf16:" in out and "no datasheet peak" in out
    assert "F.linear vs torch.matmul bf16" in out
    assert "unavailable: gemm fp8: FP8 GEMMs are measured on GPUs only" in out
    assert "saved:" in out


@pytest.mark.torch
def test_no_save_and_config_defaults(tmp_path):
    config = tmp_path / "bench.toml"
    config.write_text(
        '[benchmark]\nmodel = "qwen2.5-tiny"\n[training]\nseq_length = 16\n'
        "[parallel]\ntensor = 2\n[launch]\nnproc_per_node = 2\n"
    )
    args = [
        "microbench",
        "gemm",
        "--config",
        str(config),
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--sweep-radius",
        "0",
        "--flush-mib",
        "0",
        "--device",
        "cpu",
        "--dtype",
        "bf16",
        "--quiet",
        "--no-save",
        "--json",
        "-o",
        str(tmp_path / "out"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["config"]["model"] == "qwen2.5-tiny"
    assert doc["config"]["tensor_parallel"] == 2 and doc["config"]["seq_length"] == 16
    qkv = next(r for r in doc["gemm"] if r["name"] == "qkv" and r["pass"] == "fwd")
    assert qkv["n"] == (4 + 2 * 2) * 32 // 2
    assert not (tmp_path / "out").exists()


def test_without_torch_the_error_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    result = CliRunner().invoke(cli, ["microbench", "gemm", "--model", "llama3.1-tiny", "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert "microbench needs torch" in result.output and "ml extra" in result.output
    assert not list(tmp_path.iterdir())


@pytest.mark.torch
def test_cpu_defaults_suit_the_cpu_and_progress_estimates_the_time_left(tmp_path):
    # no --dtype/--warmup/--iterations/--sweep-radius/--model/--seq-length: the CPU defaults
    result = CliRunner().invoke(cli, ["microbench", "gemm", "--device", "cpu", "--json", "--no-save"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    config, method = doc["config"], doc["method"]
    assert (config["model"], config["seq_length"], config["micro_batch_size"]) == ("llama3.1-tiny", 256, 2)
    assert config["dtypes"] == ["fp32"] and config["sweep_radius"] == 0
    assert (method["warmup"], method["iterations"]) == (1, 5)
    assert "no GPU: CPU defaults" in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[")]
    cases = len([row for row in doc["gemm"] if row["status"] == "ok"])
    assert len(lines) == cases and lines[-1].startswith(f"[{'#' * 20}] {cases}/{cases} ")
    assert all(" elapsed, ~" in line and " left | [0] " in line for line in lines)


def test_case_progress_estimates_from_the_mean_time_per_case():
    from tprimat.microbench.defaults import CaseProgress

    now = [100.0]
    lines: list[str] = []
    progress = CaseProgress(4, lines.append, clock=lambda: now[0])
    now[0] = 110.0
    progress("first")
    now[0] = 190.0
    progress("second")
    assert lines[0] == "[#####---------------] 1/4 10s elapsed, ~30s left | first"
    assert lines[1] == "[##########----------] 2/4 1m30s elapsed, ~1m30s left | second"
    for _ in range(3):  # more cases than planned: the total grows, never a negative estimate
        progress("more")
    assert lines[-1].startswith("[####################] 5/5 ") and "~0s left" in lines[-1]


def test_planned_cases_count_every_timed_case():
    from tprimat.microbench.runner import plan_shapes, planned_cases
    from tprimat.settings.models import get_model

    shapes, sweep = plan_shapes(
        get_model("llama3.1-tiny"),
        seq_length=256,
        micro_batch_size=2,
        tensor_parallel=1,
        sweep_step=256,
        sweep_radius=0,
    )
    fwd = len([s for s in shapes if s.pass_ == "fwd"])
    per_dtype = 3 * fwd + (len(shapes) - fwd)  # matmul, linear, linear+bias forward; matmul otherwise
    assert planned_cases("gemm", shapes, ["fp32"], fp8=False, flash_attn=False) == per_dtype
    assert planned_cases("gemm", shapes, ["bf16", "fp8"], fp8=True, flash_attn=False) == per_dtype + len(shapes)
    assert planned_cases("gemm", shapes, ["bf16", "fp8"], fp8=False, flash_attn=False) == per_dtype
    assert planned_cases("attention", shapes, ["bf16", "fp8"], fp8=True, flash_attn=True) == 6
