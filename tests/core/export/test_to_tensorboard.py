"""A suite's results as TensorBoard event files, read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import pytest

from tests.core.export.trackers import H200, H200_OOM, SUITE, require, results
from tprimat.contract import ExportTarget
from tprimat.contract.registry import Registry
from tprimat.errors import TprimatError
from tprimat.export.deliver import destination, export_results, write
from tprimat.export.layout import tracker_run
from tprimat.result.schema import load_result

require("tensorboard")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tensorboard")
    registry = Registry.from_environment({})
    for experiment, paths in (("suite-a", [SUITE, H200]), ("failed", [H200_OOM])):
        done, _ = export_results(
            paths, [destination(registry, "tensorboard", ExportTarget(uri=str(root), experiment=experiment))]
        )
        assert [item.error for item in done] == [None] * len(done)
    return root


def _read(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def _hparams(accumulator):
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = {}
    for tag, content in accumulator.PluginTagToContent("hparams").items():
        data[tag] = plugin_data_pb2.HParamsPluginData.FromString(content)
    return data


def test_one_folder_per_run_with_every_iteration_as_a_scalar(logdir):
    assert sorted(p.name for p in (logdir / "suite-a").iterdir()) == sorted(load_result(p).run.id for p in results())
    for path in results():
        result = load_result(path)
        accumulator = _read(logdir / "suite-a" / result.run.id)
        for name in ("step_time_s", "tokens_per_s_per_gpu", "loss"):
            events = [(e.step, e.value) for e in accumulator.Scalars(name)]
            expected = [(r.iteration, getattr(r, name)) for r in result.iterations if getattr(r, name) is not None]
            assert [step for step, _ in events] == [step for step, _ in expected]
            assert [value for _, value in events] == pytest.approx([v for _, v in expected], rel=1e-6)  # float32
        assert sum(e.value for e in accumulator.Scalars("measured")) == result.summary.measured_iterations


def test_summary_scalars_hparams_and_text(logdir):
    from tensorboard.plugins.hparams import api_pb2

    result = load_result(H200 / "result.json")
    accumulator = _read(logdir / "suite-a" / result.run.id)
    median = accumulator.Scalars("summary/step_time_s/median")
    assert [e.value for e in median] == pytest.approx([result.summary.step_time_s.median], rel=1e-6)
    assert [e.step for e in median] == [result.iterations[-1].iteration]
    assert accumulator.Scalars("summary/mfu")[0].value == pytest.approx(result.summary.mfu, rel=1e-6)
    hparams = _hparams(accumulator)
    start = hparams["_hparams_/session_start_info"].session_start_info
    assert start.hparams["config.settings.training.seq_length"].number_value == 2048
    assert start.hparams["config.settings.parallel.strategy"].string_value == "fsdp2"
    assert start.group_name == "llama3.1-8b"
    end = hparams["_hparams_/session_end_info"].session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS
    facts = accumulator.Tensors("facts")[0].tensor_proto.string_val[0].decode()
    assert "| `hardware.device_name` | NVIDIA H200 |" in facts
    config = accumulator.Tensors("config")[0].tensor_proto.string_val[0].decode()
    assert "| `config.settings.training.seq_length` | 2048 |" in config


def test_a_failed_run_ends_its_session_as_a_failure(logdir):
    from tensorboard.plugins.hparams import api_pb2

    (folder,) = (logdir / "failed").iterdir()
    assert _hparams(_read(folder))["_hparams_/session_end_info"].session_end_info.status == api_pb2.STATUS_FAILURE


def test_a_second_export_of_a_run_is_refused_and_writes_nothing(logdir):
    folder = logdir / "suite-a" / "llama3.1-8b"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    to = destination(Registry.from_environment({}), "tensorboard", ExportTarget(uri=str(logdir), experiment="suite-a"))
    run = tracker_run(load_result(H200 / "result.json"), H200 / "result.json")
    with pytest.raises(TprimatError, match="already holds TensorBoard events; remove it to export llama3.1-8b again"):
        write(run, to)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
