"""The core runner on a backend that is not torch: any LaunchPlan, any parser.

The fake backend's job is a real process (a short Python program) whose
output the fake parser reads; everything between them (process group, tee,
live parsing, partial results, SIGINT, timeout, failure, energy, profiled
iterations, assembly) is the runner's real code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

from tprimat import hookimpl
from tprimat.contract.backend import BackendSpec, LaunchOption, Requirements
from tprimat.contract.plans import DataArguments, LaunchPlan, PreparedDataset, ProfilePlan
from tprimat.contract.records import ParseIssue
from tprimat.contract.registry import BackendError, Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.metrics import describe
from tprimat.result.schema import IterationRecord, Result, load_result
from tprimat.running.dryrun import describe_plan
from tprimat.running.monitor import GpuMonitor, GpuReading
from tprimat.running.prepare import RunError, RunRequest, prepare, resolve_backend
from tprimat.running.runner import run

JOB = r"""
import sys, time
n, sleep = int(sys.argv[1]), float(sys.argv[2])
code, hang_after = int(sys.argv[3]), int(sys.argv[4])
import os
print(f"fake job starting pid={os.getpid()}", flush=True)
for i in range(1, n + 1):
    if hang_after and i > hang_after:
        time.sleep(3600)
    time.sleep(sleep)
    print(f"step {i} time={0.01 * i:.3f} loss={10.0 / i:.4f}", flush=True)
