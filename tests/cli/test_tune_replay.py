"""``tprimat tune`` end to end for a vendor backend, with replayed real logs.

Each trial is a real ``tprimat run --backend nvd_megatron`` (the Megatron plan, the
runner, the parser, the result) run in-process through the suite machinery; only the
program at the end of the command is the replay stand-in of
``tests/cli/test_run_vendor_replay.py``.  Here it replays the complete GH200 log for
micro-batch sizes below 4, and the real out-of-memory traceback of the same GH200
setup (exit 1) from micro-batch 4 up, so the infeasible path sees a real OOM log.
Every replayed run measures the same step times, so a search among feasible candidates
cannot tell them apart and ends undecided (no preset): deterministic, which lets a
killed-and-resumed tune be compared with an uninterrupted one exactly.  A search in which
every other candidate runs out of memory names the one that runs, and writes its preset.
"""

from __future__ import annotations

import json
import os
import random
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.cli.test_run_vendor_replay import LOGS, STAND_IN, bench  # noqa: F401 (bench: a fixture)
from tprimat.cli import cli
from tprimat.result.schema import load_result

pytestmark = pytest.mark.slow

FULL = LOGS / "megatron" / "mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
OOM = LOGS / "megatron" / "mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_stderr.log"

#: Chooses the log by the micro-batch size Megatron was given, then replays it.
CHOOSER = f"""
import os, sys
argv = sys.argv[1:]
mbs = int(argv[argv.index("--micro-batch-size") + 1])
if mbs >= 4:
    os.environ["REPLAY_LOG"] = {str(OOM)!r}
    os.environ["REPLAY_EXIT"] = "1"
else:
    os.environ["REPLAY_LOG"] = {str(FULL)!r}
"""

#: The replayed run's workload (global batch 80, sequence 2048, one GPU); the config as written
#: asks for micro-batch 4, which does not fit.
BASE = """
[benchmark]
warmup_iterations = 2
[training]
global_batch_size = 80
micro_batch_size = 4
seq_length = 2048
[launch]
nproc_per_node = 1
[precision]
dtype = "bf16"
[monitor]
enabled = false
"""


class Killed(BaseException):
    """Stands for SIGKILL of the tuner at a chosen point."""


