"""``tprimat run --k8s``: the manifest it prints, and the apply/follow/collect path against a stand-in kubectl.

No cluster is started: ``tests/cli/fake_kubectl.py`` is first on PATH as
``kubectl``; it records every call and runs the applied JobSet's pods on this
machine, each with a run directory of its own that the submitting command never
sees, so the result can only come back through node 0's log.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.cli.test_run_slurm import TINY
from tests.core.export.trackers import require
from tests.core.test_k8s_manifest import validate
from tprimat.cli import cli
from tprimat.contract.registry import Registry
from tprimat.result.schema import load_result
from tprimat.running import k8s

FAKE = Path(__file__).with_name("fake_kubectl.py")


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The stand-in kubectl first on PATH; returns a reader of the calls it received."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "kubectl"
    program.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    program.chmod(0o755)
    state = tmp_path / "cluster"
    state.mkdir()
    log = tmp_path / "kubectl.jsonl"
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_KUBECTL_STATE", str(state))
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    monkeypatch.setattr(k8s, "POLL_S", 0.01)
    monkeypatch.chdir(tmp_path)

    def calls() -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return calls


def _standin_tprimat(tmp_path: Path, body: str) -> None:
    """The image's ``tprimat``: a script first on PATH."""
    program = tmp_path / "bin" / "tprimat"
    program.write_text(f"#!/bin/bash\n{body}\n")
    program.chmod(0o755)


