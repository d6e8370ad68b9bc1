"""A suite's results as offline W&B run files, read back with wandb's own reader of the
``.wandb`` transaction log (``wandb leet inspect --json``), with no login and no network."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.core.export.trackers import H200, H200_OOM, SUITE, require, results
from tprimat.contract import ExportTarget
from tprimat.contract.registry import Registry
from tprimat.export.deliver import destination, export_results
from tprimat.export.layout import tracker_run
from tprimat.result.schema import load_result

require("wandb")


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """W&B set up as on a machine that never logged in: offline, every folder of its own in tmp, a
    server address where nothing listens (any attempt to reach it would fail the export)."""
    home = tmp_path_factory.mktemp("wandb-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WANDB_API_KEY", raising=False)
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
        for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
            patch.setenv(name, str(home / name.lower()))
        patch.setenv("HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def exported(offline, tmp_path_factory):
    """Each result's W&B records, by tprimat run id; the failed run's apart (it shares an id)."""
    root = tmp_path_factory.mktemp("wandb-runs")
    registry = Registry.from_environment({})
    found = {}
    for project, paths in (("suite-a", [SUITE, H200]), ("failed", [H200_OOM])):
        to = destination(registry, "wandb", ExportTarget(uri=str(root / project), experiment=project))
        done, _ = export_results(paths, [to])
        assert [item.error for item in done] == [None] * len(done)
        for folder in sorted((root / project / "wandb").glob("offline-run-*")):
            records = _inspect(folder)
            found[(project, records["run"][0]["display_name"])] = records
    return found


def _inspect(folder) -> dict[str, list[dict]]:
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    records: dict[str, list[dict]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            records.setdefault(record["type"], []).append(record[record["type"]])
    return records


def test_every_result_is_one_offline_run(exported):
    assert sorted(name for project, name in exported if project == "suite-a") == sorted(
        load_result(p).run.id for p in results()
    )
    for records in exported.values():
        (run,) = records["run"]
        assert run["project"] in {"suite-a", "failed"}


def test_config_holds_the_flattened_config_and_the_facts(exported):
    path = H200 / "result.json"
    laid_out = tracker_run(load_result(path), path)
    config = exported[("suite-a", "llama3.1-8b")]["run"][0]["config"]["update"]
    assert config["config.settings.training.seq_length"] == 2048
    assert config["config.settings.parallel.strategy"] == "fsdp2"
    assert config["hardware.device_name"] == "NVIDIA H200"
    assert config["manifest.command"] == laid_out.facts["manifest.command"]
    assert {key for key in config if not key.startswith("_")} == {*laid_out.params, *laid_out.facts}
    assert exported[("suite-a", "llama3.1-8b")]["run"][0]["tags"] == list(laid_out.labels)


def test_history_is_the_iterations_by_step(exported):
    for path in results():
        result = load_result(path)
        history = exported[("suite-a", result.run.id)]["history"]
        for name in ("step_time_s", "tokens_per_s_per_gpu", "loss"):
            logged = [(h["step"]["num"], h["item"][name]) for h in history if name in h["item"]]
            expected = [(r.iteration, getattr(r, name)) for r in result.iterations if getattr(r, name) is not None]
            assert [step for step, _ in logged] == [step for step, _ in expected], (result.run.id, name)
            assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-12), (result.run.id, name)


def test_summary_and_exit_status(exported):
    result = load_result(H200 / "result.json")
    records = exported[("suite-a", "llama3.1-8b")]
    summary = {}
    for update in records["summary"]:
        summary.update(update["update"])
    assert summary["summary/step_time_s/median"] == pytest.approx(result.summary.step_time_s.median, rel=1e-12)
    assert summary["summary/mfu"] == pytest.approx(result.summary.mfu, rel=1e-12)
    assert records["exit"] == [{"exit_code": 0}]
    (failed,) = [records for (project, _), records in exported.items() if project == "failed"]
    assert failed["exit"] == [{"exit_code": 1}]


def test_an_export_leaves_no_thread_behind(offline, tmp_path):
    """wandb's service threads would stop every later forked parse of this process (can_fork)."""
    import threading

    from tprimat.workers import can_fork

    before = {t.ident for t in threading.enumerate()}
    to = destination(Registry.from_environment({}), "wandb", ExportTarget(uri=str(tmp_path), experiment="threads"))
    done, _ = export_results([H200], [to])
    assert [item.error for item in done] == [None]
    assert {t.ident for t in threading.enumerate()} <= before
    assert can_fork()
