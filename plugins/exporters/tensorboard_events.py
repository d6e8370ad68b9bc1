"""Write one run as TensorBoard event files: scalars by iteration, hyperparameters, text tables.

Written with the ``tensorboard`` package's own event-file writer and protocol
buffers, the ones its reader uses, so neither TensorFlow nor torch is needed
(``tensorboardX`` would be a second package doing the same; torch's writer is
this one behind a torch import).  Each run gets its own folder,
``<logdir>/<experiment>/<run id>``; a folder that already holds events is not
written into again (TensorBoard would show the two exports as one run).
TensorBoard keeps scalars as 32-bit floats: the result file has the exact values.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tprimat.contract.exporter import ExportTarget, TrackerRun, as_text
from tprimat.errors import TprimatError

DEFAULT_LOGDIR = "tensorboard"
DEFAULT_EXPERIMENT = "tprimat"

#: Result statuses that end the hyperparameter session as a success.
SUCCEEDED = frozenset({"completed", "partial"})


def export(run: TrackerRun, target: ExportTarget) -> str:
    """Write ``run``'s event file and return its folder."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = Path(target.uri or DEFAULT_LOGDIR) / (target.experiment or DEFAULT_EXPERIMENT) / _folder_name(run.run_id)
    if any(folder.glob("events.out.tfevents.*")):
        raise TprimatError(f"{folder} already holds TensorBoard events; remove it to export {run.run_id} again")
    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    try:
        for event in _events(run):
            writer.add_event(event)
    finally:
        writer.close()
    return f"tensorboard events in {folder} (view with: tensorboard --logdir {folder.parent})"


def _events(run: TrackerRun) -> list[Any]:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    start = run.started_at if run.started_at is not None else time.time()
    end = run.finished_at if run.finished_at is not None else start
    by_step: dict[int, list[Any]] = {}
    for name, points in run.series.items():
        for step, value in points:
            by_step.setdefault(step, []).append(summary_pb2.Summary.Value(tag=name, simple_value=value))
    events = [_at(start, 0, _hparams_start(run))]
    events += [_at(start, 0, _text("config", run.params)), _at(start, 0, _text("facts", run.facts))]
    events += [
        event_pb2.Event(wall_time=run.wall_times.get(step, start), step=step, summary=summary_pb2.Summary(value=values))
        for step, values in sorted(by_step.items())
    ]
    # The summary closes the run at its last iteration: steps only go forward (TensorBoard's reader
    # takes a step going back for a restarted job and drops what it had of those tags).
    last = max(by_step, default=0)
    summary = [summary_pb2.Summary.Value(tag=name, simple_value=value) for name, value in run.summary.items()]
    events.append(_at(end, last, summary_pb2.Summary(value=summary)))
    events.append(_at(end, last, _hparams_end(run)))
    return events


def _at(wall_time: float, step: int, summary: Any) -> Any:
    from tensorboard.compat.proto import event_pb2

    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


def _text(tag: str, table: Any) -> Any:
    """A two-column Markdown table for TensorBoard's text dashboard."""
    from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.plugins.text.metadata import create_summary_metadata

    rows = "\n".join(f"| `{key}` | {as_text(value).replace('|', '&#124;')} |" for key, value in table.items())
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        string_val=[f"| key | value |\n|---|---|\n{rows}".encode()],
        tensor_shape=tensor_shape_pb2.TensorShapeProto(),
    )
    metadata = create_summary_metadata(display_name=tag, description="")
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)])


def _hparams_start(run: TrackerRun) -> Any:
    """The config as hyperparameters, so TensorBoard's HParams dashboard can set runs side by side."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    info = plugin_data_pb2.SessionStartInfo(group_name=run.run_id, start_time_secs=run.started_at or 0.0)
    for key, value in run.params.items():
        if isinstance(value, bool):
            info.hparams[key].bool_value = value
        elif isinstance(value, int | float):
            info.hparams[key].number_value = value
        else:
            info.hparams[key].string_value = as_text(value)
    return _hparams_summary("session_start_info", plugin_data_pb2.HParamsPluginData(session_start_info=info))


def _hparams_end(run: TrackerRun) -> Any:
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    status = api_pb2.STATUS_SUCCESS if run.status in SUCCEEDED else api_pb2.STATUS_FAILURE
    info = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=run.finished_at or 0.0)
    return _hparams_summary("session_end_info", plugin_data_pb2.HParamsPluginData(session_end_info=info))


def _hparams_summary(field: str, data: Any) -> Any:
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.hparams import metadata

    data.version = metadata.PLUGIN_DATA_VERSION
    tag = {"session_start_info": metadata.SESSION_START_INFO_TAG, "session_end_info": metadata.SESSION_END_INFO_TAG}
    return summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag[field], metadata=metadata.create_summary_metadata(data))]
    )


def _folder_name(run_id: str) -> str:
    """The run id as one folder name (a run id never holds a path separator, but a copied result might)."""
    return run_id.replace("/", "_").replace("\\", "_") or "run"
