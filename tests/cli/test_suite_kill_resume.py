"""Suites end to end: the real ``tprimat suite run`` in a subprocess, killed with SIGKILL and resumed.

The multi-seed kill loop uses the example plugin's ``toy`` backend (a sleeping
loop: fast, so many kill points fit in a short test); its 2 × 2 × 2 matrix is run
uninterrupted once per module and shared.  The torch backend runs one uninterrupted
suite and the same suite killed mid-training and resumed, to show the whole chain
(suite → ``tprimat run`` → torchrun → worker) dies with the suite.  Its suite is one
model in two precisions: every torch run costs a process tree importing torch, and
the matrix itself is the toy suites' job (both models train under torch in
``tests/cli/test_run.py``).

Every process a test starts carries a marker in its environment, so the test
can find what is left of it after a kill, whatever its parent is by then.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tprimat.result.schema import ResultError, load_result

pytestmark = pytest.mark.slow

MARK = "TPRIMAT_SUITE_TEST_MARK"

TOY_SUITE = """
[suite]
name = "toy-kill"
backends = ["toy"]
models = ["llama3.1-tiny", "qwen2.5-tiny"]
precisions = ["fp32", "bf16"]
repeats = 2
iterations = 40
"""

TORCH_SUITE = """
[suite]
name = "torch-kill"
backends = ["torch"]
models = ["llama3.1-tiny"]
precisions = ["fp32", "bf16"]
repeats = 1
iterations = 3
set = ["training.seq_length=32", "training.global_batch_size=2", "training.micro_batch_size=1",
       "benchmark.warmup_iterations=1", "launch.nproc_per_node=1", "monitor.enabled=false"]
"""


def _toy_available() -> bool:
    from tprimat.contract.registry import Registry

    return "toy" in Registry.from_environment().backends()


needs_toy = pytest.mark.skipif(not _toy_available(), reason="the example plugin is not installed")


# -- processes --------------------------------------------------------------------------------


def marked_processes(mark: str) -> dict[int, str]:
    """Live (non-zombie) processes whose environment carries ``mark``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{MARK}={mark}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
    return found


