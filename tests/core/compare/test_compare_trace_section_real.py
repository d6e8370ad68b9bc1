"""The comparison report's trace section with the real trace comparison and real traces."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from compare_helpers import AMD, NVD, legacy_file

from tprimat.compare.document import Image, Markdown
from tprimat.compare.model import build_comparison
from tprimat.compare.traces import trace_section
from tprimat.settings.config import load_config

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "tracelens"


def test_trace_section_compares_the_runs_traces(legacy_dir, tmp_path):
    pytest.importorskip("matplotlib")  # the section's PNG needs the plot extra
    runs = []
    for source, trace in (
        (AMD, "mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
        (NVD, "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
    ):
        run_dir = tmp_path / source.name.split(".")[0]
        (run_dir / "traces").mkdir(parents=True)
        shutil.copy(TRACES / trace, run_dir / "traces" / "rank0.pt.trace.json.gz")
        (run_dir / "result.json").write_bytes(legacy_file(legacy_dir, source).read_bytes())
        runs.append(run_dir)
    comparison = build_comparison(runs, cost=load_config().cost)
    out = tmp_path / "report"
    out.mkdir()
    blocks = trace_section(comparison, out)
    markdown = [b for b in blocks if isinstance(b, Markdown)]
    assert markdown and "Where one step's time goes" in markdown[0].text
    assert "| **step (host ProfilerStep)** |" in markdown[0].text
    images = [b for b in blocks if isinstance(b, Image)]
    assert images and (out / images[0].file).read_bytes()[:4] == b"\x89PNG"
