"""The JobSet manifests ``tprimat run --k8s`` renders, validated against JobSet's published CRD schema.

The schema is the OpenAPI v3 schema of the JobSet CustomResourceDefinition of
kubernetes-sigs/jobset v0.12.0 (tests/fixtures/k8s/PROVENANCE.md).  The API
server drops fields a structural schema does not declare, so every object that
declares its properties is closed here (``additionalProperties: false``): a
misspelt or misplaced field fails the test instead of vanishing on the cluster.
"""

from __future__ import annotations

import copy
import functools
import gzip
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tprimat.running import k8s
from tprimat.running.runner import DEPLOYMENT_VARIABLE, deployment_of
from tprimat.running.slurm import tprimat_node_command

CRD = Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "jobset.x-k8s.io_jobsets.yaml.gz"


def _closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others, as the API server prunes."""
    if isinstance(schema, dict):
        schema = {key: _closed(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


@functools.cache
def jobset_schema() -> dict[str, Any]:
    crd = yaml.load(gzip.decompress(CRD.read_bytes()), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["group"] == "jobset.x-k8s.io" and crd["spec"]["names"]["kind"] == "JobSet"
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    assert f"{crd['spec']['group']}/{version['name']}" == k8s.API_VERSION
    return _closed(version["schema"]["openAPIV3Schema"])


def validate(document: dict[str, Any]) -> None:
    jsonschema.validate(document, jobset_schema(), cls=jsonschema.Draft4Validator)


def _render(tmp_path: Path, **given: Any) -> list[dict[str, Any]]:
    config = tmp_path / "bench.toml"
    config.write_text('[training]\nseq_length = 4096\n# "$(not a variable)"\n')
    options = k8s.K8sOptions(run_id="20261128-0712-amd_primus-Llama3.1-8B", **given)
    args = ["--backend", "amd_primus", "--config", str(config), "--output", "/runs", "--run-id", options.run_id]
    text = k8s.dump_manifests(
        k8s.render_manifests(
            tprimat_node_command([*args, "--slurm-node"]),
            options=options,
            run_dir=Path("/runs") / options.run_id,
            master_port=29500,
            config_file=config,
        )
    )
    return list(yaml.safe_load_all(text))  # what kubectl reads


@pytest.mark.parametrize(
    ("vendor", "image", "resource"),
    [
        ("amd", "docker.io/rocm/primus:v26.5", "amd.com/gpu"),
        ("nvidia", "nvcr.io/nvidia/nemo:25.09", "nvidia.com/gpu"),
    ],
)
def test_the_jobset_of_each_vendor_matches_the_published_schema(tmp_path, vendor, image, resource):
    config_map, jobset = _render(
        tmp_path, image=image, gpu_vendor=vendor, nodes=4, gpus_per_node=8, namespace="bench", secret="hf"
    )
    validate(jobset)
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and jobset["kind"] == "JobSet"
    name = jobset["metadata"]["name"]
    assert name == "tprimat-20261128-0712-amd-primus-llama3"  # a DNS label, cut to 40 characters
    (node,) = jobset["spec"]["replicatedJobs"]
    job = node["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (4, 4, "Indexed")
    (container,) = job["template"]["spec"]["containers"]
    assert container["image"] == image
    assert container["resources"]["limits"] == {resource: 8} == container["resources"]["requests"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["MASTER_ADDR"] == f"{name}-node-0-0.{name}" and env["NNODES"] == "4"
    assert env["TPRIMAT_CONTAINER_IMAGE"] == image
    assert env[DEPLOYMENT_VARIABLE] == "k8s"  # what the pod's run records as run.deployment
    assert container["envFrom"] == [{"secretRef": {"name": "hf"}}]
    # The same node command as under SLURM, with the rendezvous as Kubernetes variable references.
    assert container["args"][:2] == ["tprimat", "run"]
    assert container["args"][-8:] == [
        "--nnodes",
        "$(NNODES)",
        "--node-rank",
        "$(NODE_RANK)",
        "--master-addr",
        "$(MASTER_ADDR)",
        "--master-port",
        "$(MASTER_PORT)",
    ]
    assert "/etc/tprimat/config/bench.toml" in container["args"]
    assert config_map["kind"] == "ConfigMap" and "$(not a variable)" in config_map["data"]["bench.toml"]
    assert config_map["metadata"]["namespace"] == jobset["metadata"]["namespace"] == "bench"


def test_a_pinned_image_records_its_digest_and_a_claim_holds_the_runs(tmp_path):
    digest = "sha256:" + "0f" * 32
    *_, jobset = _render(tmp_path, image=f"rocm/primus@{digest}", gpu_vendor="amd", volume_claim="bench-runs")
    validate(jobset)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["TPRIMAT_CONTAINER_DIGEST"] == digest
    runs = next(v for v in pod["volumes"] if v["name"] == "runs")
    assert runs == {"name": "runs", "persistentVolumeClaim": {"claimName": "bench-runs"}}
    assert "resources" not in pod["containers"][0]  # no --gpus-per-node: the scheduler is not asked for GPUs


def test_the_schema_catches_what_the_api_server_would_drop_or_refuse(tmp_path):
    *_, jobset = _render(tmp_path, image="rocm/primus:v26.5", gpu_vendor="amd", gpus_per_node=8)
    misplaced = copy.deepcopy(jobset)
    misplaced["spec"]["replicatedJobs"][0]["parallelism"] = 4  # belongs to the Job template's spec
    with pytest.raises(jsonschema.ValidationError, match="parallelism"):
        validate(misplaced)
    misspelt = copy.deepcopy(jobset)
    pod = misspelt["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["volumeMount"] = pod["containers"][0].pop("volumeMounts")
    with pytest.raises(jsonschema.ValidationError, match="volumeMount"):
        validate(misspelt)
    wrong = copy.deepcopy(jobset)
    wrong["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = "4"
    with pytest.raises(jsonschema.ValidationError, match="'4' is not of type 'integer'"):
        validate(wrong)


def test_the_entry_prints_node_zeros_result_between_markers_and_keeps_the_exit_status(tmp_path):
    import subprocess

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_text('{\n  "schema_version": 1\n}\n')
    base = {"PATH": "/usr/bin:/bin", "TPRIMAT_RUN_DIR": str(run_dir)}
    ok = subprocess.run(
        ["bash", "-c", k8s.ENTRY, "tprimat-node", "echo", "trained"],
        env={**base, "NODE_RANK": "0"},
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0
    assert ok.stdout.startswith("trained\n")
    assert k8s.result_from_log(ok.stdout) == '{\n  "schema_version": 1\n}\n'
    other = subprocess.run(
        ["bash", "-c", k8s.ENTRY, "tprimat-node", "bash", "-c", "exit 3"],
        env={**base, "NODE_RANK": "1"},
        capture_output=True,
        text=True,
    )
    assert other.returncode == 3 and k8s.RESULT_BEGIN not in other.stdout


@pytest.mark.parametrize(
    ("in_node_job", "environ", "deployment"),
    [
        (False, {}, "local"),
        (False, {DEPLOYMENT_VARIABLE: "k8s"}, "local"),  # only a node of a scheduled job asks
        (True, {}, "slurm"),
        (True, {DEPLOYMENT_VARIABLE: "k8s"}, "k8s"),
        (True, {DEPLOYMENT_VARIABLE: "elsewhere"}, "slurm"),  # no value but the pods' own is taken
    ],
)
def test_a_node_run_records_the_scheduler_that_started_it(in_node_job, environ, deployment):
    assert deployment_of(in_node_job, environ) == deployment
