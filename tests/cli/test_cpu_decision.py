"""“Is this a CPU run?” has one answer (``trains_on_cpu`` of the detected machine) in every command.

On a fake machine of each kind, the CPU preset layer of ``tprimat run`` (shown by ``config show``
and applied by the run plan), ``doctor``'s config, ``microbench``'s defaults and the memory
check all agree with it, so no command can treat a GPU machine as a CPU one or the reverse.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.hardware.platform import PlatformInfo, trains_on_cpu
from tprimat.microbench.defaults import device_kind
from tprimat.running.memory_check import memory_findings
from tprimat.testing import CPU, H100, MI300X, plan_run, registry_on

MACHINES = {"cpu": CPU, "h100": H100, "mi300x": MI300X}
TINY = "llama3.1-tiny"  # the CPU preset's model (tprimat/settings/cpu.toml)


def test_the_decision_is_the_platform_of_the_machine():
    assert trains_on_cpu(CPU) and not trains_on_cpu(H100) and not trains_on_cpu(MI300X)
    assert trains_on_cpu(PlatformInfo(platform="cpu", device_name="AMD EPYC 7763", device_count=64))


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_the_cpu_preset_layer_and_the_other_commands_agree(name, monkeypatch, tmp_path):
    machine = MACHINES[name]
    registry = registry_on(machine)
    obj = {"registry_factory": lambda: registry}
    cpu = trains_on_cpu(machine)

    shown = CliRunner().invoke(cli, ["config", "show", "--json"], obj=obj)
    assert shown.exit_code == 0, shown.output
    shown_json = json.loads(shown.output)
    assert any("CPU preset" in layer for layer in shown_json["layers"]) == cpu
    assert (shown_json["config"]["benchmark"]["model"] == TINY) == cpu

    # doctor reads the config `tprimat run` would use on this machine
    seen: list[str] = []
    monkeypatch.setattr("tprimat.running.doctor.tokenizer_needed", lambda config: seen.append(config.benchmark.model))
    done = CliRunner().invoke(cli, ["doctor", "--json", "-o", str(tmp_path)], obj=obj)
    assert done.exit_code == 0, done.output
    assert seen == [shown_json["config"]["benchmark"]["model"]]

    # microbench picks its CPU defaults (and the CPU preset's workload) on the same machines
    assert (device_kind("auto", machine) == "cpu") == cpu
    assert device_kind("cpu", machine) == "cpu" and device_kind("cuda", machine) == "gpu"

    # the run plan layers the preset exactly when the machine trains on the CPU; the memory
    # check has no device capacity to compare with there
    prepared = plan_run("torch", registry=registry, output=tmp_path / "runs")
    assert trains_on_cpu(prepared.platform) == cpu
    assert (prepared.config.benchmark.model == TINY) == cpu
    if cpu:
        assert memory_findings(prepared) == []
