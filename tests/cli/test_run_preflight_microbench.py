"""`tprimat run` records its pre-flight findings and the device's latest microbench; `parse`,
the run summary and `tprimat compare` show MAMF utilisation next to MFU.

The runs use the example plugin's ``toy`` backend (a sleeping loop: a run takes
well under a second); the microbench document is a real, tiny CPU microbench.
"""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.result.schema import load_result
from tprimat.running.manifest import load_manifest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        "toy" not in Registry.from_environment().backends(), reason="the example plugin is not installed"
    ),
]

QUIET = (
    "NCCL_DEBUG",
    "RCCL_DEBUG",
    "TORCH_DISTRIBUTED_DEBUG",
    "CUDA_LAUNCH_BLOCKING",
    "HIP_LAUNCH_BLOCKING",
    "AMD_LOG_LEVEL",
    "TORCH_CPP_LOG_LEVEL",
    "NCCL_DEBUG_SUBSYS",
    "AMD_SERIALIZE_KERNEL",
    "TORCH_USE_CUDA_DSA",
    "PYTORCH_TUNABLEOP_TUNING",
)


@pytest.fixture(scope="module")
def microbench(tmp_path_factory):
    """A real microbench of this machine's CPU, saved where `tprimat run` looks."""
    pytest.importorskip("torch")
    from tprimat.microbench import save
    from tprimat.microbench.runner import run_microbench
    from tprimat.settings.models import get_model

    document = run_microbench(
        what="gemm",
        dtypes="fp32",
        model=get_model("llama3.1-tiny"),
        seq_length=32,
        warmup=1,
        iterations=2,
        sweep_step=32,
        sweep_radius=0,
        flush_bytes=1 << 16,
        device="cpu",
    )
    directory = tmp_path_factory.mktemp("microbench")
    return save(document, directory), document


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A machine whose only findings are the environment variables a test sets."""
    import tprimat.running.doctor as doctor

    for name in QUIET:
        monkeypatch.delenv(name, raising=False)
    for check in ("check_gpu_processes", "check_power_cap", "check_numa_balancing"):
        monkeypatch.setattr(doctor, check, lambda probe: [])
    monkeypatch.setattr(doctor, "check_free_disk", lambda probe, output_dir: [])
    monkeypatch.setenv("TPRIMAT_MICROBENCH_DIR", str(tmp_path / "no-microbench-here"))
    return monkeypatch


def toy_run(tmp_path, run_id: str, *extra: str):
    return CliRunner().invoke(
        cli,
        [
            "run",
            "--backend",
            "toy",
            "--model",
            "llama3.1-tiny",
            "--iterations",
            "6",
            "--output",
            str(tmp_path / "runs"),
            "--run-id",
            run_id,
            *extra,
        ],
    )


def test_findings_are_warned_about_and_recorded_in_the_manifest(tmp_path, env):
    env.setenv("NCCL_DEBUG", "INFO")
    out = toy_run(tmp_path, "noisy")
    assert out.exit_code == 0, out.output
    assert "doctor: NCCL_DEBUG=INFO turns on debug logging" in out.stderr
    manifest = load_manifest(tmp_path / "runs" / "noisy" / "manifest.json")
    assert [f["check"] for f in manifest.extra["doctor"]] == ["debug-logging"]
    assert "unset NCCL_DEBUG" in manifest.extra["doctor"][0]["fix"]


def test_a_clean_run_records_that_nothing_was_found(tmp_path, env):
    out = toy_run(tmp_path, "clean")
    assert out.exit_code == 0, out.output
    manifest = load_manifest(tmp_path / "runs" / "clean" / "manifest.json")
    assert manifest.extra["doctor"] == []
    assert "microbench" not in manifest.extra  # none of this device was kept
    result = load_result(tmp_path / "runs" / "clean" / "result.json")
    assert result.summary.mamf_tflops is None and result.summary.mamf_utilisation is None
    assert "MAMF" not in out.output


def test_strict_refuses_to_start_with_exit_code_2(tmp_path, env):
    env.setenv("CUDA_LAUNCH_BLOCKING", "1")
    out = toy_run(tmp_path, "strict", "--strict")
    assert out.exit_code == 2
    assert "refusing to start" in out.output and "CUDA_LAUNCH_BLOCKING=1" in out.output
    assert not (tmp_path / "runs" / "strict").exists()


def test_the_latest_microbench_gives_mamf_utilisation(tmp_path, env, microbench):
    path, document = microbench
    env.setenv("TPRIMAT_MICROBENCH_DIR", str(path.parent))
    out = toy_run(tmp_path, "mamf")
    assert out.exit_code == 0, out.output
    run_dir = tmp_path / "runs" / "mamf"
    recorded = load_manifest(run_dir / "manifest.json").extra["microbench"]
    assert recorded["path"] == str(path) and recorded["matched_by"] == "device name"
    ceiling = document["summary"]["mamf_tflops"]["fp32"]
    assert recorded["mamf_tflops"]["fp32"] == ceiling
    s = load_result(run_dir / "result.json").summary
    assert s.mamf_tflops == ceiling and s.mamf_source == str(path)
    assert s.mamf_utilisation == pytest.approx(s.tflops_per_gpu / ceiling)
    assert "MAMF utilisation" in out.output and f"of {ceiling:.4g} TFLOP/s measured" in out.output

    # tprimat parse reads the same manifest and gets the same figures.
    parsed = CliRunner().invoke(
        cli,
        [
            "parse",
            str(run_dir / "logs" / "launcher.log"),
            "--backend",
            "toy",
            "--manifest",
            str(run_dir / "manifest.json"),
            "--model",
            "llama3.1-tiny",
            "--seq-length",
            "256",
            "--global-batch-size",
            "4",
            "--world-size",
            "1",
            "--precision",
            "fp32",
            "--warmup-iterations",
            "2",
            "--json",
        ],
    )
    assert parsed.exit_code == 0, parsed.output
    summary = json.loads(parsed.stdout)["summary"]
    assert summary["mamf_tflops"] == ceiling and summary["mamf_source"] == str(path)
    assert summary["mamf_utilisation"] == pytest.approx(summary["tflops_per_gpu"] / ceiling)
    table = CliRunner().invoke(
        cli,
        [
            "parse",
            str(run_dir / "logs" / "launcher.log"),
            "--backend",
            "toy",
            "--manifest",
            str(run_dir / "manifest.json"),
            "--model",
            "llama3.1-tiny",
            "--seq-length",
            "256",
            "--global-batch-size",
            "4",
            "--world-size",
            "1",
            "--precision",
            "fp32",
        ],
    )
    assert "MAMF utilisation" in table.stdout


def test_compare_shows_mamf_utilisation_and_preflight_findings(tmp_path, env, microbench):
    path, document = microbench
    env.setenv("TPRIMAT_MICROBENCH_DIR", str(path.parent))
    env.setenv("AMD_LOG_LEVEL", "3")
    assert toy_run(tmp_path, "a").exit_code == 0
    env.delenv("AMD_LOG_LEVEL")
    assert toy_run(tmp_path, "b").exit_code == 0
    report = tmp_path / "report"
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "runs"), "-o", str(report), "--format", "md,csv,json"])
    assert out.exit_code == 0, out.output
    assert "MAMF" in out.stdout  # the terminal table too
    text = (report / "report.md").read_text()
    assert "| MAMF utilisation | measured ceiling (TFLOP/s) |" in text
    assert "## Pre-flight findings" in text
    findings = text.split("## Pre-flight findings", 1)[1].split("\n## ", 1)[0]
    assert "AMD_LOG_LEVEL=3" in findings
    assert findings.count("debug-logging") == 1 and "none found" in findings  # a, then b
    rows = list(csv.DictReader((report / "results.csv").open()))
    results = {r["run_id"]: load_result(tmp_path / "runs" / r["run_id"] / "result.json") for r in rows}
    for row in rows:
        s = results[row["run_id"]].summary
        assert float(row["mamf_utilisation"]) == pytest.approx(s.mamf_utilisation, rel=1e-5)
        assert float(row["mamf_tflops"]) == pytest.approx(document["summary"]["mamf_tflops"]["fp32"], rel=1e-5)
    data = json.loads((report / "report.json").read_text())
    (system,) = data["systems"]
    assert system["mamf_utilisation"]["n"] == 2
    assert {tuple(f["check"] for f in r["preflight"]) for r in data["run_rows"]} == {("debug-logging",), ()}
