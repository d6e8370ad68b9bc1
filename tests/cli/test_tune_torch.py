"""``tprimat tune`` on CPU with the torch backend: the real command, killed with SIGKILL and resumed.

Two candidates (DDP and FSDP2 over 2 processes), two runs each: the smallest search
that still has a final round with intervals.  The tuner is killed while a trial's
workers train; nothing of it survives, the resumed tuner keeps the completed trial
(same file) and finishes.  When the runs tell the two apart it writes the preset with every
trial, and ``tprimat run --set benchmark.methodology=tuned`` then trains the winner's
configuration; when this shared machine's noise does not let them be told apart, the tune
is undecided and writes no preset.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from tests.cli.test_suite_kill_resume import MARK, marked_processes, wait_until_gone
from tprimat.result.schema import load_result

pytestmark = [pytest.mark.slow, pytest.mark.torch]

SETTINGS = [
    "training.seq_length=32",
    "training.micro_batch_size=1",
    'training.recompute="none"',
    "benchmark.warmup_iterations=1",
    "launch.nproc_per_node=2",
    "monitor.enabled=false",
]


def _torch_ready() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _command(tmp: Path) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "tprimat.cli",
        "tune",
        "--backend",
        "torch",
        "--model",
        "llama3.1-tiny",
        "--space",
        "parallel.strategy=ddp,fsdp2",
        "--repeats",
        "2",
        "--min-iterations",
        "3",
        "--output",
        str(tmp / "tune"),
        "--preset-dir",
        str(tmp / "presets"),
    ]
    for setting in SETTINGS:
        argv += ["--set", setting]
    return argv


def _completed(tmp: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for path in (tmp / "tune" / "runs").glob("*/result.json"):
        if load_result(path).run.status == "completed":
            found[path.parent.name] = (path.stat().st_ino, path.stat().st_mtime_ns)
    return found


@pytest.mark.skipif(not _torch_ready(), reason="torch and transformers needed")
def test_torch_tune_survives_kill_9_and_the_tuned_run_uses_the_winner(tmp_path):
    mark = uuid.uuid4().hex
    env = dict(os.environ, **{MARK: mark}, PYTHONUNBUFFERED="1", TPRIMAT_PRESET_DIR=str(tmp_path / "presets"))
    log = (tmp_path / "tune.log").open("a")
    proc = subprocess.Popen(_command(tmp_path), stdout=log, stderr=subprocess.STDOUT, env=env)
    # Kill it once one trial has completed and the next one's workers train.
    deadline = time.monotonic() + 180
    training = False
    while time.monotonic() < deadline and proc.poll() is None and not training:
        if (tmp_path / "tune" / "runs").is_dir() and _completed(tmp_path):
            alive = marked_processes(mark).values()
            training = any("tprimat.plugins.torch.train" in c for c in alive)
        time.sleep(0.05)
    assert training, (tmp_path / "tune.log").read_text()
    proc.kill()
    proc.wait()
    assert not wait_until_gone(mark), "processes outlived the killed tuner"
    before = _completed(tmp_path)
    assert len(before) == 1
    done = subprocess.run(_command(tmp_path), stdout=log, stderr=subprocess.STDOUT, env=env, timeout=300)
    after = _completed(tmp_path)
    assert all(after[k] == v for k, v in before.items()), "a completed trial was run again"
    assert len(after) == 4
    summary = json.loads((tmp_path / "tune" / "summary.json").read_text())
    assert sorted(t["id"] for t in summary["trials"]) == sorted(after)
    if summary["undecided"]:  # a busy machine's two runs each could not tell DDP from FSDP2
        assert done.returncode == 1 and "no preset written" in (tmp_path / "tune.log").read_text()
        assert not (tmp_path / "presets").exists() or not list((tmp_path / "presets").glob("*.toml"))
        return
    assert done.returncode == 0, (tmp_path / "tune.log").read_text()
    [preset_path] = (tmp_path / "presets").glob("*.toml")
    preset = tomllib.loads(preset_path.read_text())
    tune = preset["tune"]
    assert sorted(t["id"] for t in tune["trials"]) == sorted(after)
    assert all(t["status"] == "completed" and t["tokens_per_s_per_gpu"] > 0 for t in tune["trials"])
    winner = preset["config"]["parallel.strategy"]
    assert winner in ("ddp", "fsdp2") and tune["winner_settings"]["parallel.strategy"] == winner
    assert summary["winner_id"] == tune["winner"] and "lies above 1" in tune["decision"]
    # The tuned methodology trains the winner: base strategy is the other one.
    other = "fsdp2" if winner == "ddp" else "ddp"
    run = [
        sys.executable,
        "-m",
        "tprimat.cli",
        "run",
        "--backend",
        "torch",
        "--model",
        "llama3.1-tiny",
        "--iterations",
        "3",
        "--output",
        str(tmp_path / "runs"),
        "--run-id",
        "tuned",
        "--set",
        "benchmark.methodology=tuned",
        "--set",
        f"parallel.strategy={other}",
    ]
    for setting in SETTINGS:
        run += ["--set", setting]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    result = load_result(tmp_path / "runs" / "tuned" / "result.json")
    assert result.config.methodology == "tuned" and result.config.preset == preset["preset"]["name"]
    assert f'parallel.strategy: "{other}" -> "{winner}"' in result.config.deviations
    name = preset["preset"]["name"]
    assert any(layer.startswith(f"tuned preset {name} (tprimat tune") for layer in result.config.layers)
    launcher_log = (tmp_path / "runs" / "tuned" / "logs" / "launcher.log").read_text()
    assert f'"strategy":"{winner}"' in launcher_log


@pytest.mark.skipif(not _torch_ready(), reason="torch and transformers needed")
def test_torch_tune_over_micro_batch_and_recompute_trains_each_candidate_as_searched(tmp_path):
    """Four candidates (micro-batch 1/2 x recompute none/full, one process): round 0 runs each once,
    the two fastest run twice more; every trial's workers trained exactly its candidate."""
    argv = [
        sys.executable,
        "-m",
        "tprimat.cli",
        "tune",
        "--backend",
        "torch",
        "--model",
        "llama3.1-tiny",
        "--space",
        "training.micro_batch_size=1,2",
        "--repeats",
        "2",
        "--min-iterations",
        "3",
        "--output",
        str(tmp_path / "tune"),
        "--preset-dir",
        str(tmp_path / "presets"),
        "--json",
    ]
    for setting in (
        "training.seq_length=32",
        "training.global_batch_size=2",
        "benchmark.warmup_iterations=1",
        "monitor.enabled=false",
    ):
        argv += ["--set", setting]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    summary = json.loads((tmp_path / "tune" / "summary.json").read_text())
    # decided (exit 0) or, when the busy machine's runs cannot tell the finalists apart, undecided (exit 1)
    assert out.returncode == (1 if summary["undecided"] else 0), out.stdout + out.stderr
    printed = json.loads(out.stdout)
    assert summary["definition"]["candidates"] == [
        {"training.micro_batch_size": 2, "training.recompute": "none"},  # the config as written first
        {"training.micro_batch_size": 1, "training.recompute": "none"},
        {"training.micro_batch_size": 2, "training.recompute": "full"},
        {"training.micro_batch_size": 1, "training.recompute": "full"},
    ]
    trials = summary["trials"]
    assert [t["round"] for t in trials].count(0) == 4 and [t["round"] for t in trials].count(1) == 4
    assert all(t["status"] == "completed" for t in trials)
    settings = {c: s["settings"] for c, s in summary["candidates"].items()}
    for trial in trials:
        run_dir = tmp_path / "tune" / "runs" / trial["id"]
        config = tomllib.loads((run_dir / "config.toml").read_text())
        wanted = settings[trial["candidate"]]
        assert config["training"]["micro_batch_size"] == wanted["training.micro_batch_size"]
        assert config["training"]["recompute"] == wanted["training.recompute"]
        assert config["benchmark"]["iterations"] == trial["iterations"]
        micro_batches = 2 // wanted["training.micro_batch_size"]
        assert f'"micro_batches_per_rank":{micro_batches}' in (run_dir / "logs" / "launcher.log").read_text()
    if summary["undecided"]:
        assert printed["winner"] is None and printed["preset"] is None
    else:
        assert printed["winner"] == settings[summary["winner_id"]]
