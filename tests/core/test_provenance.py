"""Provenance of a run: container image and digest, commits of tprimat and the framework checkouts,
package versions, launcher and tags, from the manifest through the result into results.csv."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import attrs
import click
import pytest
from click.testing import CliRunner

from tests.core.test_runner import make_registry, request
from tprimat.cli import cli
from tprimat.cli.tags import parse_tags
from tprimat.compare.model import build_comparison
from tprimat.compare.report import write_report
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.schema import load_result
from tprimat.running.manifest import (
    FRAMEWORK_PACKAGES,
    capture_manifest,
    checkout_commits,
    git_commit,
    launcher_of,
    load_manifest,
)
from tprimat.running.monitor import GpuMonitor, GpuReading
from tprimat.running.prepare import prepare
from tprimat.running.runner import run
from tprimat.settings.config import load_config

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def _git(directory: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run([GIT, "-C", str(directory), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def _repo(path: Path, *files: str) -> str:
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    for name in files or ("README",):
        (path / name).write_text(name)
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "one")
    return _git(path, "rev-parse", "HEAD")


@needs_git
def test_commits_are_read_from_loose_and_packed_refs_and_a_detached_head(tmp_path):
    repo = tmp_path / "Megatron-LM"
    head = _repo(repo)
    assert git_commit(repo) == head
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert git_commit(repo) == head
    _git(repo, "checkout", "-q", "--detach")
    assert git_commit(repo) == head
    assert git_commit(tmp_path) is None  # not a checkout (and never a parent's)


@needs_git
def test_a_checkout_and_the_submodules_it_names_each_have_their_commit(tmp_path):
    megatron = _repo(tmp_path / "megatron-src")
    primus = tmp_path / "Primus"
    primus_head = _repo(primus, ".gitmodules")
    (primus / ".gitmodules").write_text('[submodule "third_party/Megatron-LM"]\n\tpath = third_party/Megatron-LM\n')
    # A linked worktree has a .git file pointing at its git directory, as a submodule has.
    _git(tmp_path / "megatron-src", "worktree", "add", "-q", "--detach", str(primus / "third_party" / "Megatron-LM"))
    commits = checkout_commits([primus, tmp_path / "not-a-checkout"])
    assert commits == {str(primus): primus_head, str(primus / "third_party" / "Megatron-LM"): megatron}


def test_the_container_is_named_by_the_environment(monkeypatch):
    monkeypatch.setenv("TPRIMAT_CONTAINER_IMAGE", "registry.example/tprimat:amd")
    monkeypatch.setenv("TPRIMAT_CONTAINER_DIGEST", "sha256:" + "a" * 64)
    monkeypatch.setenv("TPRIMAT_BASE_IMAGE", "rocm/primus:v26.5")
    manifest = capture_manifest(PlatformInfo(platform="cpu", source="test"), tags={"team": "perf"}, launcher="x")
    software = manifest.software
    assert software.container_image == "registry.example/tprimat:amd"
    assert software.container_digest == "sha256:" + "a" * 64
    assert software.container_base_image == "rocm/primus:v26.5"
    assert software.extra == _installed(FRAMEWORK_PACKAGES)  # framework package versions
    assert (manifest.tags, manifest.launcher) == ({"team": "perf"}, "x")


def _installed(names):
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        (["/venv/bin/python3", "-m", "torch.distributed.run", "--nproc-per-node", "8"], "torchrun"),
        (["/usr/local/bin/torchrun", "--nnodes", "2", "pretrain_gpt.py"], "torchrun"),
        (["bash", "examples/run_pretrain.sh"], "bash"),
        (["python", "-m", "nemo_run"], "nemo_run"),
        ([], None),
    ],
)
def test_the_launcher_is_named_by_what_the_plan_starts(argv, launcher):
    assert launcher_of(argv) == launcher


def test_tags_are_key_value_and_a_bad_one_is_a_usage_error():
    assert parse_tags(None, None, ("team=perf", "note=a=b", "empty=")) == {"team": "perf", "note": "a=b", "empty": ""}
    for bad in (("novalue",), ("=x",), ("a key=x",), ("k=1", "k=2")):
        with pytest.raises(click.BadParameter):
            parse_tags(None, None, bad)
    done = CliRunner().invoke(cli, ["run", "--tag", "novalue", "--dry-run"])
    assert done.exit_code == 2 and "KEY=VALUE" in done.output


class CountingNvml:
    """Eight GPUs whose NVML energy counters rise 400 J per second of the test clock, power reading 100 W."""

    name = "nvml"
    counter_source = "nvml energy counter (mJ)"

    def __init__(self) -> None:
        self.started = self.now = None

    def read(self):
        import time

        self.now = time.time()  # the monitor stamps the sample with this instant (its clock)
        self.started = self.started or self.now
        counter = round((self.now - self.started) * 400_000)
        return [
            GpuReading(index=i, power_w=100.0, energy_counter=counter, energy_counter_unit_j=1e-3) for i in range(8)
        ]

    def close(self):
        pass


@pytest.mark.slow
@pytest.mark.parametrize(("options", "status"), [({"code": 3}, "failed"), ({"hang_after": 2}, "failed")])
def test_a_failed_run_writes_a_result_that_validates(tmp_path, options, status):
    jsonschema = pytest.importorskip("jsonschema")
    from tprimat.result.jsonschema import result_json_schema

    registry = make_registry()
    extra = ("launch.timeout_s=2",) if "hang_after" in options else ()
    run(prepare(request(tmp_path, *extra, **options), registry), registry)
    path = tmp_path / "runs" / "r1" / "result.json"
    assert load_result(path).run.status == status
    jsonschema.validate(json.loads(path.read_text()), result_json_schema())


@pytest.mark.slow
def test_a_run_records_its_provenance_from_manifest_to_results_csv(tmp_path, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    from tprimat.result.jsonschema import result_json_schema

    monkeypatch.setenv("TPRIMAT_CONTAINER_IMAGE", "tprimat:nvd")
    monkeypatch.setenv("TPRIMAT_CONTAINER_DIGEST", "sha256:" + "b" * 64)
    registry = make_registry()
    prepared = prepare(attrs.evolve(request(tmp_path, sleep=0.05), tags={"team": "perf", "rack": "B7"}), registry)
    nvml = CountingNvml()
    outcome = run(
        prepared, registry, monitor_factory=lambda p: GpuMonitor(nvml, interval_s=0.01, clock=lambda: nvml.now)
    )
    run_dir = tmp_path / "runs" / "r1"
    manifest = load_manifest(run_dir / "manifest.json")
    assert manifest.tags == {"team": "perf", "rack": "B7"}
    assert manifest.launcher == Path(sys.executable).name and manifest.deployment == "local"  # `python -c JOB`
    result = load_result(run_dir / "result.json")
    assert result.run.tags == manifest.tags and result.run.launcher == manifest.launcher
    assert result.software.container_digest == "sha256:" + "b" * 64
    assert result.software.tprimat_commit == manifest.software.tprimat_commit
    # 8 GPUs x 400 J/s by the counters (the power readings would say 800 W): the counters were used.
    assert result.summary.energy_source == "nvml energy counter (mJ)"
    for record in result.iterations:
        assert record.energy_j == pytest.approx(3200.0 * record.step_time_s, rel=1e-3)
    jsonschema.validate(json.loads((run_dir / "result.json").read_text()), result_json_schema())
    assert outcome.result.summary.energy_source == result.summary.energy_source

    comparison = build_comparison([run_dir / "result.json"], cost=load_config().cost)
    written = write_report(comparison, tmp_path / "report", formats=["csv"])
    (row,) = csv.DictReader(written["results.csv"].open())
    assert row["tags"] == "rack=B7,team=perf"
    assert (row["docker_image"], row["docker_sha"]) == ("tprimat:nvd", "sha256:" + "b" * 64)
    assert row["git_commit"] == (result.software.tprimat_commit or "")
    assert row["launcher"] == result.run.launcher and row["deployment_type"] == "local"
    assert row["energy_source"] == "nvml energy counter (mJ)"


def test_suite_tags_reach_every_run_and_survive_a_resume(tmp_path):
    from tests.core.test_suite import SUITE
    from tprimat.suite.campaign import SuiteLaunch

    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(SUITE)
    dry = CliRunner().invoke(cli, ["suite", "run", str(suite_file), "--dry-run", "--tag", "campaign=q4"])
    assert dry.exit_code == 0, dry.output
    commands = [line for line in dry.output.splitlines() if line.startswith("  ")]
    assert commands and all("--tag campaign=q4" in line for line in commands)
    SuiteLaunch(strict=True, tags=(("campaign", "q4"),)).save(tmp_path)
    assert SuiteLaunch.load(tmp_path).tags == (("campaign", "q4"),)