@pytest.mark.parametrize(
    ("backend", "image", "resource"),
    [
        ("amd_primus", "docker.io/rocm/primus:v26.5", "amd.com/gpu"),
        ("nvd_nemo", "nvcr.io/nvidia/nemo:25.09", "nvidia.com/gpu"),
    ],
)
def test_dry_run_prints_a_jobset_the_schema_accepts(tmp_path, monkeypatch, backend, image, resource):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "bench.toml"
    config.write_text("[training]\nseq_length = 4096\n")
    out = CliRunner().invoke(
        cli,
        [
            "run",
            "--k8s",
            "--backend",
            backend,
            "--config",
            str(config),
            "--container-image",
            image,
            "--nodes",
            "2",
            "--gpus-per-node",
            "8",
            "--namespace",
            "bench",
            "--run-id",
            "r1",
            "--dry-run",
        ],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    header, _, text = out.output.partition("\n")
    assert header == f"# Kubernetes JobSet for run r1 (nothing applied): {tmp_path / 'runs' / 'r1' / 'k8s_jobset.yaml'}"
    config_map, jobset = yaml.safe_load_all(text)
    validate(jobset)
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == image and container["resources"]["limits"] == {resource: 8}
    assert container["args"][:4] == ["tprimat", "run", "--backend", backend]
    assert "--nproc-per-node" in container["args"] and "8" in container["args"]  # --gpus-per-node sets it
    assert config_map["data"] == {"bench.toml": config.read_text()}
    assert not (tmp_path / "runs").exists()


def test_a_failing_jobset_is_followed_collected_and_exit_1(cluster, tmp_path, monkeypatch):
    _standin_tprimat(tmp_path, 'echo "node ${NODE_RANK} of ${NNODES}: $*"; exit 3')
    monkeypatch.setenv("FAKE_KUBECTL_PENDING", "1")
    out = CliRunner().invoke(
        cli,
        ["run", "--k8s", "--container-image", "rocm/primus:v26.5", "--backend", "amd_primus", "--nodes", "2"]
        + ["--namespace", "bench", "--run-id", "bad"],
        catch_exceptions=False,
    )
    assert out.exit_code == 1, out.output
    name = "tprimat-bad"
    lines = out.output.splitlines()
    assert [line for line in lines if line.startswith(f"JobSet {name}: ")] == [
        f"JobSet {name}: Pending",
        f"JobSet {name}: Running",
        f"JobSet {name}: Failed",
    ]
    assert lines[-1] == f"JobSet {name} ended Failed without a result in node 0's log"
    run_dir = tmp_path / "runs" / "bad"
    node1 = (run_dir / "k8s-node1.log").read_text()
    assert node1.startswith("node 1 of 2: run --backend amd_primus --output ")
    assert node1.rstrip().endswith("--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port 29500")
    pods = json.loads((run_dir / "k8s_pods.json").read_text())
    assert pods["items"][0]["status"]["containerStatuses"][0]["imageID"].startswith("rocm/primus:v26.5@sha256:")
    calls = cluster()
    assert calls[0] == ["--namespace", "bench", "apply", "-f", str(run_dir / "k8s_jobset.yaml")]
    assert calls.count(["--namespace", "bench", "get", "jobset", name, "-o", "json"]) == 3
    assert ["--namespace", "bench", "logs", f"{name}-node-0-1-x1k9z"] in calls
    validate(list(yaml.safe_load_all((run_dir / "k8s_jobset.yaml").read_text()))[-1])


def test_a_jobset_that_outlives_the_timeout_is_deleted(cluster, tmp_path, monkeypatch):
    _standin_tprimat(tmp_path, "exit 0")
    monkeypatch.setenv("FAKE_KUBECTL_HANG", "1")
    options = k8s.K8sOptions(run_id="hang", image="rocm/primus:v26.5", gpu_vendor="amd")
    run_dir = tmp_path / "runs" / "hang"
    run_dir.mkdir(parents=True)
    documents = k8s.render_manifests(["tprimat", "run"], options=options, run_dir=run_dir, master_port=29500)
    k8s.apply(documents, run_dir=run_dir, namespace=None)
    ended = k8s.follow(options.name, run_dir=run_dir, namespace=None, poll_s=0.01, timeout_s=0.2)
    assert ended.state == "Timeout" and not ended.ok
    assert ["delete", "jobset", "tprimat-hang", "--wait=false"] in cluster()


def test_no_kubectl_and_no_image_are_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    out = CliRunner().invoke(cli, ["run", "--k8s", "--container-image", "rocm/primus:v26.5", "--backend", "amd_primus"])
    assert (out.exit_code, out.output.strip()) == (
        2,
        "Error: kubectl not found on PATH: install it and point it at the cluster (--dry-run prints the manifest)",
    )
    out = CliRunner().invoke(cli, ["run", "--k8s", "--backend", "amd_primus", "--dry-run"])
    assert out.exit_code == 2
    assert out.output.strip() == (
        "Error: --k8s runs the image's tprimat on every node: give the image with --container-image"
    )
    out = CliRunner().invoke(cli, ["run", "--k8s", "--container-image", "x", "--backend", "torch", "--dry-run"])
    assert out.exit_code == 2 and "--gpu-vendor amd|nvidia|none" in out.output
    out = CliRunner().invoke(cli, ["run", "--k8s", "--partition", "p", "--container-image", "x", "--dry-run"])
    assert (out.exit_code, out.output.strip()) == (2, "Error: --partition: only with --slurm")
    out = CliRunner().invoke(cli, ["run", "--namespace", "n", "--dry-run"])
    assert (out.exit_code, out.output.strip()) == (2, "Error: --namespace: only with --k8s")
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.torch
def test_a_real_run_in_the_stand_in_cluster_returns_node_zeros_result_through_its_log(cluster, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = CliRunner().invoke(
        cli,
        ["run", "--k8s", "--container-image", "tprimat:cpu", "--gpu-vendor", "none", "--run-id", "job", *TINY],
        catch_exceptions=False,
    )
    run_dir = tmp_path / "runs" / "job"
    assert out.exit_code == 0, (out.output, [p.read_text() for p in run_dir.glob("k8s-*.log")])
    assert "JobSet tprimat-job ended Completed; result: " in out.output
    # The pod wrote its run directory on its own volume; the result came back through its log, byte for byte.
    pod_result = next((tmp_path / "cluster" / "pod0").rglob("runs/job/result.json"))
    assert (run_dir / "result.json").read_bytes() == pod_result.read_bytes()
    assert not (run_dir / "manifest.json").exists()  # the rest of the run directory stayed on the pod's volume
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and result.config.world_size == 2
    assert [r.iteration for r in result.iterations] == [1, 2, 3, 4]
    manifest = json.loads(pod_result.with_name("manifest.json").read_text())
    assert manifest["software"]["container_image"] == result.software.container_image == "tprimat:cpu"
    assert manifest["deployment"] == result.run.deployment == "k8s"


def test_a_pods_run_says_it_ran_on_kubernetes_and_its_result_is_exported_here(cluster, tmp_path):
    if "toy" not in Registry.from_environment().backends():
        pytest.skip("the example plugin is not installed (pip install ./tests/example_plugin)")
    require("tensorboard")
    logdir = tmp_path / "tb"
    out = CliRunner().invoke(
        cli,
        ["run", "--k8s", "--container-image", "tprimat:cpu", "--gpu-vendor", "none", "--backend", "toy"]
        + ["--iterations", "4", "--run-id", "job", "--report-to", f"tensorboard={logdir}"],
        catch_exceptions=False,
    )
    run_dir = tmp_path / "runs" / "job"
    assert out.exit_code == 0, (out.output, [p.read_text() for p in run_dir.glob("k8s-*.log")])
    result = load_result(run_dir / "result.json")
    assert result.run.status == "completed" and result.run.deployment == "k8s"
    assert f"exported to tensorboard: tensorboard events in {logdir}/tprimat/job" in out.output
    assert (logdir / "tprimat" / "job").is_dir()
    pod_command = yaml.safe_load_all((run_dir / k8s.MANIFEST_FILE).read_text())
    assert not any("--report-to" in str(document) for document in pod_command)  # the pods never export


def test_a_jobset_deleted_while_it_runs_ends_the_follow(cluster, tmp_path, monkeypatch):
    _standin_tprimat(tmp_path, "exit 0")
    monkeypatch.setenv("FAKE_KUBECTL_HANG", "1")
    options = k8s.K8sOptions(run_id="gone", image="nvcr.io/nvidia/nemo:25.09", gpu_vendor="nvidia")
    run_dir = tmp_path / "runs" / "gone"
    run_dir.mkdir(parents=True)
    k8s.apply(
        k8s.render_manifests(["tprimat", "run"], options=options, run_dir=run_dir, master_port=29500),
        run_dir=run_dir,
        namespace=None,
    )
    states: list[str] = []

    def deleted_by_someone(state: str) -> None:
        states.append(state)
        (tmp_path / "cluster" / "deleted").write_text("")  # `kubectl delete` from elsewhere

    ended = k8s.follow(options.name, run_dir=run_dir, namespace=None, poll_s=0.01, on_state=deleted_by_someone)
    assert states == ["Running"] and ended.state == "Deleted" and not ended.ok
