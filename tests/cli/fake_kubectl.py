"""A stand-in ``kubectl`` for tests: records its argv, runs the applied JobSet's pods here, reports states.

It reads what ``tprimat run --k8s`` applies and plays the cluster's part:

* ``apply -f FILE``: keeps the documents and runs every pod of the JobSet's
  replicated job, one after the other, as the kubelet would start them: the
  container's ``command`` + ``args`` with ``$(VAR)`` expanded from its ``env``,
  ``NODE_RANK`` from the completion index, the ``runs`` volume mounted at a
  directory of the pod's own (its mount path rewritten to it: an ``emptyDir``
  the submitting machine never sees), the ConfigMap's files at their mount
  path rewritten the same way, and the JobSet's DNS name of pod 0 resolving to
  127.0.0.1;
* ``get jobset NAME -o json``: ``Pending`` for the first ``$FAKE_KUBECTL_PENDING``
  calls, then ``Running`` once, then ``Completed`` if every pod exited 0, else
  ``Failed`` (``$FAKE_KUBECTL_HANG=1``: ``Running`` for ever);
* ``get pods -l …``, ``logs POD``, ``delete jobset NAME``.

Every call's argv is appended as a JSON line to ``$FAKE_KUBECTL_LOG``; its state
lives in ``$FAKE_KUBECTL_STATE``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

STATE = Path(os.environ["FAKE_KUBECTL_STATE"])


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: ``$$`` is a literal ``$``, unknown references stay as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def _local(text: str, moved: dict[str, str]) -> str:
    """A path inside the pod as the directory that stands for its volume here."""
    for inside, local in moved.items():
        text = text.replace(inside, local)
    return text


def _run_pods(documents: list[dict]) -> None:
    jobset = next(d for d in documents if d["kind"] == "JobSet")
    config_maps = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ConfigMap"}
    name = jobset["metadata"]["name"]
    (replicated,) = jobset["spec"]["replicatedJobs"]
    job = replicated["template"]["spec"]
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    pods = []
    for rank in range(job["completions"]):
        root = STATE / f"pod{rank}"
        moved: dict[str, str] = {}
        for mount in container["volumeMounts"]:
            volume = volumes[mount["name"]]
            if mount["name"] == "dshm":
                continue
            local = root / mount["mountPath"].lstrip("/")
            local.mkdir(parents=True, exist_ok=True)
            moved[mount["mountPath"]] = str(local)
            if "configMap" in volume:
                for key, text in config_maps[volume["configMap"]["name"]]["data"].items():
                    (local / key).write_text(text)

        env = {**os.environ}
        for item in container["env"]:
            if "valueFrom" in item:
                assert item["valueFrom"]["fieldRef"]["fieldPath"].endswith(
                    "['batch.kubernetes.io/job-completion-index']"
                )
                env[item["name"]] = str(rank)
            else:
                env[item["name"]] = _local(_expand(item["value"], env), moved)
        assert env["MASTER_ADDR"] == f"{name}-{replicated['name']}-0-0.{name}"
        env["MASTER_ADDR"] = "127.0.0.1"  # the cluster DNS name of pod 0
        argv = [_local(_expand(word, env), moved) for word in [*container["command"], *container["args"]]]
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root)
        pod_name = f"{name}-{replicated['name']}-0-{rank}-x{rank}k9z"
        (STATE / f"{pod_name}.log").write_text(done.stdout)
        pods.append({"name": pod_name, "rank": rank, "exit": done.returncode, "image": container["image"]})
    (STATE / "pods.json").write_text(json.dumps(pods))


def _counter(name: str) -> int:
    path = STATE / f"{name}.count"
    count = int(path.read_text()) if path.exists() else 0
    path.write_text(str(count + 1))
    return count


def _jobset(name: str) -> dict:
    pods = json.loads((STATE / "pods.json").read_text())
    calls = _counter("get-jobset")
    pending = int(os.environ.get("FAKE_KUBECTL_PENDING", "0"))
    status: dict = {}
    if calls < pending:
        pass
    elif calls == pending or os.environ.get("FAKE_KUBECTL_HANG") == "1":
        status = {"replicatedJobsStatus": [{"name": "node", "active": len(pods), "ready": len(pods)}]}
    else:
        ended = "Completed" if all(p["exit"] == 0 for p in pods) else "Failed"
        status = {
            "terminalState": ended,
            "conditions": [{"type": ended, "status": "True", "reason": "AllJobsCompleted"}],
        }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {},
        "status": status,
    }


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    args = list(argv)
    if args[:1] == ["--namespace"]:
        args = args[2:]
    if args[:2] == ["apply", "-f"]:
        documents = list(yaml.safe_load_all(Path(args[2]).read_text()))
        _run_pods(documents)
        for document in documents:
            print(f"{document['kind'].lower()}/{document['metadata']['name']} created")
        return 0
    if args[:2] == ["get", "jobset"]:
        if (STATE / "deleted").exists():
            print(f'Error from server (NotFound): jobsets.jobset.x-k8s.io "{args[2]}" not found', file=sys.stderr)
            return 1
        print(json.dumps(_jobset(args[2])))
        return 0
    if args[:2] == ["get", "pods"]:
        items = [
            {
                "metadata": {
                    "name": p["name"],
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(p["rank"])},
                },
                "status": {
                    "containerStatuses": [
                        {"name": "tprimat", "image": p["image"], "imageID": p["image"] + "@sha256:" + "5e" * 32}
                    ]
                },
            }
            for p in json.loads((STATE / "pods.json").read_text())
        ]
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return 0
    if args[:1] == ["logs"]:
        print((STATE / f"{args[1]}.log").read_text(), end="")
        return 0
    if args[:2] == ["delete", "jobset"]:
        (STATE / "deleted").write_text("")
        print(f'jobset.jobset.x-k8s.io "{args[2]}" deleted')
        return 0
    print(f"fake kubectl: unexpected arguments {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
