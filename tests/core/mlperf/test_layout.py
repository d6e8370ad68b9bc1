"""Which files of a published MLPerf result folder are runs: real v5.1 folders with their side files."""

from __future__ import annotations

import shutil
from pathlib import Path

from tprimat.mlperf.layout import NO_SCALING, find_results, read_scaling
from tprimat.mlperf.reader import mllog_files

FIXTURES = Path(__file__).parents[2] / "fixtures" / "mlperf"
MI355X_8B = FIXTURES / "v5.1" / "amd_mi355x"
PUBLISHED = FIXTURES / "v5.1_published"
MI355X_LORA = PUBLISHED / "AMD" / "results" / "MI355X_EPYC_9575F_pytorch" / "llama2_70b_lora"
DELL_LORA = PUBLISHED / "Dell" / "results" / "1xXE9780x8B200-SXM-180GB" / "llama2_70b_lora"
OWN_RUN = next((FIXTURES.parent / "compare" / "torch_cpu_convergence").glob("*1proc-r1"))


def copy_folder(source: Path, tmp_path: Path) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    return folder


def test_a_folder_with_scaling_json_is_read():
    found = find_results([MI355X_8B])
    assert found is not None and mllog_files([MI355X_8B]) == found.runs
    assert [p.name for p in found.runs] == [f"result_{n}.txt" for n in range(10)]
    assert found.other == []
    assert set(found.scaling.values()) == {read_scaling(MI355X_8B)}
    scaling = read_scaling(MI355X_8B)
    assert scaling.factor == 1.004011735824202 and scaling.source == str(MI355X_8B / "scaling.json")


def test_a_published_tree_with_an_unknown_file():
    found = find_results([PUBLISHED])
    assert found is not None and len(found.runs) == 30
    assert {p.parent for p in found.runs} == {
        MI355X_LORA,
        DELL_LORA,
        PUBLISHED / "AMD" / "results" / "MI350X_EPYC_9575F_pytorch" / "llama31_8b",
    }
    # The launcher script that ships in Dell's folder is reported, not read and not fatal.
    [script] = found.other
    assert script.path.endswith("config_X780x8B200-SXM-180G_1x8x1xtp1pp1cp1.sh") and script.kind == "unknown"
    assert "not an MLPerf log" in script.note
    assert found.scaling[str(DELL_LORA / "result_3.txt")] == NO_SCALING
    assert found.scaling[str(MI355X_LORA / "result_3.txt")].factor == 1.0033670033670032


def test_power_readings_are_not_runs(tmp_path):
    folder = copy_folder(MI355X_LORA, tmp_path)
    shutil.copytree(FIXTURES / "v4.1_power" / "power", folder / "power")
    found = find_results([folder])
    assert found is not None and len(found.runs) == 10
    [power] = found.other
    assert power.kind == "power" and power.path == str(folder / "power" / "result_0" / "node_0.txt")


def test_a_log_not_named_result_is_left_out_of_a_result_folder(tmp_path):
    """MLPerf's summarizer reads result_*.txt only; named on its own, the file is a run."""
    folder = copy_folder(MI355X_LORA, tmp_path)
    extra = folder / "mlperf.log"
    shutil.copy(OWN_RUN / "mlperf.log", extra)
    found = find_results([folder])
    assert found is not None and extra not in found.runs
    assert [o.path for o in found.other] == [str(extra)] and "not named result_*.txt" in found.other[0].note
    named = find_results([folder / "result_0.txt", extra])
    assert named is not None and named.runs == [folder / "result_0.txt", extra]


def test_a_result_file_without_mllog_lines_is_reported(tmp_path):
    folder = copy_folder(MI355X_LORA, tmp_path)
    (folder / "result_10.txt").write_text("srun: error: node lost\n")
    found = find_results([folder])
    assert found is not None and len(found.runs) == 10
    assert "would count it as a run that failed" in found.other[0].note


def test_a_training_log_beside_an_mlperf_log_stays_a_training_log():
    assert (OWN_RUN / "mlperf.log").is_file() and find_results([OWN_RUN]) is None
    assert find_results([OWN_RUN / "mlperf.log"]).runs == [OWN_RUN / "mlperf.log"]
    assert find_results([OWN_RUN / "logs"]) is None


def test_an_unusable_scaling_json_gives_no_factor(tmp_path):
    assert read_scaling(tmp_path) == NO_SCALING
    (tmp_path / "scaling.json").write_text('{"scaling": 1.01}')
    assert read_scaling(tmp_path).factor is None and "scaling_factor" in read_scaling(tmp_path).problem
    (tmp_path / "scaling.json").write_text('{"scaling_factor": 1.01')
    assert read_scaling(tmp_path).factor is None and "unreadable" in read_scaling(tmp_path).problem
    (tmp_path / "scaling.json").write_text('{"scaling_factor": 0}')
    assert read_scaling(tmp_path).factor is None
