"""The scaled score of published MLPerf v5.1 folders equals the published time to train.

Published figures and where they come from: tests/fixtures/mlperf/PROVENANCE.md.  The
olympic score stays what tprimat gave before it read ``scaling.json``: the score of the
result files listed one by one.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from tprimat.mlperf.reader import olympic_score, read_file
from tprimat.mlperf.summary import summarize_paths

FIXTURES = Path(__file__).parents[2] / "fixtures" / "mlperf"
MI355X_8B = FIXTURES / "v5.1" / "amd_mi355x"
AMD = FIXTURES / "v5.1_published" / "AMD" / "results"
MI350X_8B = AMD / "MI350X_EPYC_9575F_pytorch" / "llama31_8b"
MI355X_LORA = AMD / "MI355X_EPYC_9575F_pytorch" / "llama2_70b_lora"
DELL_LORA = FIXTURES / "v5.1_published" / "Dell" / "results" / "1xXE9780x8B200-SXM-180GB" / "llama2_70b_lora"

#: folder, published time to train (min) and its decimals, the olympic score alone (min)
PUBLISHED = [
    (MI355X_8B, 99.709, 3, 99.3101375),  # MLCommons v5.1 table, 5.1-0018
    (MI350X_8B, 122.929, 3, 122.4383083),  # MLCommons v5.1 table, 5.1-0017
    (MI355X_LORA, 10.18, 2, 10.1505688),  # AMD's announcement of its v5.1 results
]


def one_system(folder: Path):
    [system] = summarize_paths([folder]).systems
    return system


@pytest.mark.parametrize(("folder", "published", "decimals", "olympic"), PUBLISHED, ids=lambda v: str(v)[-30:])
def test_the_scaled_score_is_the_published_one(folder, published, decimals, olympic):
    system = one_system(folder)
    assert system.scaling.source == str(folder / "scaling.json")
    assert round(system.scaled_score_s / 60, decimals) == published
    assert round(system.olympic.score_min, decimals) != published  # unscaled, it would not match
    # The olympic score is tprimat's figure for the result files listed one by one.
    listed = olympic_score([read_file(p) for p in sorted(folder.glob("result_*.txt"))])
    assert system.olympic.score_s == listed.score_s and system.olympic.score_min == pytest.approx(olympic, abs=1e-6)
    assert system.scaled_score_s == pytest.approx(system.olympic.score_s * system.scaling.factor, rel=1e-15)


@pytest.mark.parametrize("folder", [MI355X_8B, MI350X_8B, MI355X_LORA, DELL_LORA], ids=lambda p: p.parent.name)
def test_the_scaled_score_equals_mlperf_result_summarizer(folder):
    summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")
    system = one_system(folder)
    with contextlib.redirect_stdout(io.StringIO()):
        official, _, factor = summarizer._compute_strong_score_standalone(
            system.benchmark, folder.parent.name, False, str(folder), "training", "5.1.0"
        )
    assert system.scaling.factor == factor
    assert system.scaled_score_s / 60 == pytest.approx(official, rel=1e-12)


def test_a_folder_without_scaling_json_scales_by_one():
    """Dell's folder: no scaling.json, and one run cancelled before run_stop counts as the failed run."""
    system = one_system(DELL_LORA)
    assert system.scaling.factor == 1.0 and system.scaling.source is None
    assert system.olympic.converged == 9 and str(DELL_LORA / "result_0.txt") in system.olympic.dropped
    assert system.scaled_score_s == system.olympic.score_s == pytest.approx(10.0899625 * 60)


def test_an_unusable_scaling_json_keeps_the_olympic_score(tmp_path):
    folder = tmp_path / "llama2_70b_lora"
    shutil.copytree(MI355X_LORA, folder)
    (folder / "scaling.json").write_text("{}")
    system = one_system(folder)
    assert system.olympic.score_min == pytest.approx(10.1505688, abs=1e-6)
    assert system.scaled_score_s is None and "scaling_factor" in system.scaling.problem


def test_runs_of_folders_scaled_differently_get_no_scaled_score(tmp_path):
    """The same system's runs from two folders with different factors: MLPerf scores each folder alone."""
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(MI355X_LORA, first)
    shutil.copytree(MI355X_LORA, second)
    (second / "scaling.json").write_text('{"scaling_factor": 1.02}')
    [system] = summarize_paths([first, second]).systems
    assert system.olympic.runs == 20 and system.olympic.score_s is not None
    assert system.scaled_score_s is None and "scaled differently" in system.scaling.problem
    (second / "scaling.json").write_text((first / "scaling.json").read_text())
    [system] = summarize_paths([first, second]).systems
    assert system.scaling.factor == 1.0033670033670032 and system.scaled_score_s is not None