class Trials:
    """The in-process trial launcher, able to 'kill' the tuner before, during or after a trial."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.calls = 0
        self.kills: dict[int, str] = {}  # call number -> before | during | after
        self.outputs: list[str] = []

    def __call__(self, argv: list[str]) -> int:
        assert argv[1:4] == ["-m", "tprimat.cli", "run"]
        self.calls += 1
        how = self.kills.pop(self.calls, None)
        if how == "before":
            raise Killed
        if how == "during":  # the job dies after 3 iterations; the tuner dies with it
            self.monkeypatch.setenv("REPLAY_STOP_AFTER", "3")
            self.monkeypatch.setenv("REPLAY_EXIT", "137")
        try:
            result = CliRunner().invoke(cli, argv[3:], catch_exceptions=False)
            code = result.exit_code
            self.outputs.append(result.output)
        finally:
            self.monkeypatch.delenv("REPLAY_STOP_AFTER", raising=False)
            self.monkeypatch.delenv("REPLAY_EXIT", raising=False)
        if how in ("during", "after"):
            raise Killed
        return code


SPACE = ("training.micro_batch_size=1,2,4", "training.recompute=none,full")


def _tune(tmp: Path, trials: Trials, *extra: str, space: tuple[str, ...] = SPACE):
    config = tmp / "bench.toml"
    config.write_text(BASE)
    args = [
        "tune",
        "--backend",
        "nvd_megatron",
        "--model",
        "llama3.1-8b",
        "--config",
        str(config),
        *(f"--space={item}" for item in space),
        "--output",
        str(tmp / "tune"),
        "--preset-dir",
        str(tmp / "presets"),
        # the replayed log is a 1-GPU GH200 run of a smaller model: the memory estimate of the
        # 8B config would prune every candidate on the GH200's 95 GiB, so the capacity is lifted
        # to let the real out-of-memory log decide what is infeasible
        "--device-capacity",
        "1024",
        *extra,
    ]
    return CliRunner().invoke(cli, args, obj={"trial_launcher": trials}, catch_exceptions=False)


@pytest.fixture
def replay(bench, monkeypatch):  # noqa: F811
    chooser = bench.tmp / "stand_in.py"
    chooser.write_text(CHOOSER + STAND_IN)
    monkeypatch.setenv("REPLAY_LOG", str(FULL))
    # the replayed logs are of Llama 3.2 1B, the plans of Llama 3.1 8B: their argument dump would
    # (rightly) make every trial disagree with its plan, which test_run_vendor_replay checks
    monkeypatch.setenv("REPLAY_WITHOUT_ARGUMENTS", "1")
    return bench


def _preset(tmp: Path) -> dict:
    [path] = (tmp / "presets").glob("*.toml")
    return tomllib.loads(path.read_text())


def _summary(tmp: Path) -> dict:
    return json.loads((tmp / "tune" / "summary.json").read_text())


def _completed(tmp: Path) -> dict[str, tuple[int, int]]:
    done = {}
    for path in (tmp / "tune" / "runs").glob("*/result.json"):
        if load_result(path).run.status == "completed":
            done[path.parent.name] = (path.stat().st_ino, path.stat().st_mtime_ns)
    return done


def test_oom_trials_are_infeasible_and_a_tie_is_undecided_without_a_preset(replay, monkeypatch):
    out = _tune(replay.tmp, Trials(monkeypatch))
    assert out.exit_code == 1, out.output
    assert "undecided — rerun with more repeats or on a quiet machine" in out.output
    assert "no preset written" in out.output
    assert not (replay.tmp / "presets").exists() or not list((replay.tmp / "presets").glob("*.toml"))
    tune = _summary(replay.tmp)
    assert tune["undecided"] and tune["winner"] is None and tune["winner_id"] is None
    status = {cid: (c["settings"], c["status"]) for cid, c in tune["candidates"].items()}
    infeasible = [s for s, st in status.values() if st.startswith("infeasible")]
    assert sorted(s["training.recompute"] for s in infeasible) == ["full", "none"]
    assert all(s["training.micro_batch_size"] == 4 for s in infeasible)
    oom_trials = [t for t in tune["trials"] if t["status"] == "infeasible"]
    assert len(oom_trials) == 2
    assert all("torch.OutOfMemoryError: CUDA out of memory" in t["evidence"] for t in oom_trials)
    # round 0: 6 runs; 4 feasible -> 2 finalists x 3 runs at twice the iterations
    assert len(tune["trials"]) == 6 + 2 * 3
    assert {t["iterations"] for t in tune["trials"] if t["round"] == 1} == {10}
    # identical replayed step times: the ratio's interval is [1, 1], which includes 1
    assert "includes 1" in tune["decision"]
    assert [c["status"] for c in tune["candidates"].values()].count("finalist") == 2


def test_the_only_candidate_that_fits_wins_and_the_tuned_run_uses_it(replay, monkeypatch):
    # micro-batch 4 (the config as written) runs out of memory; micro-batch 1 is what runs
    out = _tune(replay.tmp, Trials(monkeypatch), space=("training.micro_batch_size=1,4", "training.recompute=none"))
    assert out.exit_code == 0, out.output
    preset = _preset(replay.tmp)
    tune = preset["tune"]
    assert preset["preset"]["backend"] == "nvd_megatron" and preset["preset"]["model"] == "llama3.1-8b"
    assert "the only candidate that ran (every other one ran out of memory)" in tune["decision"]
    assert preset["config"]["training.micro_batch_size"] == 1
    assert tune["software"]["tprimat"] and tune["budget"] == "24 trials"
    winner = tune["statistics"][tune["winner"]]
    assert winner["n"] == 3 and winner["ci_low"] == winner["median"] == winner["ci_high"]
    # the tuned methodology uses it: micro-batch 4 as written becomes 1
    monkeypatch.setenv("TPRIMAT_PRESET_DIR", str(replay.tmp / "presets"))
    out = replay.invoke(_case(), "--set", "benchmark.methodology=tuned", "--set", "training.micro_batch_size=4")
    assert out.exit_code == 0, out.output
    launched = replay.launched()["argv"]
    assert launched[launched.index("--micro-batch-size") + 1] == "1"
    recorded = load_result(replay.run_dir / "result.json").config
    assert recorded.methodology == "tuned" and recorded.preset is not None
    assert "training.micro_batch_size: 4 -> 1" in recorded.deviations
    assert recorded.settings["training"]["micro_batch_size"] == 1
    # compare puts the iso run of the same work beside it: what tuning bought this platform
    from tprimat.compare.model import build_comparison
    from tprimat.compare.report import write_report
    from tprimat.settings.config import load_config

    tuned_run, iso_run = replay.run_dir, replay.tmp / "runs" / "iso"
    assert replay.invoke(_case(), "--run-id", "iso").exit_code == 0  # iso, as written (micro-batch 2)
    comparison = build_comparison([tuned_run, iso_run], cost=load_config().cost)  # no --allow-mismatch
    [gain] = comparison.tuning
    assert gain.presets == [recorded.preset] and "training.micro_batch_size: 4 -> 1" in gain.deviations
    iso = load_result(iso_run / "result.json").summary.tokens_per_s_per_gpu.median
    tuned = load_result(tuned_run / "result.json").summary.tokens_per_s_per_gpu.median
    assert gain.speedup.value == pytest.approx(tuned / iso)
    report = write_report(comparison, replay.tmp / "report", ["md"])["report.md"].read_text()
    assert "## Tuned vs iso" in report and gain.system in report


def _case():
    from tests.cli.test_run_vendor_replay import CASES

    return CASES["nvd_megatron"]


@pytest.mark.parametrize("seed", [3])  # kills cycle through before, during and after a trial
def test_a_tune_killed_at_random_points_resumes_to_the_same_trials_and_winner(replay, monkeypatch, seed):
    reference = replay.tmp / "reference"
    reference.mkdir()
    assert _tune(reference, Trials(monkeypatch)).exit_code == 1  # undecided: identical replays
    expected = _summary(reference)
    rng = random.Random(seed)
    killed = replay.tmp / "killed"
    killed.mkdir()
    trials = Trials(monkeypatch)
    seen: dict[str, tuple[int, int]] = {}
    kills = 0
    kinds: list[str] = []
    for _ in range(4):
        how = ["before", "during", "after"][kills % 3] if seed == 3 else rng.choice(["before", "during", "after"])
        kinds.append(how)
        trials.kills = {trials.calls + rng.randint(1, 4): how}
        try:
            out = _tune(killed, trials)
        except Killed:
            kills += 1
            now = _completed(killed)
            assert all(now.get(k) == v for k, v in seen.items()), "a completed trial was run again"
            seen = now
            continue
        assert out.exit_code == 1 and "undecided" in out.output, out.output
        break
    else:
        trials.kills = {}
        assert _tune(killed, trials).exit_code == 1
    assert kills >= 1
    got = _summary(killed)

    def trial_set(tune):
        return sorted((t["id"], t["candidate"], t["round"], t["status"]) for t in tune["trials"])

    assert trial_set(got) == trial_set(expected)
    assert got["winner_id"] == expected["winner_id"] and got["decision"] == expected["decision"]
    assert all(_completed(killed).get(k) == v for k, v in seen.items())
    if "during" in kinds[:kills]:  # the cut-short attempt was set aside, not counted, and run again
        assert list((killed / "tune" / "runs" / ".attempts").iterdir())


PRIMUS_FIXED = [
    "training.micro_batch_size=1",
    'training.recompute="none"',
    "parallel.tensor=1",
    "parallel.pipeline=1",
    "parallel.context=1",
    "parallel.distributed_optimizer=true",
    "parallel.overlap_grad_reduce=true",
    "parallel.overlap_param_gather=true",
]


def test_a_backend_switch_is_tried_through_a_trial_preset_both_ways(bench, monkeypatch):  # noqa: F811
    from tests.cli.test_run_vendor_replay import CASES, MACHINES

    case = CASES["amd_primus"]
    bench.machine["platform"] = MACHINES["amd_primus"]
    monkeypatch.setenv("REPLAY_LOG", str(LOGS / case.log))
    monkeypatch.setenv("PRIMUS_PATH", str(bench.primus))
    args = [
        "tune",
        "--backend",
        "amd_primus",
        "--model",
        "llama3.1-8b",
        "--output",
        str(bench.tmp / "tune"),
        "--preset-dir",
        str(bench.tmp / "presets"),
        "--json",
    ]
    for setting in (
        *case.settings,
        'precision.dtype="bf16"',
        "benchmark.warmup_iterations=2",
        "monitor.enabled=false",
        *PRIMUS_FIXED,
    ):
        args += ["--set", setting]
    user_presets = os.environ["TPRIMAT_PRESET_DIR"]
    trials = Trials(monkeypatch)
    out = CliRunner().invoke(cli, args, obj={"trial_launcher": trials}, catch_exceptions=False)
    # identical replays both ways: the switch's two values cannot be told apart, so no preset
    assert out.exit_code == 1, out.output + "\n".join(trials.outputs)
    printed = json.loads(out.stdout)  # --json: only the outcome on stdout
    assert printed["winner"] is None and printed["preset"] is None and printed["directory"].endswith("tune")
    assert printed["decision"].startswith("undecided")
    assert not list((bench.tmp / "presets").glob("*.toml")) if (bench.tmp / "presets").exists() else True
    summary = json.loads((bench.tmp / "tune" / "summary.json").read_text())
    assert summary["definition"]["candidates"] == [
        {"amd_primus.use_turbo_attention": False},
        {"amd_primus.use_turbo_attention": True},
    ]
    runs = sorted((bench.tmp / "tune" / "runs").glob("amd_primus-*"))
    assert len(runs) == 2 * 3 and all("-tuned-" in r.name for r in runs)
    seen = set()
    for run in runs:
        experiment = (run / "primus_experiment.yaml").read_text()
        turbo = "use_turbo_attention: true" in experiment
        assert turbo or "use_turbo_attention: false" in experiment
        seen.add(turbo)
        deviations = load_result(run / "result.json").config.deviations
        # a deviation from what the iso launch really has (false): turning it on is one, keeping it off none
        changed = [d for d in deviations if d.startswith("amd_primus.use_turbo_attention")]
        assert changed == (["amd_primus.use_turbo_attention: false -> true"] if turbo else [])
    assert seen == {False, True}
    assert os.environ["TPRIMAT_PRESET_DIR"] == user_presets  # the trial presets were only in force during trials
