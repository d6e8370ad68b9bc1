"""Run a benchmark on Kubernetes as a JobSet: render the manifest, apply it, follow it, collect.

Why a JobSet (``jobset.x-k8s.io/v1alpha2``, kubernetes-sigs/jobset): NVIDIA's
NeMo-Run (``KubeflowExecutor``) and Kubeflow's guide for PyTorch on AMD ROCm
both submit Kubeflow Trainer ``TrainJob`` objects, and Kubeflow Trainer runs
every TrainJob as a JobSet.  Rendering the JobSet itself needs only the JobSet
controller (no cluster-specific training runtime), and tprimat's node command
does its own rendezvous, exactly as under SLURM:

* one replicated job ``node`` of ``N`` indexed pods (``completionMode: Indexed``),
  one pod per node, each asking for the node's GPUs (``amd.com/gpu`` or
  ``nvidia.com/gpu``);
* ``NODE_RANK`` is the pod's completion index (downward API), ``NNODES`` is N,
  ``MASTER_ADDR`` the stable DNS name JobSet gives pod 0
  (``<name>-node-0-0.<name>``);
* each pod runs the image's ``tprimat run … --node-rank $(NODE_RANK) …``
  (Kubernetes expands ``$(VAR)`` in container arguments), with SLURM's
  internal node flag and ``TPRIMAT_DEPLOYMENT=k8s``, so its result's
  ``run.deployment`` is ``k8s``.

The run directory lives on a volume mounted at the ``--output`` path: a
PersistentVolumeClaim (shared by the pods, and kept) or, without one, each
pod's own ``emptyDir``.  Node 0 prints its ``result.json`` between two marker
lines at the end of its log, so the submitting machine collects the result
with ``kubectl logs`` whether or not it sees the volume.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.running.container import VENDORS, pinned_digest

API_VERSION = "jobset.x-k8s.io/v1alpha2"
MANIFEST_FILE = "k8s_jobset.yaml"
PODS_FILE = "k8s_pods.json"
REPLICATED_JOB = "node"
GPU_RESOURCES = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
CONFIG_DIR = "/etc/tprimat/config"
RESULT_BEGIN = "=== tprimat result.json begin ==="
RESULT_END = "=== tprimat result.json end ==="
POLL_S = 5.0  # between two ``kubectl get jobset`` while following
PLACEHOLDERS = {
    "node_rank": "NODE_RANK",
    "nnodes": "NNODES",
    "master_addr": "MASTER_ADDR",
    "master_port": "MASTER_PORT",
}
#: The pod's entry: the node command, then (node 0) its result between the markers; the exit status is the run's.
ENTRY = (
    '"$@" && status=0 || status=$?\n'
    'result="${TPRIMAT_RUN_DIR}/result.json"\n'
    'if [ "${NODE_RANK}" = 0 ] && [ -f "${result}" ]; then\n'
    f'    echo "{RESULT_BEGIN}"; cat "${{result}}"; echo; echo "{RESULT_END}"\n'
    "fi\n"
    'exit "${status}"\n'
)


class K8sError(TprimatError):
    """kubectl missing, a refused manifest, or a job that cannot be followed."""


def _dns_label(value: str) -> str:
    """A name Kubernetes accepts for the JobSet (and its pods' host names)."""
    label = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    label = ("tprimat-" + label)[:40].rstrip("-")
    return label


@attrs.frozen(kw_only=True)
class K8sOptions:
    """What ``tprimat run --k8s`` asks of the cluster."""

    run_id: str
    image: str = attrs.field(validator=attrs.validators.min_len(1))
    gpu_vendor: str = attrs.field(validator=attrs.validators.in_(VENDORS))
    nodes: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    gpus_per_node: int | None = None
    namespace: str | None = None
    volume_claim: str | None = None
    secret: str | None = None

    @property
    def name(self) -> str:
        return _dns_label(self.run_id)


@attrs.frozen(kw_only=True)
class K8sJobResult:
    name: str
    state: str
    logs: tuple[Path, ...]
    result_path: Path | None

    @property
    def ok(self) -> bool:
        return self.state == "Completed"


def _arg(word: str) -> str:
    """One container argument: ``$(`` kept literal, placeholders as Kubernetes variable references."""
    word = word.replace("$(", "$$(")
    for key, var in PLACEHOLDERS.items():
        word = word.replace("{" + key + "}", f"$({var})")
    return word


def render_manifests(
    node_command: Sequence[str],
    *,
    options: K8sOptions,
    run_dir: Path,
    master_port: int,
    config_file: Path | None = None,
) -> list[dict[str, Any]]:
    """The documents to apply: a ConfigMap with the config file (when one is given), then the JobSet.

    ``node_command`` refers to the config file by its path on this machine; in the pods it is
    the ConfigMap's copy under ``/etc/tprimat/config``.
    """
    if not node_command:
        raise K8sError("the node command is empty")
    name, run_dir = options.name, Path(run_dir)
    labels = {"app.kubernetes.io/managed-by": "tprimat", "app.kubernetes.io/instance": name}
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if options.namespace:
        metadata["namespace"] = options.namespace
    documents: list[dict[str, Any]] = []
    command = list(node_command)
    mounts: list[dict[str, Any]] = [
        {"name": "runs", "mountPath": str(run_dir.parent)},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "runs", **_runs_volume(options.volume_claim)},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},  # the default 64 MiB /dev/shm is too small for NCCL/RCCL
    ]
    if config_file is not None:
        config_file = Path(config_file)
        config_name = f"{name}-config"
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {**metadata, "name": config_name},
                "data": {config_file.name: config_file.read_text(encoding="utf-8")},
            }
        )
        inside = f"{CONFIG_DIR}/{config_file.name}"
        command = [inside if word == str(config_file) else word for word in command]
        mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": config_name}})
    env: list[dict[str, Any]] = [
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}},
        {"name": "NNODES", "value": str(options.nodes)},
        {"name": "MASTER_ADDR", "value": f"{name}-{REPLICATED_JOB}-0-0.{name}"},
        {"name": "MASTER_PORT", "value": str(int(master_port))},
        {"name": "TPRIMAT_RUN_DIR", "value": str(run_dir)},
        {"name": "TPRIMAT_CONTAINER_IMAGE", "value": options.image},
        # The pods run with SLURM's node flag; this makes their result's run.deployment "k8s".
        {"name": "TPRIMAT_DEPLOYMENT", "value": "k8s"},
    ]
    digest = pinned_digest(options.image)
    if digest:
        env.append({"name": "TPRIMAT_CONTAINER_DIGEST", "value": digest})
    container: dict[str, Any] = {
        "name": "tprimat",
        "image": options.image,
        "command": ["bash", "-c", ENTRY, "tprimat-node"],
        "args": [_arg(word) for word in command],
        "env": env,
        "volumeMounts": mounts,
    }
    if options.secret:  # e.g. HF_TOKEN: from a Secret, never written into the manifest
        container["envFrom"] = [{"secretRef": {"name": options.secret}}]
    resource = GPU_RESOURCES.get(options.gpu_vendor)
    if resource and options.gpus_per_node:
        container["resources"] = {
            "limits": {resource: options.gpus_per_node},
            "requests": {resource: options.gpus_per_node},
        }
    pod_spec = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
    jobset = {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "failurePolicy": {"maxRestarts": 0},  # a benchmark that failed is reported, not retried
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": options.nodes,
                            "completions": options.nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                        }
                    },
                }
            ],
        },
    }
    return [*documents, jobset]


