"""``tprimat export`` and ``--report-to``: results into trackers, and a failed export never costs a result."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from tests.core.export.trackers import SUITE, require
from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.result.schema import load_result

TOY_SUITE = """
[suite]
name = "toy-export"
backends = ["toy"]
models = ["llama3.1-tiny"]
repeats = 2
iterations = 4
"""


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _scalars(folder, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def _needs_toy() -> None:
    if "toy" not in Registry.from_environment().backends():
        pytest.skip("the example plugin is not installed (pip install ./tests/example_plugin)")


def test_a_suite_directory_goes_to_tensorboard_one_run_each(tmp_path):
    require("tensorboard")
    done = invoke("export", str(SUITE), "--to", "tensorboard", "--uri", str(tmp_path), "--experiment", "cpu")
    assert done.exit_code == 0, done.output
    written = sorted(p.name for p in (tmp_path / "cpu").iterdir())
    assert written == sorted(p.parent.name for p in SUITE.glob("*/result.json"))
    assert len(done.output.splitlines()) == 4
    for name in written:
        result = load_result(SUITE / name / "result.json")
        assert [step for step, _ in _scalars(tmp_path / "cpu" / name, "step_time_s")] == [
            r.iteration for r in result.iterations
        ]


def test_json_lists_what_went_where(tmp_path):
    require("tensorboard")
    done = invoke("export", str(SUITE / "torch-cpu-llama3.1-tiny-ddp-1proc-r1"), "--to", "tensorboard",
                  "--uri", str(tmp_path), "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.output)
    assert data["skipped"] == []
    (item,) = data["exported"]
    assert item["tracker"] == "tensorboard" and item["error"] is None
    assert item["where"].startswith(f"tensorboard events in {tmp_path}/tprimat/torch-cpu-llama3.1-tiny-ddp-1proc-r1")


def test_an_unknown_tracker_is_one_line_and_exit_code_2(tmp_path):
    done = invoke("export", str(SUITE), "--to", "neptune")
    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "Error: unknown tracker 'neptune'; installed exporters: mlflow, tensorboard, wandb"
    ]


@pytest.mark.parametrize("tracker", ["mlflow", "wandb", "tensorboard"])
def test_a_missing_library_names_the_extra_and_exits_2(monkeypatch, tracker):
    monkeypatch.setitem(sys.modules, tracker, None)  # as where the extra is not installed
    done = invoke("export", str(SUITE), "--to", tracker)
    assert done.exit_code == 2
    (line,) = done.output.strip().splitlines()
    assert line.startswith(f"Error: exporting to {tracker} needs python package {tracker}")
    assert line.endswith(f"not installed here: pip install 'tprimat[{tracker}]'")


def test_one_uri_for_several_trackers_is_refused(tmp_path):
    done = invoke("export", str(SUITE), "--to", "mlflow", "--to", "tensorboard", "--uri", str(tmp_path))
    assert done.exit_code == 2
    assert "--uri names one tracker's store: export to mlflow, tensorboard one --to at a time" in done.output
    assert list(tmp_path.iterdir()) == []


def test_a_directory_without_results_is_refused(tmp_path):
    require("tensorboard")  # the tracker is checked first; without it that is the refusal (tested above)
    (tmp_path / "notes.json").write_text("{}")
    done = invoke("export", str(tmp_path), "--to", "tensorboard")
    assert done.exit_code == 2
    assert "no tprimat results found in" in done.output and "notes.json: not a tprimat result" in done.output


def test_a_failing_export_is_reported_and_exit_code_1(tmp_path):
    require("tensorboard")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = invoke("export", str(SUITE), "--to", "tensorboard", "--uri", str(blocker))
    assert done.exit_code == 1
    errors = [line for line in done.output.splitlines() if line.startswith("error: exporting")]
    assert len(errors) == 4 and all("to tensorboard failed: NotADirectoryError" in e for e in errors)
    assert "Traceback" not in done.output


def test_run_report_to_exports_the_result_it_wrote(tmp_path):
    require("tensorboard")
    _needs_toy()
    runs, logdir = tmp_path / "runs", tmp_path / "tb"
    done = invoke("run", "--backend", "toy", "--iterations", "4", "--output", str(runs), "--run-id", "r1",
                  "--report-to", f"tensorboard={logdir}")  # fmt: skip
    assert done.exit_code == 0, done.output
    result = load_result(runs / "r1" / "result.json")
    assert f"exported to tensorboard: tensorboard events in {logdir}/tprimat/r1" in done.output
    scalars = _scalars(logdir / "tprimat" / "r1", "step_time_s")
    assert [step for step, _ in scalars] == [r.iteration for r in result.iterations]
    assert [value for _, value in scalars] == pytest.approx([r.step_time_s for r in result.iterations], rel=1e-6)


def test_run_with_a_failing_export_keeps_its_result_and_exit_code(tmp_path):
    _needs_toy()
    require("tensorboard")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    runs = tmp_path / "runs"
    done = invoke("run", "--backend", "toy", "--iterations", "4", "--output", str(runs), "--run-id", "r1",
                  "--report-to", f"tensorboard={blocker}")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert load_result(runs / "r1" / "result.json").run.status == "completed"
    assert (
        f"tprimat: warning: --report-to tensorboard: exporting {runs / 'r1' / 'result.json'} to tensorboard failed"
        in done.output
    )
    assert f"export it later with: tprimat export {runs / 'r1' / 'result.json'} --to tensorboard" in done.output
    assert blocker.read_text() == "not a directory"


def test_run_refuses_an_unknown_tracker_before_it_starts(tmp_path):
    done = invoke("run", "--backend", "torch", "--output", str(tmp_path / "runs"), "--report-to", "neptune")
    assert done.exit_code == 2
    assert "unknown tracker 'neptune'" in done.output
    assert not (tmp_path / "runs").exists()


def test_suite_run_reports_each_finished_run(tmp_path):
    require("tensorboard")
    _needs_toy()
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(TOY_SUITE)
    directory, logdir = tmp_path / "suite", tmp_path / "tb"
    done = invoke("suite", "run", str(suite_file), "--output", str(directory), "--report-to", f"tensorboard={logdir}")
    assert done.exit_code == 0, done.output
    results = sorted((directory / "runs").glob("*/result.json"))
    assert len(results) == 2
    assert sorted(p.name for p in (logdir / "tprimat").iterdir()) == sorted(p.parent.name for p in results)
    for path in results:
        steps = [step for step, _ in _scalars(logdir / "tprimat" / path.parent.name, "step_time_s")]
        assert steps == [r.iteration for r in load_result(path).iterations]