def wait_until_gone(mark: str, timeout: float = 10.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    left = marked_processes(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = marked_processes(mark)
    return left


class Campaign:
    """One suite directory, started and killed through the real CLI."""

    def __init__(self, tmp_path: Path, text: str) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.suite_file = tmp_path / "suite.toml"
        self.suite_file.write_text(text)
        self.directory = tmp_path / "campaign"
        self.mark = uuid.uuid4().hex
        self.log = tmp_path / "suite.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        if (self.directory / "suite.toml").exists():
            args = ["suite", "resume", str(self.directory)]
        else:  # killed before it wrote anything: the same command again
            args = ["suite", "run", str(self.suite_file), "--output", str(self.directory)]
        env = dict(os.environ, **{MARK: self.mark}, PYTHONUNBUFFERED="1")
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tprimat.cli", *args], stdout=log, stderr=subprocess.STDOUT, env=env
            )
        return self.proc

    def finish(self, timeout: float = 300) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def kill(self) -> dict[int, str]:
        """SIGKILL the suite process; return whatever of its tree is still alive after a while."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return wait_until_gone(self.mark)

    def results(self) -> dict[str, Path]:
        runs = self.directory / "runs"
        return {p.parent.name: p for p in runs.glob("*/result.json")} if runs.is_dir() else {}

    def completed(self) -> dict[str, tuple[int, int, str | None]]:
        """Completed runs: id -> (inode, mtime, the run's own start time).  Asserts nothing is
        corrupt: every result file in the suite loads and validates."""
        done = {}
        for run_id, path in self.results().items():
            try:
                result = load_result(path)
            except ResultError as exc:  # pragma: no cover - the failure being tested for
                pytest.fail(f"corrupt result after a kill: {exc}")
            if result.run.status == "completed":
                stat = path.stat()
                done[run_id] = (stat.st_ino, stat.st_mtime_ns, result.run.started_at)
        return done

    def output(self) -> str:
        return self.log.read_text()


def assert_untouched(before: dict, after: dict) -> None:
    """Every run completed before is still completed, with the very same file."""
    for run_id, identity in before.items():
        assert after.get(run_id) == identity, f"{run_id} was re-run or rewritten"


def reference_ids(tmp_path: Path, text: str) -> set[str]:
    return set(uninterrupted(tmp_path, text)[1])


def uninterrupted(tmp_path: Path, text: str) -> tuple[Campaign, dict[str, tuple[int, int, str | None]]]:
    """A suite run to its end without interruption, and its completed runs."""
    campaign = Campaign(tmp_path, text)
    campaign.start()
    assert campaign.finish() == 0, campaign.output()
    return campaign, campaign.completed()


# -- toy: many kill points -------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_suite(tmp_path_factory) -> tuple[Campaign, dict[str, tuple[int, int, str | None]]]:
    """The toy suite run uninterrupted once for the module, and its completed runs as they were then.

    The kill tests read only the run ids; the torn-result test then changes this campaign.
    """
    if not _toy_available():
        pytest.skip("the example plugin is not installed")
    return uninterrupted(tmp_path_factory.mktemp("toy-reference"), TOY_SUITE)


@needs_toy
def test_uninterrupted_toy_suite_and_a_garbage_result_is_re_run(toy_suite):
    campaign, done = toy_suite
    assert len(done) == 8
    victim = sorted(done)[5]
    path = campaign.results()[victim]
    torn = path.read_text()[:200]
    path.write_text(torn)  # a torn file, as a broken disk might leave
    status = subprocess.run(
        [sys.executable, "-m", "tprimat.cli", "suite", "status", str(campaign.directory), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    row = next(r for r in json.loads(status.stdout)["runs"] if r["id"] == victim)
    assert row["status"] == "invalid" and "corrupt JSON" in row["problem"]
    others = {k: v for k, v in done.items() if k != victim}
    campaign.start()
    assert campaign.finish() == 0, campaign.output()
    after = campaign.completed()
    assert set(after) == set(done)
    assert_untouched(others, after)
    assert after[victim][0] != done[victim][0]  # a new file, from a new run
    kept = list((campaign.directory / "runs" / ".attempts").iterdir())
    assert [p.name for p in kept] == [f"{victim}.attempt1"]
    assert (kept[0] / "result.json").read_text() == torn  # kept as found, for diagnosis
    with pytest.raises(ResultError):
        load_result(kept[0] / "result.json")


@needs_toy
@pytest.mark.parametrize("seed", [1, 2])
def test_toy_suite_killed_at_random_points_resumes_to_the_same_results(tmp_path, seed, toy_suite):
    reference = set(toy_suite[1])
    assert len(reference) == 8
    rng = random.Random(seed)
    campaign = Campaign(tmp_path / "killed", TOY_SUITE)
    seen: dict[str, tuple] = {}
    kills = 0
    for _ in range(4):
        campaign.start()
        time.sleep(rng.uniform(0.0, 2.5))
        if campaign.proc.poll() is not None:
            break
        left = campaign.kill()
        kills += 1
        assert not left, f"processes outlived the killed suite: {left}"
        now = campaign.completed()  # also: nothing corrupt
        assert_untouched(seen, now)
        seen = now
    campaign.start()
    assert campaign.finish() == 0, campaign.output()
    final = campaign.completed()
    assert set(final) == reference
    assert_untouched(seen, final)
    assert kills >= 1
    # What was set aside was an unfinished attempt, never a completed result.
    attempts = campaign.directory / "runs" / ".attempts"
    for kept in attempts.iterdir() if attempts.exists() else []:
        if (kept / "result.json").exists():
            assert load_result(kept / "result.json").run.status != "completed"


# -- torch: the whole chain ------------------------------------------------------------------


def _torch_ready() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def torch_reference(tmp_path_factory) -> set[str]:
    return reference_ids(tmp_path_factory.mktemp("torch-reference"), TORCH_SUITE)


@pytest.mark.torch
@pytest.mark.skipif(not _torch_ready(), reason="torch and transformers needed")
def test_uninterrupted_torch_suite_completes_every_run(torch_reference):
    assert len(torch_reference) == 2
    assert {i.split("-r")[0] for i in torch_reference} == {f"torch-llama3.1-tiny-{p}-iso" for p in ("fp32", "bf16")}


@pytest.mark.torch
@pytest.mark.skipif(not _torch_ready(), reason="torch and transformers needed")
def test_torch_suite_killed_mid_training_leaves_no_worker_and_resumes(tmp_path, torch_reference):
    # The same suite as the uninterrupted one: the resumed suite must end with exactly its runs.
    expected = torch_reference
    assert len(expected) == 2
    campaign = Campaign(tmp_path, TORCH_SUITE)
    campaign.start()
    # Wait until a run has completed and the next one's worker is training.
    deadline = time.monotonic() + 120
    worker = None
    while time.monotonic() < deadline and campaign.proc.poll() is None:
        if campaign.results() and len(campaign.completed()) >= 1:
            alive = marked_processes(campaign.mark)
            worker = next((c for c in alive.values() if "tprimat.plugins.torch.train" in c), None)
            if worker and any("torch.distributed.run" in c for c in alive.values()):
                break
        time.sleep(0.05)
    assert worker, f"no torch worker seen: {campaign.output()}"
    left = campaign.kill()
    assert not left, f"processes outlived the killed suite: {left}"
    before = campaign.completed()
    assert len(before) == 1
    campaign.start()
    assert campaign.finish() == 0, campaign.output()
    final = campaign.completed()
    assert set(final) == expected
    assert_untouched(before, final)
