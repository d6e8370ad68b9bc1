"""Exporters are plugins: declared through ``register_exporters``, found by name, checked before use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tprimat
from tests.core.export.trackers import SUITE
from tprimat.contract import ExporterSpec, ExportTarget, Requirements, TrackerRun
from tprimat.contract.registry import ExporterError, Registry
from tprimat.errors import TprimatError
from tprimat.export.deliver import destination, export_results


class MemoExporter:
    """A third-party exporter that keeps what it is given."""

    def __init__(self, name: str = "memo") -> None:
        self.name = name
        self.received: list[tuple[TrackerRun, ExportTarget]] = []

    def _export(self, run: TrackerRun, target: ExportTarget) -> str:
        self.received.append((run, target))
        return f"memo #{len(self.received)}"

    @tprimat.hookimpl
    def register_exporters(self):
        return [ExporterSpec(name=self.name, description="keeps runs in memory", export=self._export)]


def _registry(*plugins: object) -> Registry:
    registry = Registry()
    registry.load_entry_points()
    for number, plugin in enumerate(plugins):
        registry.register(plugin, name=f"third-party-{number}", distribution=f"dist-{number}")
    return registry


def test_hook_register_exporters():
    memo = MemoExporter()
    registry = _registry(memo)
    exporters = registry.exporters()
    assert {"mlflow", "wandb", "tensorboard", "memo"} <= set(exporters)
    assert exporters["mlflow"].plugin_name == "exporters" and exporters["mlflow"].distribution == "tprimat"
    assert exporters["memo"].distribution == "dist-0"
    to = destination(registry, "memo", ExportTarget(uri="somewhere", experiment="campaign"))
    done, loaded = export_results([SUITE], [to])
    assert [item.where for item in done] == [f"memo #{n}" for n in range(1, 5)]
    assert [run.source for run, _ in memo.received] == [str(entry.path) for entry in loaded.runs]
    assert {target for _, target in memo.received} == {ExportTarget(uri="somewhere", experiment="campaign")}


def test_a_name_claimed_twice_is_an_error_naming_both_distributions():
    registry = _registry(MemoExporter(), MemoExporter())
    with pytest.raises(ExporterError, match="exporter 'memo' is claimed by both dist-0 and dist-1; uninstall one"):
        registry.exporter("memo")
    assert registry.exporter("tensorboard").name == "tensorboard"  # the others stay usable


def test_an_unknown_tracker_names_the_installed_ones():
    with pytest.raises(
        ExporterError, match=r"unknown tracker 'neptune'; installed exporters: mlflow, tensorboard, wandb"
    ):
        _registry().exporter("neptune")


def test_a_plugin_answering_with_the_wrong_type_is_recorded_and_skipped():
    class Wrong:
        @tprimat.hookimpl
        def register_exporters(self):
            return ["mlflow"]

    registry = _registry(Wrong())
    assert set(registry.exporters()) == {"mlflow", "wandb", "tensorboard"}
    assert [e.error for e in registry.load_errors if e.name == "third-party-0"] == [
        "register_exporters failed: TypeError: register_exporters must return ExporterSpec objects"
    ]


def test_a_missing_library_is_one_line_naming_the_extra(monkeypatch):
    class NeedsLibrary:
        @tprimat.hookimpl
        def register_exporters(self):
            return [
                ExporterSpec(
                    name="lib",
                    description="needs a library",
                    export=lambda run, target: "never",
                    requires=Requirements(python=("tprimat_no_such_tracker",), hint="pip install 'tracker-extra'"),
                )
            ]

    registry = _registry(NeedsLibrary())
    with pytest.raises(TprimatError) as raised:
        destination(registry, "lib", ExportTarget())
    assert str(raised.value) == (
        "exporting to lib needs python package tprimat_no_such_tracker, not installed here: pip install 'tracker-extra'"
    )
    assert raised.value.exit_code == 2
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as where the extra is not installed
    with pytest.raises(TprimatError, match=r"needs python package mlflow.*pip install 'tprimat\[mlflow\]'"):
        destination(registry, "mlflow", ExportTarget())


def test_declaring_the_exporters_imports_no_tracker_library():
    code = (
        "import sys\n"
        "from tprimat.contract.registry import Registry\n"
        "registry = Registry.from_environment()\n"
        "assert {'mlflow', 'wandb', 'tensorboard'} <= set(registry.exporters())\n"
        "print(sorted(m for m in ('mlflow', 'wandb', 'tensorboard') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
