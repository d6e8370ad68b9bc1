"""A suite's results in a local MLflow SQLite store, read back with MLflow's own client."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.core.export.trackers import H200, H200_OOM, SUITE, require, results
from tprimat.contract import ExportTarget
from tprimat.contract.exporter import as_text
from tprimat.contract.registry import Registry
from tprimat.export.deliver import destination, export_results
from tprimat.export.layout import tracker_run
from tprimat.result.schema import load_result

require("mlflow", "sqlalchemy", "alembic")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Every fixture result exported once into a new store; the MLflow runs by tprimat run id."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlruns.db"
    registry = Registry.from_environment({})
    for experiment, paths in (("suite-a", [SUITE, H200]), ("failed", [H200_OOM])):
        to = destination(registry, "mlflow", ExportTarget(uri=uri, experiment=experiment))
        done, _ = export_results(paths, [to])
        assert [item.error for item in done] == [None] * len(done)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("suite-a")
    runs = client.search_runs([experiment.experiment_id])
    failed = client.search_runs([client.get_experiment_by_name("failed").experiment_id])
    return client, {run.data.tags["tprimat.run_id"]: run for run in runs}, failed


def _ms(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp).timestamp() * 1000)


def test_every_result_is_one_mlflow_run_named_after_it(store):
    _, runs, _ = store
    ids = [load_result(path).run.id for path in results()]
    assert sorted(runs) == sorted(ids)
    assert {run.info.run_name for run in runs.values()} == set(ids)


def test_params_are_the_flattened_config(store):
    _, runs, _ = store
    for path in results():
        result = load_result(path)
        expected = {key: as_text(value) for key, value in tracker_run(result, path).params.items()}
        assert runs[result.run.id].data.params == expected
    assert runs["llama3.1-8b"].data.params["config.settings.training.seq_length"] == "2048"


def test_tags_are_the_facts(store):
    _, runs, _ = store
    tags = runs["llama3.1-8b"].data.tags
    assert tags["hardware.device_name"] == "NVIDIA H200"
    assert tags["software.torch"] == "2.11.0+cu130"
    assert tags["provenance.parser"] == "torch.parse_metrics"
    assert tags["manifest.command"].startswith("tprimat run --backend torch --model llama3.1-8b")
    assert tags["mlflow.runName"] == "llama3.1-8b"


def test_metric_histories_are_the_iterations_by_step(store):
    client, runs, _ = store
    for path in results():
        result = load_result(path)
        run_id = runs[result.run.id].info.run_id
        for name in ("step_time_s", "tokens_per_s_per_gpu", "loss"):
            history = [(m.step, m.value) for m in client.get_metric_history(run_id, name)]
            expected = [(r.iteration, getattr(r, name)) for r in result.iterations if getattr(r, name) is not None]
            assert sorted(history) == expected, (result.run.id, name)
        measured = client.get_metric_history(run_id, "measured")
        assert sum(m.value for m in measured) == result.summary.measured_iterations
    first = load_result(H200 / "result.json").iterations[0]
    history = client.get_metric_history(runs["llama3.1-8b"].info.run_id, "step_time_s")
    assert min(history, key=lambda m: m.step).timestamp == _ms(first.timestamp)


def test_summary_metrics_and_status(store):
    _, runs, failed = store
    result = load_result(H200 / "result.json")
    run = runs["llama3.1-8b"]
    metrics = run.data.metrics
    assert metrics["summary/step_time_s/median"] == result.summary.step_time_s.median
    assert metrics["summary/tokens_per_s_per_gpu/p95"] == result.summary.tokens_per_s_per_gpu.p95
    assert metrics["summary/tokens_per_s_per_gpu/cv"] == result.summary.tokens_per_s_per_gpu.cv
    assert metrics["summary/mfu"] == result.summary.mfu
    assert metrics["summary/tflops_per_gpu"] == result.summary.tflops_per_gpu
    assert run.info.status == "FINISHED"
    assert (run.info.start_time, run.info.end_time) == (_ms(result.run.started_at), _ms(result.run.finished_at))
    assert [(run.data.tags["run.status"], run.info.status) for run in failed] == [("failed", "FAILED")]
