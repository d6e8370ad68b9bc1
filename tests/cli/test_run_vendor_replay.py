"""``tprimat run`` for the four vendor backends, end to end on CPU, with a replayed log.

The real launch path runs: the CLI, the backend's plan (Megatron arguments, Primus
experiment, NeMo script), the files written into the run directory, the runner
starting the plan's exact command in its own process group, teeing and parsing its
output live, and the core assembling the result.  Only the program at the end of the
command is a stand-in: a small test script that replays a real log from
``tests/fixtures/logs/`` line by line (pausing after each iteration line) and exits
with a chosen code, or hangs, or stops on SIGINT as torchrun does.  It is placed where
the plan looks for the launcher: ``torchrun`` first on ``PATH`` (Megatron-LM, NeMo) or
``$PRIMUS_PATH/runner/primus-cli`` (Primus).  It exists only in these tests.

This machine has no GPU and no vendor framework, so the availability checks are
patched in-process: the device checks say yes, ``MEGATRON_PATH``/``--primus-path``
name temporary checkouts, and for ``nvd_nemo`` (whose check looks for the ``nemo``
package) the check itself is patched; no stand-in ``nemo`` package is made.  The
SIGINT test runs ``tprimat`` in its own process (``DRIVER``, the same patches) so that
the signal reaches only the run under test, never the test process.

Each backend's config is set to the replayed run's own workload (global batch,
sequence length, GPUs), because the runner checks the log against the config.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.contract import backend as backend_module
from tprimat.contract.registry import Registry
from tprimat.hardware import platform as platform_module
from tprimat.hardware.platform import PlatformInfo
from tprimat.parse.logs import parse_logs
from tprimat.result.schema import load_result
from tprimat.settings.config import load_config

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
LOGS = TESTS / "fixtures" / "logs"
PRIMUS_TREE = TESTS / "fixtures" / "primus_configs"

#: The stand-in launcher: replays $REPLAY_LOG, records its argv, exits as told.
STAND_IN = r"""
import json, os, re, signal, sys, time

# What it was started with: arguments, which of them were files already, cwd, environment.
with open(os.environ["REPLAY_ARGV_FILE"], "w") as out:
    json.dump({"argv": sys.argv[1:], "files": [a for a in sys.argv[1:] if os.path.isfile(a)],
               "cwd": os.getcwd(), "env": dict(os.environ)}, out)

def stop(signum, frame):
    # torchrun forwards SIGINT to its workers and exits with 128 + 2
    sys.stdout.flush()
    os._exit(130)

signal.signal(signal.SIGINT, stop)
delay = float(os.environ.get("REPLAY_DELAY", "0.02"))
stop_after = int(os.environ.get("REPLAY_STOP_AFTER", "0"))
hang = os.environ.get("REPLAY_HANG") == "1"
iteration = re.compile(r"iteration\s+\d+", re.I)
seen = 0
# REPLAY_WITHOUT_ARGUMENTS=1: leave out the argument dump (a log of another model than the plan's)
skip_arguments = os.environ.get("REPLAY_WITHOUT_ARGUMENTS") == "1"
in_arguments = False
with open(os.environ["REPLAY_LOG"], encoding="utf-8", errors="replace", newline="") as log:
    for line in log:
        if skip_arguments and ("-- arguments --" in line or in_arguments):
            in_arguments = "end of arguments" not in line
            continue
        sys.stdout.write(line)
        sys.stdout.flush()
        if iteration.search(line):
            seen += 1
            time.sleep(delay)
            if stop_after and seen >= stop_after:
                break
if hang:
    while True:
        time.sleep(1)
sys.exit(int(os.environ.get("REPLAY_EXIT", "0")))
"""

#: ``tprimat`` in its own process, with this machine's answers patched as the ``bench`` fixture patches them.
DRIVER = r"""
import sys

from tprimat.contract import backend

backend.DEVICE_CHECKS["amd-gpu"] = lambda: True
backend.DEVICE_CHECKS["nvidia-gpu"] = lambda: True
real_check = backend.check_availability


def check(spec, environ=None):
    if spec.name == "nvd_nemo":
        return backend.Availability(state="available")
    return real_check(spec, environ)


backend.check_availability = check
from tprimat.cli import main

