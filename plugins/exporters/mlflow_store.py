"""Write one run into an MLflow tracking store: params, tags, metric histories by iteration.

The store is any tracking URI; the default is a SQLite file in the current
directory, which needs no server (``mlflow ui --backend-store-uri
sqlite:///mlruns.db`` shows it).  Values longer than MLflow accepts are cut and
marked as cut; key characters MLflow refuses become ``_``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from tprimat.contract.exporter import ExportTarget, TrackerRun, as_text

DEFAULT_URI = "sqlite:///mlruns.db"
DEFAULT_EXPERIMENT = "tprimat"

#: A tprimat result status -> the MLflow run status it ends with.
STATUS = {"completed": "FINISHED", "partial": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}

#: Characters MLflow accepts in metric, param and tag keys.
_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-. :/]")

T = TypeVar("T")


def export(run: TrackerRun, target: ExportTarget) -> str:
    """Create an MLflow run for ``run`` and return where it is."""
    from mlflow.tracking import MlflowClient

    for name in ("mlflow.store.db.utils", "alembic"):  # table creation on a new store is not news
        logging.getLogger(name).setLevel(logging.WARNING)
    uri = target.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    experiment_name = target.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(experiment_name)
    created = client.create_run(
        experiment_id,
        start_time=_ms(run.started_at),
        tags={"tprimat.run_id": run.run_id},
        run_name=run.name,
    )
    run_id = created.info.run_id
    try:
        _log(client, run_id, run)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status=STATUS.get(run.status, "FINISHED"), end_time=_ms(run.finished_at))
    return f"mlflow run {run_id} in experiment {experiment_name!r} at {uri}"


def _log(client: Any, run_id: str, run: TrackerRun) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.validation import (
        MAX_METRICS_PER_BATCH,
        MAX_PARAM_VAL_LENGTH,
        MAX_PARAMS_TAGS_PER_BATCH,
        MAX_TAG_VAL_LENGTH,
    )

    params = [Param(_key(k), _fit(as_text(v), MAX_PARAM_VAL_LENGTH)) for k, v in run.params.items()]
    tags = [RunTag(_key(k), _fit(v, MAX_TAG_VAL_LENGTH)) for k, v in run.facts.items()]
    for param_batch in _chunks(params, MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, params=param_batch)
    for tag_batch in _chunks(tags, MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, tags=tag_batch)
    # An iteration without a time of its own is placed at the run's start; the summary at its end.
    logged = {
        step: _ms(run.wall_times.get(step, run.started_at)) for points in run.series.values() for step, _ in points
    }
    end = _ms(run.finished_at if run.finished_at is not None else run.started_at)
    metrics = [
        Metric(_key(name), value, logged[step], step) for name, points in run.series.items() for step, value in points
    ]
    metrics += [Metric(_key(name), value, end, 0) for name, value in run.summary.items()]
    for metric_batch in _chunks(metrics, MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metric_batch)


def _ms(posix: float | None) -> int:
    return int((time.time() if posix is None else posix) * 1000)


def _key(name: str) -> str:
    return _BAD_KEY_CHARS.sub("_", name)


def _fit(text: str, limit: int) -> str:
    """``text``, or as much as fits with a mark saying it was cut."""
    if len(text) <= limit:
        return text
    mark = f" …[cut: {len(text)} characters]"
    return text[: limit - len(mark)] + mark


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
