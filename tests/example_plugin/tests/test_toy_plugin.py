"""The example plugin's own tests, written with ``tprimat.testing`` as a plugin author would.

The toy log is real: the toy program the plan writes is run, and its output
is what the parser reads.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from tprimat.contract import IterationRecord, LogFact
from tprimat.testing import CPU, H100, Workload, dry_run_text, parse_events, parse_result, plan_run, registry_on

try:
    metadata.distribution("tprimat-example-plugin")
except metadata.PackageNotFoundError:  # the main suite says how to install it (tests/test_example_plugin.py)
    pytest.skip("pip install ./tests/example_plugin", allow_module_level=True)


def _toy_log(tmp_path: Path, steps: int = 6) -> Path:
    """Run the toy program the plan writes, as the runner would, and keep its output."""
    prepared = plan_run("toy", registry=registry_on(CPU), output=tmp_path / "runs", iterations=steps)
    program = tmp_path / "toy_train.py"
    program.write_text(prepared.plan.files["toy_train.py"])
    argv = [prepared.plan.argv[0], str(program), *prepared.plan.argv[2:]]
    log = tmp_path / "toy.log"
    log.write_text(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return log


def test_the_plan_renders_the_final_config_and_the_option():
    prepared = plan_run(
        "toy",
        registry=registry_on(H100),
        output=Path("runs"),
        overrides=["training.global_batch_size=16"],
        options={"toy_step_ms": 3},
        iterations=9,
    )
    assert prepared.plan.argv[1:] == ("toy_train.py", "9", "3", "16")
    assert prepared.config.training.global_batch_size == 16 and prepared.platform.device_name == H100.device_name
    assert "toy_train.py 9 3 16" in dry_run_text(prepared)


def test_the_parser_reads_every_step_of_a_real_toy_log(tmp_path):
    events = parse_events("toy", _toy_log(tmp_path), registry=registry_on(CPU))
    steps = [e for e in events if isinstance(e, IterationRecord)]
    assert [s.iteration for s in steps] == [1, 2, 3, 4, 5, 6]
    assert all(s.step_time_s > 0 for s in steps) and steps[1].loss == pytest.approx(5.0)
    assert LogFact(key="global_batch_size", value=4, source="toy.log:1") in events


def test_tprimat_parse_detects_the_log_and_computes_the_throughput(tmp_path):
    workload = Workload(seq_length=128, world_size=1)
    result = parse_result([_toy_log(tmp_path, steps=8)], registry=registry_on(CPU), workload=workload)
    assert result.run.backend == "toy" and result.config.global_batch_size == 4
    assert [r.iteration for r in result.iterations] == list(range(1, 9))
    last = result.iterations[-1]
    assert last.tokens_per_s_per_gpu == pytest.approx(4 * 128 / last.step_time_s / 1, rel=1e-9)