main()
"""


@attrs.frozen
class Case:
    backend: str
    log: str  # under tests/fixtures/logs/
    settings: tuple[str, ...]  # the replayed run's workload, as --set values
    iterations: int


COMMON = ('precision.dtype="bf16"', "benchmark.warmup_iterations=2", "monitor.enabled=false")

CASES = {
    # 1 GH200, Megatron-core 0.16: global batch 80, micro batch 2, sequence 2048, 15 iterations.
    "nvd_megatron": Case(
        "nvd_megatron",
        "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log",
        (
            'benchmark.model="llama3.1-8b"',
            "training.global_batch_size=80",
            "training.micro_batch_size=2",
            "training.seq_length=2048",
            "launch.nproc_per_node=1",
        ),
        15,
    ),
    # 8 AMD GPUs, ROCm Megatron-LM fork, 32 layers/4096 hidden: global batch 80, micro 5, seq 2048.
    "amd_megatron": Case(
        "amd_megatron",
        "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log",
        (
            'benchmark.model="llama3.1-8b"',
            "training.global_batch_size=80",
            "training.micro_batch_size=5",
            "training.seq_length=2048",
            "launch.nproc_per_node=8",
        ),
        10,
    ),
    # 8 MI355X, Primus: global batch 8, sequence 4096, 10 iterations.
    "amd_primus": Case(
        "amd_primus",
        "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log",
        (
            'benchmark.model="llama3.1-8b"',
            "training.global_batch_size=8",
            "training.micro_batch_size=1",
            "training.seq_length=4096",
            "launch.nproc_per_node=8",
        ),
        10,
    ),
    # 8 GPUs, NeMo 2 with nemo-run (torchrun): global batch 512, 20 steps (sequence not logged).
    "nvd_nemo": Case(
        "nvd_nemo",
        "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log",
        (
            'benchmark.model="llama3.1-8b"',
            "training.global_batch_size=512",
            "training.micro_batch_size=1",
            "training.seq_length=2048",
            "launch.nproc_per_node=8",
        ),
        20,
    ),
}


#: The machine each replayed log was recorded on, as ``detect_platform`` would report it there
#: (the device name only where the log or its source names it).
MACHINES = {
    "nvd_megatron": PlatformInfo(
        platform="nvidia",
        device_name="NVIDIA GH200 480GB",
        device_count=1,
        stack="cuda",
        source="replayed log's machine",
    ),
    "amd_megatron": PlatformInfo(platform="amd", device_count=8, stack="rocm", source="replayed log's machine"),
    "amd_primus": PlatformInfo(
        platform="amd", device_name="AMD Instinct MI355X", device_count=8, stack="rocm", source="replayed log's machine"
    ),
    "nvd_nemo": PlatformInfo(platform="nvidia", device_count=8, stack="cuda", source="replayed log's machine"),
}


@attrs.define
class Bench:
    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    megatron: Path
    primus: Path
    argv_file: Path
    machine: dict = attrs.Factory(lambda: {"platform": MACHINES["nvd_megatron"]})

    def launched(self) -> dict:
        return json.loads(self.argv_file.read_text())

    def args(self, case: Case, *extra: str) -> list[str]:
        args = [
            "run",
            "--backend",
            case.backend,
            "--iterations",
            str(case.iterations),
            "--output",
            str(self.tmp / "runs"),
            "--run-id",
            "r",
        ]
        for setting in (*COMMON, *case.settings):
            args += ["--set", setting]
        if case.backend == "amd_primus":
            args += ["--primus-path", str(self.primus)]
        return [*args, *extra]

    def invoke(self, case: Case, *extra: str, **env: str):
        self.machine["platform"] = MACHINES[case.backend]
        self.monkeypatch.setenv("REPLAY_LOG", str(LOGS / case.log))
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)
        return CliRunner().invoke(cli, self.args(case, *extra), catch_exceptions=False)

    def start(self, case: Case, *extra: str, **env: str) -> subprocess.Popen[str]:
        """``tprimat run`` in a process of its own (``DRIVER``), its output merged into one pipe."""
        program = self.tmp / "driver.py"
        program.write_text(DRIVER)
        environ = {**os.environ, "REPLAY_LOG": str(LOGS / case.log), **env}
        return subprocess.Popen(
            [sys.executable, str(program), *self.args(case, *extra)],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @property
    def run_dir(self) -> Path:
        return self.tmp / "runs" / "r"


@pytest.fixture
def bench(tmp_path, monkeypatch) -> Bench:
    program = tmp_path / "stand_in.py"
    program.write_text(STAND_IN)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(f'#!/bin/sh\nexec {sys.executable} {program} "$@"\n')
    torchrun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # A Megatron-LM checkout as far as the launch needs one.
    megatron = tmp_path / "Megatron-LM"
    (megatron / "megatron" / "core").mkdir(parents=True)
    (megatron / "pretrain_gpt.py").write_text("# Megatron-LM entry point (not run here)\n")
    (megatron / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 16\n")
    monkeypatch.setenv("MEGATRON_PATH", str(megatron))
    # Primus: its real experiment configs, and the stand-in as its launcher.
    primus = tmp_path / "Primus"
    shutil.copytree(PRIMUS_TREE, primus)
    (primus / "runner").mkdir()
    (primus / "runner" / "primus-cli").write_text(f'#!/bin/bash\nexec {sys.executable} {program} "$@"\n')
    monkeypatch.delenv("PRIMUS_PATH", raising=False)
    # This machine's answers: GPUs present, NeMo importable (checks only; nothing is imported).
    monkeypatch.setitem(backend_module.DEVICE_CHECKS, "amd-gpu", lambda: True)
    monkeypatch.setitem(backend_module.DEVICE_CHECKS, "nvidia-gpu", lambda: True)
    real_check = backend_module.check_availability

    def check(spec, environ=None):
        if spec.name == "nvd_nemo":
            return backend_module.Availability(state="available")
        return real_check(spec, environ)

    monkeypatch.setattr(backend_module, "check_availability", check)
    machine = {"platform": MACHINES["nvd_megatron"]}
    monkeypatch.setattr(platform_module, "detect", lambda: machine["platform"])
    argv_file = tmp_path / "launcher-argv.json"
    monkeypatch.setenv("REPLAY_ARGV_FILE", str(argv_file))
    for key in ("REPLAY_EXIT", "REPLAY_STOP_AFTER", "REPLAY_HANG", "REPLAY_DELAY"):
        monkeypatch.delenv(key, raising=False)
    return Bench(
        tmp=tmp_path, monkeypatch=monkeypatch, megatron=megatron, primus=primus, argv_file=argv_file, machine=machine
    )


def _same_numbers(run_result, parsed_result) -> None:
    """Every iteration and the summary equal; only where the lines were read from differs.

    A profiler window the log itself states (the replayed Primus log echoes ``--profile True
    --profile_step_start 6 --profile_step_end 7`` from its original run) is marked by
    ``tprimat parse``; a live run trusts only its own plan (no profiling here), so the marks
    and the measured count are compared apart.
    """

    def strip(records):
        return [attrs.evolve(r, source=None, profiled=False) for r in records]

    assert strip(run_result.iterations) == strip(parsed_result.iterations)
    stated = [r.iteration for r in parsed_result.iterations if r.profiled]
    if not stated:
        assert run_result.summary == parsed_result.summary
        return
    assert not any(r.profiled for r in run_result.iterations)
    measured = run_result.summary.measured_iterations - len(stated)
    assert parsed_result.summary.measured_iterations == measured


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_replayed_run_gives_the_parsers_numbers(bench, name):
    case = CASES[name]
    out = bench.invoke(case)
    assert out.exit_code == 0, out.output
    result = load_result(bench.run_dir / "result.json")
    assert result.run.status == "completed", result.provenance.notes
    assert result.run.backend == case.backend
    assert len(result.iterations) >= case.iterations
    assert result.summary.tokens_per_s_per_gpu is not None
    # The runner started exactly the plan's command, in its directory, with its environment,
    # after writing the plan's files.
    started = bench.launched()
    launched, env, existing = started["argv"], started["env"], started["files"]
    config_words = (bench.run_dir / "config.toml").read_text()
    assert 'methodology = "iso"' in config_words
    assert result.config.methodology == "iso" and result.config.deviations == [] and result.config.preset is None
    notes = result.provenance.notes
    if name in ("nvd_megatron", "amd_megatron"):
        assert (
            launched[launched.index("--nproc-per-node") + 1]
            == dict(s.split("=") for s in case.settings)["launch.nproc_per_node"]
        )
        assert str(bench.megatron / "pretrain_gpt.py") in existing
        assert launched[launched.index("--global-batch-size") + 1] == "80"
        assert started["cwd"] == str(bench.megatron)
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
        assert ("HSA_NO_SCRATCH_RECLAIM" in env) == (name == "amd_megatron")
        assert any(n.startswith("launch plan: Megatron-core 0.16") for n in notes)
    elif name == "amd_primus":
        experiment = bench.run_dir / "primus_experiment.yaml"
        assert launched == ["direct", "--", "train", "pretrain", "--config", str(experiment)]
        assert existing == [str(experiment)]
        assert "seq_length: 4096" in experiment.read_text()
        assert started["cwd"] == str(bench.primus)
        assert (env["NNODES"], env["NODE_RANK"], env["GPUS_PER_NODE"]) == ("1", "0", "8")
        assert env["HSA_NO_SCRATCH_RECLAIM"] == "1"
    else:
        settings = bench.run_dir / "nemo_settings.json"
        script = bench.run_dir / "nemo_pretrain.py"
        assert existing == [str(script), str(settings)]
        assert json.loads(settings.read_text())["global_batch_size"] == 512
    # The same log through `tprimat parse`'s path and the same config gives the same numbers.
    config = load_config(bench.run_dir / "config.toml")
    parsed = parse_logs(
        [LOGS / case.log],
        registry=Registry.from_environment(),
        backend=case.backend,
        config=config,
        manifest_path=bench.run_dir / "manifest.json",
    )
    _same_numbers(result, parsed.result)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_non_zero_exit_is_failed_with_the_log_tail(bench, name):
    case = CASES[name]
    out = bench.invoke(case, REPLAY_STOP_AFTER="3", REPLAY_EXIT="3", REPLAY_DELAY="0")
    assert out.exit_code == 1, out.output
    result = load_result(bench.run_dir / "result.json")
    assert result.run.status == "failed"
    notes = result.provenance.notes
    assert any(re.match(r"the job exited with code 3 after \d+ of \d+ iterations", n) for n in notes), notes
    tail = [n.removeprefix("log: ") for n in notes if n.startswith("log: ")]
    log_lines = (bench.run_dir / "logs" / "launcher.log").read_text().splitlines()
    assert tail and tail == log_lines[-len(tail) :]
    assert 1 <= len(result.iterations)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sigint_gives_an_interrupted_result_with_the_iterations_so_far(bench, name):
    case = CASES[name]
    log = bench.run_dir / "logs" / "launcher.log"
    pattern = re.compile(r"iteration\s+\d+", re.I)
    # The stand-in hangs after four iteration lines, until the run forwards the SIGINT to it.
    run = bench.start(case, REPLAY_STOP_AFTER="4", REPLAY_HANG="1", REPLAY_DELAY="0")
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and len(pattern.findall(log.read_text(errors="replace"))) >= 4):
            assert run.poll() is None, f"tprimat run ended (code {run.returncode}) before the fourth iteration"
            assert time.monotonic() < deadline, "no fourth iteration line in launcher.log within 60 s"
            time.sleep(0.05)
        time.sleep(0.3)  # let the parser catch up with what is on disk
        run.send_signal(signal.SIGINT)  # to the run under test only
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 1, output
    result = load_result(bench.run_dir / "result.json")
    assert result.run.status == "interrupted"
    # What was printed before the signal is in the result, and nothing after it.
    config = load_config(bench.run_dir / "config.toml")
    partial_log = bench.tmp / "so-far.log"
    partial_log.write_text(log.read_text())
    parsed = parse_logs([partial_log], registry=Registry.from_environment(), backend=case.backend, config=config)
    assert [r.iteration for r in result.iterations] == [r.iteration for r in parsed.result.iterations]
    assert 1 <= len(result.iterations) < case.iterations
    assert any(n.startswith("interrupted by the user after ") for n in result.provenance.notes)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hung_launcher_is_killed_after_the_timeout(bench, name):
    case = CASES[name]
    # The stand-in prints three iterations, then hangs until it is killed.  The run is in a
    # process of its own so that, were the kill to fail, the test fails instead of hanging; the
    # guard is generous (the run's own timeout is 2 s) and is not a measurement of the machine.
    run = bench.start(case, "--set", "launch.timeout_s=2", REPLAY_STOP_AFTER="3", REPLAY_HANG="1", REPLAY_DELAY="0")
    try:
        output, _ = run.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        run.kill()
        output, _ = run.communicate()
        pytest.fail(f"tprimat run never ended although launch.timeout_s = 2:\n{output}")
    assert run.returncode == 1, output
    result = load_result(bench.run_dir / "result.json")
    assert result.run.status == "failed"
    assert any(n.startswith("killed after launch.timeout_s = 2") for n in result.provenance.notes)
    assert len(result.iterations) >= 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_dry_run_prints_command_environment_and_files_and_writes_nothing(bench, name):
    case = CASES[name]
    out = bench.invoke(case, "--dry-run")
    assert out.exit_code == 0, out.output
    text = out.output
    assert "## command" in text and "## environment (added to the inherited one)" in text
    command = text.split("## command\n", 1)[1].splitlines()[0]
    assert command.startswith("bash " if name == "amd_primus" else "torchrun ")
    files = {"amd_primus": "primus_experiment.yaml", "nvd_nemo": "nemo_pretrain.py"}
    if name in files:
        assert f"--- {files[name]}" in text
    assert "# methodology: iso" in text
    assert "NOT RUNNABLE HERE" not in text  # this test's machine has what it needs
    assert not bench.run_dir.exists()
    assert not bench.argv_file.exists()  # nothing was started


def test_megatron_path_option_stands_for_the_variable(bench):
    bench.monkeypatch.delenv("MEGATRON_PATH")
    case = CASES["nvd_megatron"]
    out = bench.invoke(case, "--megatron-path", str(bench.megatron))
    assert out.exit_code == 0, out.output
    assert str(bench.megatron / "pretrain_gpt.py") in bench.launched()["files"]
    assert load_result(bench.run_dir / "result.json").run.status == "completed"


def _plain_invoke(*args: str):
    return CliRunner().invoke(cli, ["run", *args])


@pytest.mark.parametrize(
    "backend, missing, hint",
    [
        ("nvd_megatron", "nvidia-gpu", "docker/nvd.Dockerfile"),
        ("amd_megatron", "amd-gpu", "docker/amd.Dockerfile"),
        ("amd_primus", "amd-gpu", "docker/amd.Dockerfile"),
        ("nvd_nemo", "python package nemo", "docker/nvd.Dockerfile"),
    ],
)
def test_a_missing_framework_is_one_line_exit_2_and_dry_run_still_works(tmp_path, monkeypatch, backend, missing, hint):
    megatron = tmp_path / "Megatron-LM"
    megatron.mkdir()
    (megatron / "pretrain_gpt.py").write_text("")
    primus = tmp_path / "Primus"
    shutil.copytree(PRIMUS_TREE, primus)
    (primus / "runner").mkdir()
    (primus / "runner" / "primus-cli").write_text("")
    monkeypatch.delenv("MEGATRON_PATH", raising=False)
    monkeypatch.delenv("PRIMUS_PATH", raising=False)
    for name in ("amd-gpu", "nvidia-gpu"):
        monkeypatch.setitem(backend_module.DEVICE_CHECKS, name, lambda: False)
    # each backend gets the options it declares (another backend's option is refused)
    paths = {"amd_primus": ["--primus-path", str(primus)], "nvd_nemo": []}.get(
        backend, ["--megatron-path", str(megatron)]
    )
    args = [
        "--backend",
        backend,
        "--output",
        str(tmp_path / "runs"),
        "--run-id",
        "r",
        *paths,
        "--set",
        'benchmark.model="llama3.1-8b"',
        "--set",
        "launch.nproc_per_node=8",
        "--set",
        "training.global_batch_size=16",
        "--set",
        "training.micro_batch_size=1",
    ]
    out = _plain_invoke(*args)
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.output
    assert f"backend {backend}" in lines[0] and missing in lines[0] and hint in lines[0]
    # the paths were given as options, so the variables are not reported missing
    lacking = lines[0].split(". To get it:")[0]
    assert "$MEGATRON_PATH" not in lacking and "$PRIMUS_PATH" not in lacking
    assert not (tmp_path / "runs" / "r").exists()
    dry = _plain_invoke(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    flagged = [line for line in dry.output.splitlines() if line.startswith("# NOT RUNNABLE")]
    assert len(flagged) == 1 and missing in flagged[0] and hint in flagged[0]


def test_a_log_with_another_global_batch_than_the_config_is_failed(bench):
    """Throughput comes from the config: a job that trained another workload is not measured."""
    case = CASES["nvd_megatron"]
    out = bench.invoke(case, "--set", "training.global_batch_size=64")  # the log says 80
    assert out.exit_code == 1, out.output
    result = load_result(bench.run_dir / "result.json")
    assert result.run.status == "failed"
    [note] = [n for n in result.provenance.notes if n.startswith("the job's log does not match")]
    assert "the config says 64" in note and "80" in note


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_rank_1_of_2_gets_the_rendezvous_and_leaves_the_result_to_node_0(bench, name):
    case = CASES[name]
    # Primus's replayed global batch (8) does not divide over 16 GPUs; node 1 writes no result.
    batch = ["--set", "training.global_batch_size=16"] if name == "amd_primus" else []
    out = bench.invoke(
        case,
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--master-addr",
        "10.1.2.3",
        "--master-port",
        "29611",
        *batch,
        REPLAY_DELAY="0",
    )
    assert out.exit_code == 0, out.output
    started = bench.launched()
    if name == "amd_primus":  # Primus's launcher starts torchrun from these
        env = started["env"]
        assert (env["NNODES"], env["NODE_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == (
            "2",
            "1",
            "10.1.2.3",
            "29611",
        )
    else:
        argv = started["argv"]
        assert argv[:8] == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.1.2.3", "--master-port", "29611"]
    assert (bench.run_dir / "logs" / "node1.log").is_file()
    assert not (bench.run_dir / "result.json").exists()


def test_what_megatron_printed_is_checked_against_the_plan_after_the_run(bench, tmp_path):
    # The replayed log is a 16-layer Llama 3.2 1B run; the plan is Llama 3.1 8B's 32 layers.
    # Megatron-LM's argument dump says what really ran, and the result records every difference.
    out = bench.invoke(CASES["nvd_megatron"])
    assert out.exit_code == 0, out.output
    result = load_result(bench.run_dir / "result.json")
    framework = result.config.framework
    assert framework.stated_from == "Megatron-LM argument dump at launcher.log:6"
    assert framework.stated["num_layers"] == "16" and framework.rendered["num_layers"] == 32
    found = {d.setting: d for d in framework.disagreements}
    assert found["num_layers"].planned == 32 and found["num_layers"].stated == "16"
    assert found["num_layers"].source.startswith("launcher.log:")
    assert found["hidden_size"].planned == 4096 and found["hidden_size"].stated == "2048"
    # what the plan and the dump agree on is no disagreement
    assert {"micro_batch_size", "global_batch_size", "seq_length"}.isdisjoint(found)
    # and such a run is refused by compare, naming the setting
    other = tmp_path / "other.json"
    shutil.copy(bench.run_dir / "result.json", other)
    compared = CliRunner().invoke(
        cli, ["compare", str(bench.run_dir / "result.json"), str(other), "-o", str(tmp_path / "c")]
    )
    assert compared.exit_code == 2
    assert "num_layers (planned 32, ran 16)" in compared.output


def test_an_iso_primus_run_records_every_setting_it_launched_with(bench):
    # what tprimat renders, and what Primus's experiment and config tree keep, with their values
    out = bench.invoke(CASES["amd_primus"])
    assert out.exit_code == 0, out.output
    framework = load_result(bench.run_dir / "result.json").config.framework
    assert framework.framework.startswith("Primus (Megatron-LM core 0.15)")
    assert framework.plan_digest and framework.plan_digest.startswith("sha256:")
    assert framework.rendered["eod_mask_loss"] is False  # pinned over Primus's experiment (true)
    assert framework.rendered["use_turbo_attention"] is False
    # kept from Primus: its experiment's own overrides and the module and model configs it extends
    assert framework.kept["gradient_accumulation_fusion"] is False
    assert framework.kept["enable_primus_turbo"] is False  # primus_turbo.yaml; this experiment leaves it
    assert "examples/megatron/configs/MI355X/llama3.1_8B-BF16-pretrain.yaml" in framework.kept_from
    assert "primus/configs/modules/megatron/trainer_base.yaml" in framework.kept_from
    assert framework.shared["loss.eod_mask"] is False and framework.shared["grad.accumulation_fusion"] is False
