"""A faulty plugin is stopped at the registry: it never breaks a command it has nothing to do with.

Detection and recognition hooks (asked for every command, whichever backend it
uses) are skipped when they raise or answer with the wrong type, reported once
and listed by ``tprimat plugins``; a per-backend hook's bad answer is one line
naming the plugin, its distribution, the hook and the backend (exit code 2).
The faulty plugins are registered in-process through the registry's own API.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import tprimat
from tprimat.cli import cli
from tprimat.contract.backend import BackendSpec, LogMatch
from tprimat.contract.registry import PluginError, Registry
from tprimat.hardware.platform import PlatformInfo

MEGATRON_LOG = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "logs"
    / "megatron"
    / "mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
)
ORIGIN = "plugin faulty_plugin (faulty-dist 0.1)"


def _raise(*args):
    raise RuntimeError("the plugin's own bug")


class Faulty:
    """A plugin with a backend ``faulty``; each test sets what goes wrong."""

    def __init__(self, *, sniff=None, explain=None, find_logs=None, detect=None, launch=None, events=None):
        self.spec = BackendSpec(
            name="faulty",
            platform="any",
            framework="faulty-framework",
            description="a backend whose plugin has bugs",
            sniff=sniff,
            explain=explain,
            find_logs=find_logs,
        )
        self.detect = detect
        self.plan = launch
        self.events = events

    @tprimat.hookimpl
    def register_backends(self):
        return [self.spec]

    @tprimat.hookimpl
    def detect_platform(self):
        return self.detect() if self.detect is not None else None

    @tprimat.hookimpl
    def launch(self, backend, context):
        return self.plan

    @tprimat.hookimpl
    def parse_metrics(self, backend, lines, source):
        for _ in lines:
            yield from self.events or ()


def registry_with(plugin: Faulty, **kwargs) -> Registry:
    registry = Registry.from_environment({})
    for name, value in kwargs.items():
        setattr(registry, name, value)
    registry.register(plugin, name="faulty_plugin", distribution="faulty-dist", version="0.1")
    return registry


def invoke(registry: Registry, *args: str):
    return CliRunner().invoke(cli, list(args), obj={"registry_factory": lambda: registry})


def one_line_error(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, output
    return errors[0]


# -- detection: skipped, never breaking another backend ----------------------------------------


@pytest.mark.parametrize(
    ("detect", "error"),
    [
        (lambda: _raise(), "RuntimeError: the plugin's own bug"),
        (lambda: "cpu", "a str ('cpu') instead of a PlatformInfo"),
    ],
    ids=["raises", "answers-a-string"],
)
def test_a_broken_detect_platform_is_skipped_and_a_builtin_backend_still_runs(tmp_path, detect, error):
    registry = registry_with(Faulty(detect=detect))
    out = invoke(registry, "run", "--backend", "torch", "--output", str(tmp_path), "--run-id", "d", "--dry-run")
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output
    warning = f"tprimat: warning: {ORIGIN}: its detect_platform hook was skipped: {error}"
    assert out.output.count(warning) == 1, out.output
    assert [(e.name, e.distribution, e.hook, e.error) for e in registry.hook_errors] == [
        ("faulty_plugin", "faulty-dist", "detect_platform", error)
    ]


def test_the_next_probe_answers_when_a_plugin_probe_fails():
    registry = registry_with(Faulty(detect=_raise), warn=lambda message: None)
    assert isinstance(registry.detect_platform(), PlatformInfo)  # the built-in fallback
    assert registry.hook_errors[0].hook == "detect_platform"


def test_strict_plugins_raise_instead_of_skipping():
    registry = registry_with(Faulty(detect=_raise), strict=True)
    with pytest.raises(
        PluginError, match="^" + re.escape(f"{ORIGIN}: its detect_platform hook was skipped: RuntimeError")
    ):
        registry.detect_platform()


# -- recognition: skipped, never breaking the parsing of another backend's logs -----------------


@pytest.mark.parametrize(
    ("sniff", "error"),
    [
        (_raise, "RuntimeError: the plugin's own bug"),
        (lambda lines, source: "yes, mine", "a str ('yes, mine') instead of a LogMatch"),
    ],
    ids=["raises", "answers-a-string"],
)
def test_a_broken_sniffer_is_skipped_and_builtin_megatron_logs_still_parse(tmp_path, sniff, error):
    registry = registry_with(Faulty(sniff=sniff))
    out = invoke(registry, "parse", str(MEGATRON_LOG), "-o", str(tmp_path / "parsed.json"))
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output
    assert f"tprimat: warning: {ORIGIN}: its BackendSpec.sniff of backend faulty was skipped: {error}" in out.output
    assert json.loads((tmp_path / "parsed.json").read_text())["run"]["backend"] == "nvd_megatron"


def test_a_working_sniffer_still_answers_through_the_guard():
    match = LogMatch(confidence=0.5, evidence="faulty line at x:1")
    registry = registry_with(Faulty(sniff=lambda lines, source: match))
    assert registry.backends()["faulty"].spec.sniff(["x"], "x") is match
    assert registry.hook_errors == []


def test_broken_explain_and_find_logs_are_skipped(tmp_path):
    registry = registry_with(Faulty(explain=_raise, find_logs=lambda directory: ["not", "a", "pair"]), warn=print)
    spec = registry.backends()["faulty"].spec
    assert spec.explain(["a"], ["b"]) is None
    assert spec.find_logs(tmp_path) is None
    assert {(e.hook, e.backend) for e in registry.hook_errors} == {("explain", "faulty"), ("find_logs", "faulty")}


def test_tprimat_plugins_lists_the_failing_hooks_with_their_errors():
    registry = registry_with(Faulty(detect=_raise, sniff=_raise))
    out = invoke(registry, "plugins", "--json")
    assert out.exit_code == 0, out.output
    skipped = json.loads(out.output)["skipped_hooks"]
    assert {(s["name"], s["distribution"], s["hook"], s["backend"], s["error"]) for s in skipped} == {
        ("faulty_plugin", "faulty-dist", "detect_platform", None, "RuntimeError: the plugin's own bug"),
        ("faulty_plugin", "faulty-dist", "sniff", "faulty", "RuntimeError: the plugin's own bug"),
    }
    table = invoke(registry_with(Faulty(sniff=_raise)), "plugins")
    assert table.exit_code == 0 and "Hooks that fail" in table.output and "sniff" in table.output


# -- per-backend hooks: one line naming plugin, distribution, hook and backend ------------------


def test_launch_answering_a_dict_is_a_one_line_error(tmp_path):
    registry = registry_with(Faulty(launch={"argv": ["train"]}))
    out = invoke(registry, "run", "--backend", "faulty", "--output", str(tmp_path), "--run-id", "d", "--dry-run")
    assert out.exit_code == 2, out.output
    assert one_line_error(out.output) == (
        f"Error: {ORIGIN}: its launch hook for backend faulty answered with a dict "
        "({'argv': ['train']}) instead of a LaunchPlan (report it to the plugin's authors)"
    )


def test_parse_metrics_yielding_non_records_is_a_one_line_error(tmp_path):
    registry = registry_with(Faulty(events=[{"iteration": 1}]))
    out = invoke(registry, "parse", "--backend", "faulty", str(MEGATRON_LOG), "-o", str(tmp_path / "p.json"))
    assert out.exit_code == 2, out.output
    line = one_line_error(out.output)
    assert line.startswith(
        f"Error: {ORIGIN}: its parse_metrics hook for backend faulty yielded a dict ({{'iteration': 1}}) "
        "instead of a parse record"
    ), line
    assert not (tmp_path / "p.json").exists()


def test_parse_metrics_answering_no_iterable_names_the_plugin():
    class NotIterable(Faulty):
        @tprimat.hookimpl
        def parse_metrics(self, backend, lines, source):
            return 42

    registry = Registry()
    registry.register(NotIterable(), name="faulty_plugin", distribution="faulty-dist", version="0.1")
    expected = f"{ORIGIN}: its parse_metrics hook for backend faulty answered with an int (42) instead of an iterator"
    with pytest.raises(PluginError, match="^" + re.escape(expected)):
        registry.parse_metrics("faulty", lines=["x"], source="log")