print("fake job done", flush=True)
sys.exit(code)
"""

LINE = re.compile(r"step (\d+) time=([\d.]+) loss=([\d.]+)")
SECRET = "hf_" + "A" * 30


class FakeBackend:
    """A plugin with every per-backend hook, whose job is a plain Python program."""

    def __init__(self, *, fail_parser_at: int | None = None) -> None:
        self.fail_parser_at = fail_parser_at

    @hookimpl
    def register_backends(self):
        return [
            BackendSpec(
                name="fake",
                platform="any",
                framework="fakeframe",
                description="a test job",
                requires=Requirements(),
                options=tuple(LaunchOption(name=n, help=n) for n in ("sleep", "code", "hang_after")),
            )
        ]

    @hookimpl
    def detect_platform(self):
        return PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8, source="test")

    @hookimpl
    def prepare_data(self, backend, dataset, config):
        return DataArguments(args=("--data-path", str(dataset.path_prefix)))

    @hookimpl
    def profile(self, backend, context):
        return ProfilePlan(args=("--trace",), trace_globs=("traces/*.json",), profiled_iterations=(3, 4))

    @hookimpl
    def launch(self, backend, context):
        o = context.options
        argv = (
            sys.executable,
            "-c",
            JOB,
            str(context.config.benchmark.iterations),
            str(o.get("sleep", 0.0)),
            str(o.get("code", 0)),
            str(o.get("hang_after", 0)),
        )
        job = f"iterations: {context.config.benchmark.iterations}\n"
        return LaunchPlan(
            argv=argv, env={"FAKE_JOB": "1", "HF_TOKEN": SECRET}, files={"job.yaml": job}, description="a fake job"
        )

    @hookimpl
    def parse_metrics(self, backend, lines, source):
        return self._parse(lines, source)

    def _parse(self, lines, source):
        for number, line in enumerate(lines, start=1):
            match = LINE.search(line)
            if match is None:
                if line.startswith("fake job"):
                    continue
                yield ParseIssue(source=f"{source}:{number}", message="not a step line")
                continue
            iteration = int(match.group(1))
            if self.fail_parser_at == iteration:
                raise RuntimeError("parser bug")
            yield IterationRecord(
                iteration=iteration,
                step_time_s=float(match.group(2)),
                loss=float(match.group(3)),
                source=f"{source}:{number}",
            )


def make_registry(**kw) -> Registry:
    registry = Registry()
    registry.register(FakeBackend(**kw), name="fake")
    return registry


SHAPE = (
    "training.global_batch_size=16",
    "training.micro_batch_size=2",
    "training.seq_length=1024",
    "launch.nproc_per_node=8",
    "benchmark.warmup_iterations=1",
)


def request(tmp_path: Path, *extra: str, iterations: int = 6, **options) -> RunRequest:
    return RunRequest(
        backend="fake",
        model="llama3.1-8b",
        overrides=(*SHAPE, *extra),
        iterations=iterations,
        output=tmp_path / "runs",
        run_id="r1",
        options=options,
    )


@pytest.mark.slow
def test_completed_run_writes_every_file_and_a_valid_result(tmp_path):
    registry = make_registry()
    outcome = run(prepare(request(tmp_path), registry), registry)
    run_dir = tmp_path / "runs" / "r1"
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and outcome.return_code == 0
    assert result.run.backend == "fake" and result.run.framework == "fakeframe"
    assert [r.iteration for r in result.iterations] == [1, 2, 3, 4, 5, 6]
    # Hardware comes from the manifest captured at launch.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["hardware"]["device_name"] == result.hardware.device_name
    assert (run_dir / "config.toml").read_text().count("global_batch_size = 16") == 1
    assert (run_dir / "job.yaml").read_text() == "iterations: 6\n"
    log = (run_dir / "logs" / "launcher.log").read_text()
    assert "step 6 time=0.060" in log
    assert result.provenance.inputs[0] == "logs/launcher.log"
    assert result.iterations[0].source == "logs/launcher.log:2"
    # The headline is the core's: tokens/s/GPU = GBS x seq / step time / world size.
    expected = describe(16 * 1024 / r.step_time_s / 8 for r in result.iterations[1:])
    assert result.summary.tokens_per_s_per_gpu == expected
    assert result.summary.mfu is not None  # a known device: the peaks table answered
    assert SECRET not in (run_dir / "manifest.json").read_text()


def test_dry_run_prints_the_exact_command_and_writes_nothing(tmp_path):
    registry = make_registry()
    prepared = prepare(request(tmp_path), registry)
    text = describe_plan(prepared)
    assert shlex.join(prepared.plan.argv) in text
    assert "HF_TOKEN=" + shlex.quote("<redacted>") in text and SECRET not in text
    assert "--- job.yaml\niterations: 6" in text
    assert "[training]\nmicro_batch_size = 2\nglobal_batch_size = 16\nseq_length = 1024" in text
    assert not (tmp_path / "runs").exists()
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    with pytest.raises(RunError, match="already exists"):
        prepare(request(tmp_path), registry)


@pytest.mark.slow
def test_non_zero_exit_is_failed_with_the_log_tail(tmp_path):
    registry = make_registry()
    outcome = run(prepare(request(tmp_path, iterations=3, code=3), registry), registry)
    result = outcome.result
    assert result.run.status == "failed" and outcome.return_code == 3
    assert len(result.iterations) == 3  # what was measured is kept
    notes = result.provenance.notes
    assert any("exited with code 3" in n for n in notes)
    assert "log: fake job done" in notes


@pytest.mark.slow
def test_hung_job_is_killed_after_the_timeout(tmp_path):
    registry = make_registry()
    started = time.monotonic()
    outcome = run(prepare(request(tmp_path, "launch.timeout_s=1.5", iterations=5, hang_after=2), registry), registry)
    assert time.monotonic() - started < 30
    result = outcome.result
    assert result.run.status == "failed"
    assert [r.iteration for r in result.iterations] == [1, 2]
    assert any("launch.timeout_s = 1.5" in n for n in result.provenance.notes)
    log = (tmp_path / "runs" / "r1" / "logs" / "launcher.log").read_text()
    pid = int(re.search(r"pid=(\d+)", log).group(1))
    with pytest.raises(ProcessLookupError):  # the hung job did not outlive the run
        os.kill(pid, 0)


@pytest.mark.slow
def test_a_node_other_than_rank_0_keeps_its_logs_and_leaves_the_result_to_node_0(tmp_path):
    registry = make_registry()
    two_nodes = attrs.evolve(
        request(tmp_path, "launch.nnodes=2", "training.global_batch_size=32", iterations=2), node_rank=1
    )
    prepared = prepare(two_nodes, registry)
    outcome = run(prepared, registry)
    run_dir = tmp_path / "runs" / "r1"
    assert outcome.result is None and outcome.result_path is None
    assert not (run_dir / "result.json").exists()
    assert "step 2" in (run_dir / "logs" / "node1.log").read_text()
    assert (run_dir / "manifest.json").exists()


@pytest.mark.slow
def test_sigint_midway_leaves_an_interrupted_result_with_the_iterations_so_far(tmp_path):
    registry = make_registry()
    prepared = prepare(request(tmp_path, iterations=200, sleep=0.05), registry)
    result_path = prepared.run_dir / "result.json"

    seen: list[Result] = []  # the intermediate result the thread acted on; checked below, in the test's thread

    def interrupt_when_partial_result_has_iterations() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not seen:
            if result_path.exists():  # written atomically: once there, always a whole result
                partial = load_result(result_path)
                if len(partial.iterations) >= 3:
                    seen.append(partial)
            time.sleep(0.05)
        # Signal only while the run under test forwards SIGINT (its handler is installed);
        # once it has ended, a SIGINT would stop pytest itself.
        if seen and signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=interrupt_when_partial_result_has_iterations)
    thread.start()
    outcome = run(prepared, registry)
    thread.join()
    assert seen, "no intermediate result.json with 3 iterations within 30 s"
    assert seen[0].run.status == "partial"
    result = load_result(result_path)
    assert result.run.status == "interrupted"
    assert 3 <= len(result.iterations) < 200
    assert outcome.result == result
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


@pytest.mark.slow
def test_parser_failure_keeps_the_run_and_says_so(tmp_path):
    registry = make_registry(fail_parser_at=4)
    result = run(prepare(request(tmp_path), registry), registry).result
    assert [r.iteration for r in result.iterations] == [1, 2, 3]
    assert any(
        "parser failed (PluginError: plugin fake (no distribution) failed in its parse_metrics hook "
        "for backend fake: RuntimeError: parser bug)" in n
        for n in result.provenance.notes
    )
    assert any("only 3 of 6" in n for n in result.provenance.notes)


@pytest.mark.slow
def test_profiled_iterations_are_marked_and_energy_comes_from_the_monitor(tmp_path):
    registry = make_registry()

    class ConstantPower:
        name = "constant"

        def read(self):
            return [GpuReading(index=i, power_w=100.0) for i in range(8)]

        def close(self):
            pass

    def monitor(prepared):
        return GpuMonitor(ConstantPower(), interval_s=0.01)

    prepared = prepare(request(tmp_path, "profile.enabled=true", sleep=0.1), registry)
    assert prepared.context.profile is not None  # the backend's launch sees its profile plan
    result = run(prepared, registry, monitor_factory=monitor).result
    assert [r.iteration for r in result.iterations if r.profiled] == [3, 4]
    assert result.summary.measured_iterations == 3  # 6 - 1 warm-up - 2 profiled
    for record in result.iterations:
        # 8 GPUs x 100 W, constant: energy is exactly power x the iteration's time.
        assert record.energy_j == pytest.approx(800.0 * record.step_time_s)
    measured = [r for r in result.iterations if r.iteration in (2, 5, 6)]
    assert result.summary.energy_per_token_j == pytest.approx(
        sum(r.energy_j for r in measured) / sum(r.tokens for r in measured)
    )


class _Declares:
    """A plugin declaring one backend that is the default for some platforms."""

    def __init__(self, name, default_for, usable):
        self.spec = BackendSpec(
            name=name,
            platform="any",
            framework=name,
            description=name,
            default_for=default_for,
            requires=Requirements(python=() if usable else ("no_such_module_here",)),
        )

    @hookimpl
    def register_backends(self):
        return [self.spec]


def _declaring(*plugins):
    registry = Registry()
    for plugin in plugins:
        registry.register(plugin, name=plugin.spec.name)
    return registry


def test_default_backend_is_what_backends_declare_and_falls_back_when_unusable():
    amd = PlatformInfo(platform="amd")
    usable = _declaring(_Declares("vendor", ("amd",), True), _Declares("ref", ("cpu", "*"), True))
    assert resolve_backend(usable, None, amd, {})[0] == "vendor"
    missing = _declaring(_Declares("vendor", ("amd",), False), _Declares("ref", ("cpu", "*"), True))
    backend, reason = resolve_backend(missing, None, amd, {})
    assert backend == "ref" and "vendor" in reason and "no_such_module_here" in reason
    assert resolve_backend(usable, None, PlatformInfo(platform="cpu"), {})[0] == "ref"
    assert resolve_backend(usable, "vendor", PlatformInfo(platform="cpu"), {})[0] == "vendor"


def test_tprimat_default_backend_beats_what_backends_declare():
    registry = _declaring(_Declares("vendor", ("amd",), True), _Declares("ref", ("cpu", "*"), True))
    amd = PlatformInfo(platform="amd")
    assert resolve_backend(registry, None, amd, {"TPRIMAT_DEFAULT_BACKEND": "ref"}) == (
        "ref",
        "TPRIMAT_DEFAULT_BACKEND names it for amd",
    )
    per_platform = {"TPRIMAT_DEFAULT_BACKEND": "nvidia=vendor,amd=ref"}
    assert resolve_backend(registry, None, amd, per_platform)[0] == "ref"
    assert resolve_backend(registry, None, PlatformInfo(platform="cpu"), per_platform)[0] == "ref"
    with pytest.raises(BackendError, match="unknown backend 'nope'"):
        resolve_backend(registry, None, amd, {"TPRIMAT_DEFAULT_BACKEND": "nope"})


def test_two_usable_defaults_for_one_platform_are_an_error_naming_both():
    registry = _declaring(_Declares("one", ("amd",), True), _Declares("two", ("amd",), True))
    with pytest.raises(RunError, match="one, two"):
        resolve_backend(registry, None, PlatformInfo(platform="amd"), {})


@pytest.mark.slow
def test_a_prepared_dataset_reaches_the_backend_and_its_fingerprint_the_result(tmp_path, monkeypatch):
    import types

    dataset = PreparedDataset(
        path_prefix=tmp_path / "web" / "text_document",
        tokenizer="tok",
        fingerprint="sha256:0123abcd",
        documents=3,
        tokens=999,
        vocab_size=128256,
    )
    module = types.ModuleType("tprimat.data")
    module.load_prepared = lambda path: dataset if Path(path) == tmp_path / "web" else None
    monkeypatch.setitem(sys.modules, "tprimat.data", module)
    registry = make_registry()
    prepared = prepare(request(tmp_path, f'data.dataset="{tmp_path / "web"}"', iterations=2), registry)
    assert prepared.context.data == DataArguments(args=("--data-path", str(tmp_path / "web" / "text_document")))
    result = run(prepared, registry).result
    assert result.run.dataset == "web"
    assert result.config.dataset_fingerprint == "sha256:0123abcd"
    assert result.config.config_fingerprint == prepared.config.fingerprint("sha256:0123abcd")
