"""`tprimat profile` and `--system-profiler`: the exact commands, and stand-in profilers around real workers."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.result.schema import load_result
from tprimat.running.sysprof import wrap_torchrun

SHORT = [
    "--set",
    "training.seq_length=64",
    "--set",
    "training.global_batch_size=2",
    "--set",
    "training.micro_batch_size=1",
    "--set",
    "monitor.enabled=false",
]


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def command_line(output: str) -> list[str]:
    lines = output.splitlines()
    return shlex.split(lines[lines.index("## command") + 1])


@pytest.mark.parametrize("tool, marker", [("nsys", "--output="), ("rocprofv3", "--")])
def test_dry_run_shows_the_workers_wrapped_and_the_analysis_that_follows(tmp_path, tool, marker):
    out = invoke(
        "profile",
        "--backend",
        "torch",
        "--nproc-per-node",
        "2",
        "--output",
        str(tmp_path),
        "--run-id",
        "p",
        "--system-profiler",
        tool,
        "--dry-run",
        *SHORT,
    )
    assert out.exit_code == 0, out.output
    run_dir = tmp_path / "p"
    argv = command_line(out.output)
    # torchrun stays the launcher; each worker is `<tool> … python -u -m <trainer> …`.
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    no_python = argv.index("--no-python")
    assert argv[no_python + 1] == tool
    worker = argv.index("tprimat.plugins.torch.train")
    assert argv[worker - 3 : worker] == [sys.executable, "-u", "-m"]
    assert any(a.startswith(marker) for a in argv[no_python:worker])
    assert argv[worker + 1 :] == [
        "--config",
        str(run_dir / "config.toml"),
        "--profile-dir",
        str(run_dir / "torch_profile"),
    ]
    assert f"one report per rank in {run_dir / 'sysprof'}" in out.output
    assert "profiled iterations (left out of statistics): 3, 4, 5" in out.output
    assert out.output.rstrip().endswith(f"## then\ntprimat trace analyze {run_dir / 'traces'}/")
    assert not run_dir.exists()  # a dry run writes nothing


def test_run_dry_run_with_a_system_profiler_is_the_wrapped_plan(tmp_path):
    plain = invoke("run", "--backend", "torch", "--output", str(tmp_path), "--run-id", "r", "--dry-run", *SHORT)
    wrapped = invoke(
        "run",
        "--backend",
        "torch",
        "--output",
        str(tmp_path),
        "--run-id",
        "r",
        "--system-profiler",
        "nsys",
        "--dry-run",
        *SHORT,
    )
    from tprimat.running.prepare import SYSPROF_DIR
    from tprimat.running.sysprof import SystemProfiler, nsys_prefix

    prefix = nsys_prefix(SystemProfiler(tool="nsys", output_dir=tmp_path / "r" / SYSPROF_DIR))
    assert command_line(wrapped.output) == wrap_torchrun(command_line(plain.output), prefix)
    assert "profiled iterations" not in wrapped.output  # a system profiler alone is not --profile


STAND_IN = r'''#!{python}
"""A stand-in for {tool}: records how it was started, then runs the program it wraps."""
import json, os, sys
args = sys.argv[1:]
if "--" in args:
    program = args[args.index("--") + 1:]
else:
    rest = args[1:] if args and args[0] == "profile" else args
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        i += 1
    program = rest[i:]
parent = open(f"/proc/{{os.getppid()}}/cmdline", "rb").read().split(b"\0")
record = {{"argv": sys.argv, "program": program, "rank": os.environ.get("RANK"),
          "local_rank": os.environ.get("LOCAL_RANK"),
          "parent": [p.decode() for p in parent if p]}}
with open(os.path.join(os.environ["STAND_IN_RECORDS"], f"{tool}.{{os.getpid()}}.json"), "w") as fh:
    json.dump(record, fh)
os.execvp(program[0], program)
'''


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("tool", ["nsys", "rocprofv3"])
def test_stand_in_profiler_wraps_each_worker_not_a_shell(tmp_path, tool):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    bin_dir, records = tmp_path / "bin", tmp_path / "records"
    bin_dir.mkdir()
    records.mkdir()
    stand_in = bin_dir / tool
    stand_in.write_text(STAND_IN.format(python=sys.executable, tool=tool))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STAND_IN_RECORDS": str(records)}
    out = invoke(
        "run",
        "--backend",
        "torch",
        "--nproc-per-node",
        "2",
        "--iterations",
        "3",
        "--output",
        str(tmp_path / "runs"),
        "--run-id",
        "s",
        "--system-profiler",
        tool,
        "--set",
        'parallel.strategy="ddp"',
        *SHORT,
        env=env,
    )
    assert out.exit_code == 0, out.output
    run_dir = tmp_path / "runs" / "s"
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and len(result.iterations) == 3
    seen = [json.loads(p.read_text()) for p in sorted(records.iterdir())]
    # One profiler process per worker, each started by torchrun's agent with the worker's rank.
    assert sorted(r["rank"] for r in seen) == ["0", "1"]
    for record in seen:
        assert record["local_rank"] == record["rank"]
        assert "torch.distributed.run" in record["parent"]
        assert record["program"][:4] == [sys.executable, "-u", "-m", "tprimat.plugins.torch.train"]
        assert str(run_dir / "sysprof") in " ".join(record["argv"])
    assert (run_dir / "sysprof").is_dir()


@pytest.mark.slow
@pytest.mark.torch
def test_profile_collects_real_cpu_traces_and_analyses_them_consistently(profiled_torch_cpu_runs):
    """`tprimat profile` on the torch backend (2 CPU processes), then `trace analyze` on its traces.

    The run is the session's (tests/cli/conftest.py): ``profile --nproc-per-node 2`` with
    ``profile.ranks = [0, 1]``, 6 iterations, wait 1, warm-up 1, active 2.
    """
    run_dir = profiled_torch_cpu_runs.two
    output = profiled_torch_cpu_runs.two_output
    traces = run_dir / "traces"
    assert sorted(p.name for p in traces.iterdir()) == ["rank-0.pt.trace.json", "rank-1.pt.trace.json"]
    analysis = output[output.index("## trace analysis") :]
    assert "rank-0.pt.trace.json — rank 0" in analysis and "rank-1.pt.trace.json — rank 1" in analysis
    assert analysis.count("no GPU activity in this trace") == 2

    result = load_result(run_dir / "result.json")
    assert [r.iteration for r in result.iterations if r.profiled] == [2, 3, 4]
    assert result.summary.measured_iterations == 2  # 5 and 6: 1-2 are warm-up, 2-4 profiled
    assert {"traces/rank-0.pt.trace.json", "traces/rank-1.pt.trace.json"} <= set(result.provenance.inputs)

    done = invoke("trace", "analyze", str(traces), "--steps", "2:3", "--json")
    assert done.exit_code == 0, done.output
    ranks = json.loads(done.output)["ranks"]
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)]  # from distributedInfo
    step_time = {r.iteration: r.step_time_s for r in result.iterations}
    for rank in ranks:
        # No GPU here: no temporal breakdown at all, rather than zeros that would look measured.
        assert rank["gpu_activity"] is False and rank["temporal"] is None
        assert rank["communication"] is None and rank["launches"]["kernels"] == 0
        # The two recorded iterations (3 and 4) are profiler steps 2 and 3; each step spans
        # from one prof.step() to the next, so it holds the whole timed part of its iteration.
        assert [s["step"] for s in rank["steps"]] == [2, 3]
        for step in rank["steps"]:
            assert step["temporal"] is None
            if rank["rank"] == 0:  # rank 0's timings are the ones its log reports
                assert step["host_us"] >= step_time[step["step"] + 1] * 1e6
                assert step["host_us"] < step_time[step["step"] + 1] * 1e6 + 2e6


def test_nsys_records_only_the_window_where_the_backend_opens_a_cuda_profiler_range(tmp_path):
    """nvd_megatron / nvd_nemo under nsys without --profile: a cudaProfilerApi capture range."""
    fake_megatron = tmp_path / "megatron"
    fake_megatron.mkdir()
    (fake_megatron / "pretrain_gpt.py").write_text("")
    env = {"MEGATRON_PATH": str(fake_megatron)}
    common = [
        "--model",
        "llama3.1-8b",
        "--output",
        str(tmp_path / "runs"),
        "--dry-run",
        "--set",
        "benchmark.iterations=20",
    ]
    megatron = invoke(
        "run", "--backend", "nvd_megatron", "--run-id", "m", "--system-profiler", "nsys", *common, env=env
    )
    assert megatron.exit_code == 0, megatron.output
    argv = command_line(megatron.output)
    assert "--capture-range=cudaProfilerApi" in argv and "--capture-range-end=stop" in argv
    # Megatron-LM's --profile without --use-pytorch-profiler opens the CUDA profiler range.
    start = argv.index("--profile-step-start")
    assert argv[start : start + 4] == ["--profile-step-start", "4", "--profile-step-end", "6"]
    assert "--profile" in argv and "--use-pytorch-profiler" not in argv
    assert "profiled iterations (left out of statistics): 3, 4, 5, 6" in megatron.output

    nemo = invoke("run", "--backend", "nvd_nemo", "--run-id", "n", "--system-profiler", "nsys", *common)
    assert nemo.exit_code == 0, nemo.output
    assert "--capture-range=cudaProfilerApi" in command_line(nemo.output)
    settings = nemo.output.split("--- nemo_settings.json\n", 1)[1].split("\n---", 1)[0]
    callbacks = json.loads(settings.split("\n## ", 1)[0])["profile"]["callbacks"]
    assert callbacks == [
        {
            "target": "nemo.lightning.pytorch.callbacks.NsysCallback",
            "kwargs": {"start_step": 2, "end_step": 5, "ranks": [0], "gen_shape": False},
        }
    ]

    # With the torch profiler on, its traces are kept and nsys records the whole worker.
    both = invoke(
        "run", "--backend", "nvd_megatron", "--run-id", "b", "--profile", "--system-profiler", "nsys", *common, env=env
    )
    argv = command_line(both.output)
    assert "--use-pytorch-profiler" in argv
    assert not any(a.startswith("--capture-range") for a in argv)
    # rocprofv3 has no capture range: the torch backend's profile plan is not used for it.
    rocprof = invoke("run", "--backend", "torch", "--run-id", "t", "--system-profiler", "rocprofv3", *common)
    assert "--profile-dir" not in command_line(rocprof.output)
