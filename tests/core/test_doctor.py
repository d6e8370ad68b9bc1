import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.running.doctor import GIB, Probe, run_checks, tokenizer_needed
from tprimat.settings.config import load_config


def probe(env=None, files=None, tools=None, free_gib=500.0) -> Probe:
    files = files or {}
    tools = tools or {}
    return Probe(
        env=env or {},
        read_file=lambda path: files.get(path),
        run_tool=lambda argv: tools.get(argv[0]),
        free_disk_bytes=lambda path: int(free_gib * GIB),
    )


def checks(findings) -> list[str]:
    return [f.check for f in findings]


def test_a_clean_machine_has_no_findings(tmp_path):
    assert run_checks(probe(files={"/proc/sys/kernel/numa_balancing": "0\n"}), output_dir=tmp_path) == []


def test_numa_balancing_on_is_reported_with_the_fix():
    (finding,) = run_checks(probe(files={"/proc/sys/kernel/numa_balancing": "1\n"}))
    assert finding.check == "numa-balancing" and finding.fix == "sudo sysctl kernel.numa_balancing=0"


def test_unreadable_numa_file_is_not_a_finding():
    assert run_checks(probe(files={})) == []


@pytest.mark.parametrize(
    "name", ["CUDA_LAUNCH_BLOCKING", "HIP_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA", "AMD_SERIALIZE_KERNEL"]
)
def test_launch_blocking_variables(name):
    assert checks(run_checks(probe(env={name: "1"}))) == ["launch-blocking"]
    assert run_checks(probe(env={name: "0"})) == []


