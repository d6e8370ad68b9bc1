"""Suite expansion, state and resumption (the launcher is replaced; see the slow tests for real runs)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.result.builder import assemble_result
from tprimat.result.resultjson import write_result
from tprimat.result.schema import IterationRecord, ResultConfig, RunInfo
from tprimat.suite.campaign import (
    STATE_FILE,
    SuiteError,
    counts,
    expand,
    init_suite_dir,
    load_suite,
    run_suite,
    suite_overview,
)

SUITE = """
[suite]
name = "demo"
backends = ["toy"]
models = ["llama3.1-tiny", "qwen2.5-tiny"]
precisions = ["fp32", "bf16"]
repeats = 2
iterations = 4
set = ["training.seq_length=64"]
"""


@pytest.fixture
def suite_file(tmp_path) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    return path


def write_run(argv: list[str], status: str = "completed") -> None:
    """What `tprimat run` leaves behind: a result written through the core."""
    runs_dir = Path(argv[argv.index("--output") + 1])
    run_id = argv[argv.index("--run-id") + 1]
    model = next(a.split("=", 1)[1] for a in argv if a.startswith("benchmark.model="))
    result = assemble_result(
        run=RunInfo(
            id=run_id,
            backend="toy",
            platform="cpu",
            framework="toy",
            model=model,
            dataset="mock",
            status=status,
            started_at=None,
            finished_at=None,
            tprimat_version="0.1.0",
        ),
        config=ResultConfig(
            model=model,
            seq_length=64,
            global_batch_size=8,
            micro_batch_size=1,
            world_size=1,
            precision="fp32",
            methodology="iso",
        ),
        records=[IterationRecord(iteration=i, step_time_s=0.1) for i in range(1, 5)],
    )
    write_result(result, runs_dir / run_id / "result.json")


class Launcher:
    def __init__(self, outcomes=None):
        self.calls: list[str] = []
        self.outcomes = outcomes or {}

    def __call__(self, argv: list[str]) -> int:
        run_id = argv[argv.index("--run-id") + 1]
        self.calls.append(run_id)
        outcome = self.outcomes.get(run_id, ["completed"])
        status = outcome.pop(0) if len(outcome) > 1 else outcome[0]
        if status == "crash":
            return 1
        write_run(argv, status)
        return 0 if status == "completed" else 1


def test_expand_is_stable_and_repeats_come_last(suite_file):
    spec = load_suite(suite_file)
    runs = expand(spec)
    assert len(runs) == 8 and [r.repeat for r in runs] == [1] * 4 + [2] * 4
    assert [r.id for r in runs] == [r.id for r in expand(load_suite(suite_file))]
    assert len({r.id for r in runs}) == 8
    assert runs[0].id.startswith("toy-llama3.1-tiny-fp32-iso-r1-")


def test_changing_what_a_cell_runs_changes_its_id(suite_file, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text(SUITE.replace("seq_length=64", "seq_length=128"))
    assert {r.id for r in expand(load_suite(suite_file))}.isdisjoint({r.id for r in expand(load_suite(other))})


@pytest.mark.parametrize(
    "text, message",
    [
        ("[suite]\nbackends=['torch']\n", "needs models"),
        ("[suite]\nbackends=['torch']\nmodels=['x']\nrepeat=2\n", "unknown key suite.repeat"),
        ("[suite]\nbackends=['torch']\nmodels=['x']\nrepeats=0\n", "positive integer"),
        ("[suite]\nbackends=[]\nmodels=['x']\n", "non-empty list"),
        ("[other]\n", "exactly one table"),
    ],
)
def test_bad_suite_files(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SuiteError, match=message):
        load_suite(path)


def test_run_then_resume_runs_nothing_twice(suite_file, tmp_path):
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    launcher = Launcher()
    assert run_suite(spec, directory, launcher=launcher) == {"completed": 8}
    assert len(launcher.calls) == 8
    again = Launcher()
    run_suite(spec, directory, launcher=again)
    assert again.calls == []
    assert counts(spec, directory)["completed"] == 8


def test_garbage_result_is_reported_and_re_run_with_old_files_kept(suite_file, tmp_path):
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    run_suite(spec, directory, launcher=Launcher())
    victim = expand(spec)[3]
    result = directory / "runs" / victim.id / "result.json"
    result.write_text(result.read_text()[:100])
    row = next(r for r in suite_overview(spec, directory) if r["id"] == victim.id)
    assert row["status"] == "invalid" and "corrupt JSON" in row["problem"]
    launcher = Launcher()
    assert run_suite(spec, directory, launcher=launcher) == {"completed": 8}
    assert launcher.calls == [victim.id]
    kept = list((directory / "runs" / ".attempts").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith(victim.id)


def test_failed_runs_are_retried_up_to_max_attempts(suite_file, tmp_path):
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    flaky, broken = expand(spec)[0].id, expand(spec)[1].id
    launcher = Launcher({flaky: ["crash", "completed"], broken: ["failed"]})
    run_suite(spec, directory, launcher=launcher)  # max_attempts defaults to 2
    run_suite(spec, directory, launcher=launcher)
    run_suite(spec, directory, launcher=launcher)
    assert launcher.calls.count(flaky) == 2 and launcher.calls.count(broken) == 2
    rows = {r["id"]: r for r in suite_overview(spec, directory)}
    assert rows[flaky]["status"] == "completed"
    assert rows[broken]["status"] == "failed" and rows[broken]["attempts"] == 2


def test_a_damaged_state_file_only_resets_attempts(suite_file, tmp_path):
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    run_suite(spec, directory, launcher=Launcher())
    (directory / STATE_FILE).write_text("{garbage")
    again = Launcher()
    assert run_suite(spec, directory, launcher=again) == {"completed": 8} and again.calls == []


def test_a_different_suite_cannot_reuse_the_directory(suite_file, tmp_path):
    directory = tmp_path / "out"
    init_suite_dir(suite_file, directory)
    other = tmp_path / "other.toml"
    other.write_text(SUITE.replace("repeats = 2", "repeats = 3"))
    with pytest.raises(SuiteError, match="different suite"):
        init_suite_dir(other, directory)


def test_base_config_is_copied_into_the_suite_directory(tmp_path):
    base = tmp_path / "bench.toml"
    base.write_text("[training]\nseq_length = 64\n")
    path = tmp_path / "s.toml"
    path.write_text(SUITE + 'config = "bench.toml"\n')
    spec = init_suite_dir(path, tmp_path / "out")
    assert Path(spec.config) == (tmp_path / "out" / "base-config.toml").resolve()
    assert [r.id for r in expand(spec)] == [r.id for r in expand(load_suite(path))]


def test_cli_dry_run_and_status(suite_file, tmp_path):
    runner = CliRunner()
    dry = runner.invoke(cli, ["suite", "run", str(suite_file), "--dry-run"])
    assert dry.exit_code == 0 and dry.output.count("--run-id") == 8
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    run_suite(spec, directory, launcher=Launcher())
    status = runner.invoke(cli, ["suite", "status", str(directory), "--json"])
    rows = json.loads(status.output)["runs"]
    assert {r["status"] for r in rows} == {"completed"} and len(rows) == 8


def test_the_same_suite_file_reopens_its_directory(tmp_path):
    base = tmp_path / "bench.toml"
    base.write_text("[training]\nseq_length = 64\n")
    path = tmp_path / "s.toml"
    path.write_text(SUITE + 'config = "bench.toml"\n')
    first = init_suite_dir(path, tmp_path / "out")
    assert init_suite_dir(path, tmp_path / "out") == first


def test_report_writes_one_comparison_per_model_and_precision(suite_file, tmp_path):
    directory = tmp_path / "out"
    spec = init_suite_dir(suite_file, directory)
    run_suite(spec, directory, launcher=Launcher())
    result = CliRunner().invoke(cli, ["suite", "report", str(directory), "--format", "md,csv", "--json"])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.output)["reports"]
    assert sorted(reports) == [
        "llama3.1-tiny-bf16-iso",
        "llama3.1-tiny-fp32-iso",
        "qwen2.5-tiny-bf16-iso",
        "qwen2.5-tiny-fp32-iso",
    ]
    assert all(entry["runs"] == 2 for entry in reports.values())  # the two repeats
    text = Path(reports["qwen2.5-tiny-fp32-iso"]["files"]["report.md"]).read_text()
    assert "qwen2.5-tiny" in text and "R1, R2" in text


def test_report_without_completed_runs_is_an_error(suite_file, tmp_path):
    directory = tmp_path / "out"
    init_suite_dir(suite_file, directory)
    result = CliRunner().invoke(cli, ["suite", "report", str(directory)])
    assert result.exit_code == 1 and "no completed runs" in result.output


# -- launch options: --strict and --slurm pass through to every run --------------------------


def _quiet(monkeypatch):
    for name in ("NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING", "AMD_LOG_LEVEL", "TORCH_DISTRIBUTED_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def test_dry_run_with_slurm_passes_the_scheduler_options_to_each_run(suite_file, tmp_path):
    out = CliRunner().invoke(
        cli,
        [
            "suite",
            "run",
            str(suite_file),
            "--output",
            str(tmp_path / "o"),
            "--dry-run",
            "--slurm",
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--partition",
            "mi300x",
            "--time",
            "01:00:00",
            "--account",
            "perf",
        ],
    )
    assert out.exit_code == 0, out.output
    commands = [line.strip() for line in out.output.splitlines() if line.startswith("  ")]
    assert len(commands) == 8
    for command in commands:
        assert command.endswith(
            " --slurm --nodes 2 --gpus-per-node 8 --partition mi300x --time 01:00:00 --account perf"
        )
        assert " run --backend toy " in command
    assert not (tmp_path / "o").exists()


def test_scheduler_options_need_slurm(suite_file):
    out = CliRunner().invoke(cli, ["suite", "run", str(suite_file), "--dry-run", "--nodes", "2"])
    assert out.exit_code == 2 and "--nodes only apply with --slurm" in out.output


def test_resume_starts_the_rest_the_way_the_suite_was_started(suite_file, tmp_path, monkeypatch):
    import tprimat.suite.campaign as suite_module

    _quiet(monkeypatch)
    directory = tmp_path / "out"
    launched: list[list[str]] = []

    def fail_after_two(argv, env=None):
        launched.append(argv)
        run_dir = Path(argv[argv.index("--output") + 1]) / argv[argv.index("--run-id") + 1]
        assert run_dir.parent.is_dir()
        assert list(env) == ["TPRIMAT_SUITE_TOKEN"]  # marks the processes of this suite command
        if len(launched) > 2:
            return 1  # e.g. the scheduler refused the job: no result
        write_run(argv)
        return 0

    monkeypatch.setattr(suite_module, "_launch_child", fail_after_two)
    first = CliRunner().invoke(
        cli,
        ["suite", "run", str(suite_file), "--output", str(directory), "--slurm", "--nodes", "2", "--partition", "p1"],
    )
    assert first.exit_code == 1 and "suite resume" in first.output
    assert all(a[-5:] == ["--slurm", "--nodes", "2", "--partition", "p1"] for a in launched)
    assert json.loads((directory / "launch.json").read_text())["slurm"] is True

    launched.clear()
    monkeypatch.setattr(
        suite_module, "_launch_child", lambda argv, env=None: (launched.append(argv), write_run(argv), 0)[2]
    )
    again = CliRunner().invoke(cli, ["suite", "resume", str(directory)])
    assert again.exit_code == 0, again.output
    assert len(launched) == 6
    assert all(a[-5:] == ["--slurm", "--nodes", "2", "--partition", "p1"] for a in launched)

    # Options given to resume replace the kept ones.
    (directory / "runs" / expand(load_suite(suite_file))[0].id / "result.json").unlink()
    launched.clear()
    assert CliRunner().invoke(cli, ["suite", "resume", str(directory), "--slurm", "--partition", "p2"]).exit_code == 0
    assert [a[-3:] for a in launched] == [["--slurm", "--partition", "p2"]]


def test_strict_refuses_to_start_with_exit_code_2_and_runs_are_strict_too(suite_file, tmp_path, monkeypatch):
    import tprimat.running.doctor as doctor
    import tprimat.suite.campaign as suite_module

    _quiet(monkeypatch)
    monkeypatch.setattr(doctor, "check_free_disk", lambda probe, output_dir: [])
    for check in ("check_gpu_processes", "check_power_cap", "check_numa_balancing"):
        monkeypatch.setattr(doctor, check, lambda probe: [])
    launched: list[list[str]] = []
    monkeypatch.setattr(
        suite_module, "_launch_child", lambda argv, env=None: (launched.append(argv), write_run(argv), 0)[2]
    )
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    refused = CliRunner().invoke(cli, ["suite", "run", str(suite_file), "--output", str(tmp_path / "o"), "--strict"])
    assert refused.exit_code == 2 and "refusing to start" in refused.output
    assert launched == []
    monkeypatch.delenv("NCCL_DEBUG")
    done = CliRunner().invoke(cli, ["suite", "run", str(suite_file), "--output", str(tmp_path / "o"), "--strict"])
    assert done.exit_code == 0, done.output
    assert len(launched) == 8 and all(a[-1] == "--strict" for a in launched)
