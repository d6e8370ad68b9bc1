"""``tprimat run`` end to end on CPU: the torch backend through torchrun, as a user runs it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.result.jsonschema import result_json_schema
from tprimat.result.metrics import describe
from tprimat.result.schema import load_result
from tprimat.settings.config import load_config

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SHORT = [
    "--set",
    "training.seq_length=64",
    "--set",
    "training.global_batch_size=4",
    "--set",
    "training.micro_batch_size=1",
    "--set",
    "monitor.interval_s=0.2",
]


def invoke(*args: str):
    result = CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)
    return result


def _check_completed_run(run_dir, output, *, model, nproc, strategy, iterations, global_batch_size, seq_length):
    result = load_result(run_dir / "result.json")
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads((run_dir / "result.json").read_text()), result_json_schema())
    assert result.run.status == "completed"
    assert result.run.backend == "torch" and result.run.model == model
    assert result.config.world_size == nproc
    assert [r.iteration for r in result.iterations] == list(range(1, iterations + 1))
    assert all(r.loss is not None and r.mem_rss_gib for r in result.iterations)
    # The summary's tokens/s/GPU is exactly what the per-iteration records give.
    measured = [r for r in result.iterations[2:] if not r.profiled]
    assert result.summary.tokens_per_s_per_gpu == describe(
        global_batch_size * seq_length / r.step_time_s / nproc for r in measured
    )
    assert result.summary.tokens_per_s_per_gpu.count == len(measured)
    assert result.software.torch.startswith("2.13.0")
    assert load_config(run_dir / "config.toml").parallel.strategy == strategy
    assert "tok/s/GPU" in output and "result:" in output
    rank_logs = list((run_dir / "logs" / "ranks").rglob("stdout.log"))
    assert len(rank_logs) == nproc
    return result


@pytest.mark.parametrize(
    "model, nproc, strategy",
    [
        ("qwen2.5-tiny", 2, "ddp"),
        ("llama3.1-tiny", 2, "fsdp2"),
    ],
)
def test_run_trains_and_writes_a_valid_result(tmp_path, model, nproc, strategy):
    args = [
        "--model",
        model,
        "--nproc-per-node",
        str(nproc),
        "--iterations",
        "5",
        "--output",
        str(tmp_path),
        "--run-id",
        "r",
        *SHORT,
        "--set",
        f'parallel.strategy="{strategy}"',
    ]
    out = invoke(*args)
    assert out.exit_code == 0, out.output
    _check_completed_run(
        tmp_path / "r",
        out.output,
        model=model,
        nproc=nproc,
        strategy=strategy,
        iterations=5,
        global_batch_size=4,
        seq_length=64,
    )


def test_a_profiled_run_trains_and_keeps_rank_0s_trace(profiled_torch_cpu_runs):
    """The session's `tprimat run --profile` on one process (tests/cli/conftest.py: llama3.1-tiny,
    ddp, 6 iterations, global batch 2, sequence 64; profiler wait 1, warm-up 1, active 2)."""
    run_dir = profiled_torch_cpu_runs.one
    result = _check_completed_run(
        run_dir,
        profiled_torch_cpu_runs.one_output,
        model="llama3.1-tiny",
        nproc=1,
        strategy="ddp",
        iterations=6,
        global_batch_size=2,
        seq_length=64,
    )
    assert [r.iteration for r in result.iterations if r.profiled] == [2, 3, 4]
    # Written into torch_profile/, collected into traces/ under the rank's name.
    assert [p.name for p in (run_dir / "traces").iterdir()] == ["rank-0.pt.trace.json"]
    assert (run_dir / "traces" / "rank-0.pt.trace.json").stat().st_size > 0
    assert not list((run_dir / "torch_profile").iterdir())
    assert "traces/rank-0.pt.trace.json" in result.provenance.inputs
    assert any("from torch_profile/rank0.step4.pt.trace.json" in n for n in result.provenance.notes), (
        result.provenance.notes
    )


def test_dry_run_prints_the_torchrun_command_and_the_effective_config(tmp_path):
    out = invoke(
        "--model",
        "qwen2.5-tiny",
        "--nproc-per-node",
        "2",
        "--output",
        str(tmp_path),
        "--run-id",
        "d",
        "--set",
        "training.seq_length=128",
        "--dry-run",
    )
    assert out.exit_code == 0, out.output
    run_dir = tmp_path / "d"
    command = shlex.join(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--log-dir",
            f"{run_dir}/logs/ranks",
            "--tee",
            "3",
            "-m",
            "tprimat.plugins.torch.train",
            "--config",
            f"{run_dir}/config.toml",
        ]
    )
    assert f"\n## command\n{command}\n" in out.output
    assert 'model = "qwen2.5-tiny"' in out.output and "seq_length = 128" in out.output
    assert "nproc_per_node = 2" in out.output
    assert not run_dir.exists()


def test_sigint_midway_leaves_an_interrupted_result(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tprimat.cli import main; main()",
            "run",
            "--iterations",
            "500",
            "--output",
            str(tmp_path),
            "--run-id",
            "i",
            *SHORT,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    result_path = tmp_path / "i" / "result.json"
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            seen = len(load_result(result_path).iterations)
        except Exception:
            seen = 0
        if seen >= 3:
            break
        time.sleep(0.2)
    assert seen >= 3, "the run never reported iterations"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=90)
    assert proc.returncode == 1, output
    result = load_result(result_path)
    assert result.run.status == "interrupted"
    assert 3 <= len(result.iterations) < 500
    assert [r.iteration for r in result.iterations] == list(range(1, len(result.iterations) + 1))
    assert any("interrupted by the user" in n for n in result.provenance.notes)


def test_no_arguments_on_a_cpu_machine_trains_a_tiny_model(tmp_path):
    # What keeps the default run short is asserted (the tiny model, the CPU preset's
    # iterations), not how long it took: that depends on the machine and its load.
    from tprimat.contract.registry import Registry

    if Registry.from_environment().detect_platform().platform != "cpu":
        pytest.skip("the no-argument default differs on a GPU machine")
    out = invoke("--output", str(tmp_path), "--run-id", "default")
    assert out.exit_code == 0, out.output
    result = load_result(tmp_path / "default" / "result.json")
    assert result.run.status == "completed" and result.run.model == "llama3.1-tiny"
    assert result.config.settings["benchmark"]["iterations"] == 12  # the CPU preset's
    assert len(result.iterations) == result.config.settings["benchmark"]["iterations"]
    assert result.summary.tokens_per_s_per_gpu is not None
    assert any("CPU preset" in layer for layer in result.config.layers), result.config.layers