def test_tunableop_tuning_during_a_timed_run():
    assert checks(run_checks(probe(env={"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "1"}))) == [
        "tunableop-tuning"
    ]
    assert run_checks(probe(env={"PYTORCH_TUNABLEOP_ENABLED": "1", "PYTORCH_TUNABLEOP_TUNING": "0"})) == []


@pytest.mark.parametrize(
    "env",
    [{"NCCL_DEBUG": "INFO"}, {"NCCL_DEBUG": "trace"}, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, {"AMD_LOG_LEVEL": "4"}],
)
def test_debug_logging(env):
    assert checks(run_checks(probe(env=env))) == ["debug-logging"]


def test_quiet_logging_is_fine():
    assert run_checks(probe(env={"NCCL_DEBUG": "WARN", "AMD_LOG_LEVEL": "0"})) == []


def test_other_gpu_processes_and_power_cap_from_the_tools():
    tools = {"nvidia-smi": "4242, python, 30000\n"}
    assert "gpu-busy" in checks(run_checks(probe(tools=tools)))
    capped = {"nvidia-smi": "0, 500.00, 700.00\n1, 700.00, 700.00\n"}
    findings = run_checks(probe(tools=capped))
    power = [f for f in findings if f.check == "power-cap"]
    assert len(power) == 1 and "GPU 0" in power[0].message and "-pl 700" in power[0].fix
    rocm = {"rocm-smi": "===== KFD Processes =====\nPID\tPROCESS NAME\tGPU(s)\n31337\tpython\t8\n"}
    assert "gpu-busy" in checks(run_checks(probe(tools=rocm)))


def test_low_disk(tmp_path):
    (finding,) = run_checks(probe(free_gib=3.0), output_dir=tmp_path / "runs" / "new")
    assert finding.check == "low-disk" and str(tmp_path) in finding.message


def test_gated_tokenizer_needs_a_token(tmp_path):
    assert checks(run_checks(probe(), tokenizer="meta-llama/Llama-3.1-8B")) == ["hf-token"]
    assert run_checks(probe(env={"HF_TOKEN": "hf_x"}), tokenizer="meta-llama/Llama-3.1-8B") == []
    assert run_checks(probe(), tokenizer="Qwen/Qwen2.5-7B") == []
    assert run_checks(probe(), tokenizer=str(tmp_path)) == []


def test_tokenizer_needed_only_for_real_data():
    assert tokenizer_needed(load_config()) is None
    # no prepared dataset there: the run refuses it, and no tokenizer is assumed for it
    assert tokenizer_needed(load_config(None, ["data.dataset=/data/bc"])) is None
    named = load_config(None, ["data.dataset=/data/bc", "data.tokenizer=meta-llama/Llama-3.1-8B"])
    assert tokenizer_needed(named) == "meta-llama/Llama-3.1-8B"


def test_cli_strict_exits_2(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    runner = CliRunner()
    result = runner.invoke(cli, ["doctor", "--strict", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "CUDA_LAUNCH_BLOCKING" in result.output
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING")
    monkeypatch.setattr("tprimat.running.doctor.check_numa_balancing", lambda probe: [])
    for name in ("NCCL_DEBUG", "TORCH_DISTRIBUTED_DEBUG", "AMD_LOG_LEVEL", "HIP_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)
    ok = runner.invoke(cli, ["doctor", "--output", str(Path(tmp_path))])
    assert ok.exit_code == 0


def test_cli_reports_the_compiled_modules_without_a_finding(monkeypatch, tmp_path):
    monkeypatch.setattr("tprimat.running.doctor.run_checks", lambda **kwargs: [])
    monkeypatch.setenv("TPRIMAT_PURE_PYTHON", "1")
    runner = CliRunner()
    turned_off = runner.invoke(cli, ["doctor", "--strict", "--output", str(tmp_path)])
    assert turned_off.exit_code == 0  # speed only: no finding, --strict passes
    nothing, compiled = turned_off.output.splitlines()
    assert nothing.startswith("doctor: nothing found") and compiled.startswith("compiled modules: 0 of 2 in use; ")
    assert "tprimat.result._exact: turned off by TPRIMAT_PURE_PYTHON" in compiled
    assert compiled.endswith("unset TPRIMAT_PURE_PYTHON")
    data = json.loads(runner.invoke(cli, ["doctor", "--json", "--output", str(tmp_path)]).output)
    assert data["findings"] == [] and {(m["module"], m["in_use"], m["reason"]) for m in data["compiled_modules"]} == {
        ("tprimat.plugins.megatron_core._lines", False, "turned off by TPRIMAT_PURE_PYTHON"),
        ("tprimat.result._exact", False, "turned off by TPRIMAT_PURE_PYTHON"),
    }


def test_cli_says_what_to_do_for_a_module_not_built_after_the_findings(monkeypatch, tmp_path):
    from tprimat.contract.compiled import CompiledState

    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setattr(
        "tprimat.contract.compiled.compiled_state",
        lambda: (
            CompiledState(module="tprimat.plugins.megatron_core._lines", in_use=True, reason="built, in use"),
            CompiledState(module="tprimat.result._exact", in_use=False, reason="not built (no C compiler at install)"),
        ),
    )
    done = CliRunner().invoke(cli, ["doctor", "--output", str(tmp_path)])
    last = done.output.splitlines()[-1]
    assert "CUDA_LAUNCH_BLOCKING" in done.output and done.output.index("CUDA_LAUNCH_BLOCKING") < done.output.index(last)
    assert last.startswith(
        "compiled modules: 1 of 2 in use; tprimat.result._exact: not built (no C compiler at install)"
    )
    assert "install a C compiler and the Python headers (python3-dev), then reinstall tprimat" in last
    assert "_lines" not in last and "TPRIMAT_PURE_PYTHON" not in last


def test_cli_says_when_every_compiled_module_is_in_use(monkeypatch, tmp_path):
    from tprimat.contract.compiled import CompiledState

    monkeypatch.setattr(
        "tprimat.contract.compiled.compiled_state",
        lambda: (CompiledState(module="tprimat.result._exact", in_use=True, reason="built, in use"),),
    )
    done = CliRunner().invoke(cli, ["doctor", "--output", str(tmp_path)])
    assert done.output.splitlines()[-1] == "compiled modules: 1 of 1 in use (full speed)"
