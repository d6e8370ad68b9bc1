"""``tprimat microbench``: options, errors, JSON and table output, saved results."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tprimat.cli import COMMANDS, cli
from tprimat.microbench import latest_for_device

TINY = ["--model", "llama3.1-tiny", "--seq-length", "32", "--warmup", "1", "--iterations", "2",
        "--sweep-radius", "0", "--window", "8", "--flush-mib", "0.0625",
        "--device", "cpu", "--quiet"]


def test_command_is_registered():
    assert COMMANDS["microbench"] == "tprimat.cli.microbench:microbench"
    result = CliRunner().invoke(cli, ["microbench", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--model", "--dtype", "--tp", "--json", "--output-dir"):
        assert option in result.output
    assert "gemm|attention|all" in result.output


def test_cli_module_imports_without_torch():
    code = ("import sys, tprimat.microbench, tprimat.cli.microbench, tprimat.microbench.runner; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("args, message", [
    (["gemm", "--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["gemm", "--model", "llama3.1-8b", "--tp", "3"], "not divisible by tensor parallel size 3"),
    (["gemm", "--dtype", "bf16,int4"], "unknown dtype 'int4'"),
    (["matmul"], "Invalid value"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, message, tmp_path):
    result = CliRunner().invoke(cli, ["microbench", *args, "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())


@pytest.mark.torch
def test_json_output_is_the_saved_document(tmp_path):
    result = CliRunner().invoke(cli, ["microbench", "all", *TINY, "--json", "-o", str(tmp_path)])
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
    result = CliRunner().invoke(cli, ["microbench", "all", *TINY, "--dtype", "bf16,fp8",
                                      "-o", str(tmp_path)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "llama3.1-tiny GEMMs (TP 1, 32 tokens)" in out
    for cell in ("qkv", "mlp_down", "bwd_weight", "matmul bf16", "linear+bias bf16",
                 "32 x 256 x 128", "Maximum achievable matmul", "Attention", "sliding"):
        assert cell in out, cell
    assert "MAMF bf16:" in out and "no datasheet peak" in out
    assert "F.linear vs torch.matmul bf16" in out
    assert "unavailable: gemm fp8: FP8 GEMMs are measured on GPUs only" in out
    assert "saved:" in out


@pytest.mark.torch
def test_no_save_and_config_defaults(tmp_path):
    config = tmp_path / "bench.toml"
    config.write_text('[benchmark]\nmodel = "qwen2.5-tiny"\n[training]\nseq_length = 16\n'
                      "[parallel]\ntensor = 2\n[launch]\nnproc_per_node = 2\n")
    args = ["microbench", "gemm", "--config", str(config), "--iterations", "1", "--warmup", "0",
            "--sweep-radius", "0", "--flush-mib", "0", "--device", "cpu", "--dtype", "bf16",
            "--quiet", "--no-save", "--json", "-o", str(tmp_path / "out")]
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
    result = CliRunner().invoke(cli, ["microbench", "gemm", "--model", "llama3.1-tiny",
                                      "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert "microbench needs torch" in result.output and "ml extra" in result.output
    assert not list(tmp_path.iterdir())