def _runs_volume(claim: str | None) -> dict[str, Any]:
    if claim:
        return {"persistentVolumeClaim": {"claimName": claim}}
    return {"emptyDir": {}}


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors, multi-line text (the entry script, a config) as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _text)


def dump_manifests(documents: Sequence[dict[str, Any]]) -> str:
    """The documents as one multi-document YAML text, as ``kubectl apply -f`` reads it."""
    return yaml.dump_all(list(documents), Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _kubectl(args: Sequence[str], namespace: str | None) -> subprocess.CompletedProcess[str]:
    program = shutil.which("kubectl")
    if program is None:
        raise K8sError(
            "kubectl not found on PATH: install it and point it at the cluster (--dry-run prints the manifest)"
        )
    scope = ["--namespace", namespace] if namespace else []
    return subprocess.run([program, *scope, *args], capture_output=True, text=True, check=False)


def apply(documents: Sequence[dict[str, Any]], *, run_dir: Path, namespace: str | None) -> Path:
    """Write the manifest into the run directory and ``kubectl apply`` it."""
    path = Path(run_dir) / MANIFEST_FILE
    atomic_write_text(path, dump_manifests(documents))
    done = _kubectl(["apply", "-f", str(path)], namespace)
    if done.returncode != 0:
        raise K8sError(f"kubectl apply refused the manifest: {done.stderr.strip() or done.stdout.strip()}")
    return path


def jobset_state(name: str, namespace: str | None) -> str | None:
    """``Completed``/``Failed`` once ended, ``Suspended``, ``Running`` or ``Pending`` before; None if unknown."""
    done = _kubectl(["get", "jobset", name, "-o", "json"], namespace)
    if done.returncode != 0:
        return None
    try:
        obj = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    status = obj.get("status") or {}
    if status.get("terminalState"):
        return str(status["terminalState"])
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Completed", "Failed"):
            return str(condition["type"])
    if (obj.get("spec") or {}).get("suspend"):
        return "Suspended"
    active = sum(int(job.get("active") or 0) for job in status.get("replicatedJobsStatus") or [])
    return "Running" if active else "Pending"


def delete(name: str, namespace: str | None) -> None:
    """Delete the JobSet (its pods go with it); a ConfigMap beside it is kept with the run's manifest."""
    _kubectl(["delete", "jobset", name, "--wait=false"], namespace)


def collect(name: str, *, run_dir: Path, namespace: str | None) -> tuple[tuple[Path, ...], Path | None]:
    """Each pod's log as ``k8s-node<R>.log``, the pods' status (image IDs) and node 0's result."""
    run_dir = Path(run_dir)
    listed = _kubectl(["get", "pods", "-l", f"{NAME_LABEL}={name}", "-o", "json"], namespace)
    if listed.returncode != 0:
        raise K8sError(f"kubectl get pods failed: {listed.stderr.strip()}")
    atomic_write_text(run_dir / PODS_FILE, listed.stdout)
    logs: list[Path] = []
    result_path = None
    for pod in json.loads(listed.stdout).get("items") or []:
        meta = pod.get("metadata") or {}
        rank = (meta.get("annotations") or {}).get(INDEX_ANNOTATION, meta.get("name", "unknown"))
        text = _kubectl(["logs", meta.get("name", "")], namespace)
        path = run_dir / f"k8s-node{rank}.log"
        atomic_write_text(path, text.stdout if text.returncode == 0 else text.stderr)
        logs.append(path)
        found = result_from_log(text.stdout) if str(rank) == "0" and text.returncode == 0 else None
        if found is not None:
            result_path = run_dir / "result.json"
            atomic_write_text(result_path, found)
    return tuple(sorted(logs)), result_path


def result_from_log(text: str) -> str | None:
    """Node 0's ``result.json`` from between the markers of its log (the last block), else None."""
    begin = text.rfind(RESULT_BEGIN + "\n")
    end = text.find("\n" + RESULT_END, begin)
    if begin < 0 or end < 0:
        return None
    return text[begin + len(RESULT_BEGIN) + 1 : end].rstrip("\n") + "\n"


def follow(
    name: str,
    *,
    run_dir: Path,
    namespace: str | None,
    poll_s: float | None = None,
    timeout_s: float = 0,
    on_state: Callable[[str], None] | None = None,
) -> K8sJobResult:
    """Poll the JobSet until it ends (``timeout_s`` > 0: delete it after that long), then collect."""
    started = time.monotonic()
    last = None
    while True:
        state = jobset_state(name, namespace)
        if state is not None and state != last and on_state is not None:
            on_state(state)
        last = state or last
        if state in ("Completed", "Failed"):
            break
        if state is None and last is not None:  # deleted while it ran (kubectl delete, a cluster clean-up)
            state = "Deleted"
            break
        if last is None and time.monotonic() - started > 60:
            raise K8sError(f"JobSet {name} is unknown to the cluster (kubectl get jobset {name})")
        if timeout_s and time.monotonic() - started > timeout_s:
            delete(name, namespace)
            state = "Timeout"
            break
        time.sleep(POLL_S if poll_s is None else poll_s)
    logs, result_path = collect(name, run_dir=run_dir, namespace=namespace)
    return K8sJobResult(name=name, state=state or "Unknown", logs=logs, result_path=result_path)
