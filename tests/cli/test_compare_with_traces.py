"""`tprimat compare` adds the trace section when the compared runs kept traces in <run>/traces/."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY = FIXTURES / "legacy"
TRACES = FIXTURES / "traces" / "tracelens"
AMD = "output_prev__train_amd_prim_llama.516b342.json"
NVD = "output_prev__train_nvd_nemo_llama.516b342.json"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_report_compares_the_runs_gpu_traces(tmp_path):
    """Two imported results (MI300X, H100), each with a real rank-0 trace of its vendor in traces/."""
    imported = tmp_path / "imported"
    out = invoke("import-legacy", str(LEGACY / AMD), str(LEGACY / NVD), "-o", str(imported), "--precision", "bf16")
    assert out.exit_code == 0, out.output
    runs = []
    for name, trace in (
        (AMD, "mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
        (NVD, "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
    ):
        run_dir = tmp_path / name.split(".")[0]
        (run_dir / "traces").mkdir(parents=True)
        shutil.copyfile(imported / f"legacy-{name[:-5]}.json", run_dir / "result.json")
        shutil.copyfile(TRACES / trace, run_dir / "traces" / "rank-0.pt.trace.json.gz")
        runs.append(run_dir)
    report = tmp_path / "report"
    out = invoke("compare", *map(str, runs), "-o", str(report), "--format", "md", "--baseline", "H100")
    assert out.exit_code == 0, out.output
    text = (report / "report.md").read_text()
    section = text[text.index("## Traces") :]
    from tprimat.trace.compare import compare_traces

    expected = compare_traces(
        [runs[1] / "traces"], [runs[0] / "traces"], labels=("8× H100-SXM · NeMo", "8× MI300X · Primus")
    )
    assert "### 8× MI300X · Primus vs 8× H100-SXM · NeMo" in section
    assert expected.to_markdown().strip() in section
    if importlib.util.find_spec("matplotlib") is not None:  # the figure needs the plot extra
        assert (report / "traces_1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.torch
def test_profiled_torch_cpu_runs_get_a_trace_section_that_says_there_is_no_gpu_time(tmp_path, profiled_torch_cpu_runs):
    """The session's two profiled torch runs (1 and 2 processes, tests/cli/conftest.py), compared."""
    runs = profiled_torch_cpu_runs.runs
    for run_dir in (profiled_torch_cpu_runs.one, profiled_torch_cpu_runs.two):
        assert (run_dir / "traces" / "rank-0.pt.trace.json").is_file()
    report = tmp_path / "report"
    out = invoke("compare", str(runs), "-o", str(report), "--format", "md")
    assert out.exit_code == 0, out.output
    section = (report / "report.md").read_text().split("## Traces", 1)[1]
    assert "record no GPU activity (CPU-only profiles)" in section
    assert "failed" not in section
