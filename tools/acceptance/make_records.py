#!/usr/bin/env python3
"""Write the acceptance records of tprimat's shipped plans: what Megatron-LM's and Primus's own code said.

Megatron-LM's argument code (``megatron/training/arguments.py``) and Primus's experiment
loader do not install from the package index, so CI cannot run them.  This script,
run by a developer with a framework checkout at the commit the plans assume, prepares
every shipped plan (``tests/plugins/shipped.py``) exactly as ``tprimat run`` does, hands
each one to the framework's own code through the matching runner in this folder
(``megatron_lm_args.py``, ``primus_experiment.py``), and writes what came back into
``tests/fixtures/acceptance/<name>.json``, keyed by the plan's digest
(:mod:`tprimat.running.digest`): whether the framework accepted it, its error if not, and
the value the framework ended with for every setting tprimat renders, every default
tprimat says it keeps, and every setting the shared vocabulary reads.  The file also
records the framework commit, the runner's command and what the runner had to stub.

``tests/plugins/test_acceptance_records.py`` fails when a shipped plan's digest has no
record, when a record says the framework refused it, or when the framework ended with
another value than the plan rendered: a change to rendering cannot land unchecked.

Run from the repository root, with tprimat installed (``pip install -e .``)::

    python tools/acceptance/make_records.py megatron-lm --backends nvd_megatron \\
        --checkout MEGATRON_LM --name megatron-lm-core_v0.15.0 --python VENV/bin/python --te-version 2.9.0
    python tools/acceptance/make_records.py megatron-lm --backends amd_megatron \\
        --checkout PRIMUS/third_party/Megatron-LM --name megatron-lm-primus-v26.5 --python VENV/bin/python
    python tools/acceptance/make_records.py primus --checkout PRIMUS --name primus-v26.5 --python VENV/bin/python

``--python`` is the interpreter the runner's docstring says how to set up (torch and
the framework's small dependencies, no tprimat).  The checkouts are the commits named in
``docs/backends.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.plugins.shipped import plan_id, shipped, shipped_run  # noqa: E402
from tprimat.plugins.megatron.framework import MEGATRON_LM_DEFAULTS, SHARED_SOURCES  # noqa: E402

RECORDS = ROOT / "tests" / "fixtures" / "acceptance"
HERE = Path(__file__).resolve().parent
#: Each framework: the backends whose plans it checks, its runner, the checkout option.
FRAMEWORKS = {
    "megatron-lm": {
        "backends": ("amd_megatron", "nvd_megatron"),
        "runner": "megatron_lm_args.py",
        "flag": "--megatron",
    },
    "primus": {"backends": ("amd_primus",), "runner": "primus_experiment.py", "flag": "--primus"},
}
DEVICES = {"amd": "MI300X", "nvidia": "H100"}


def _plan_entry(framework: str, run: Any, plan_key: str) -> dict[str, Any]:
    plan = run.plan
    entry: dict[str, Any] = {"id": plan_key, "env": dict(plan.env), "world_size": run.config.world_size}
    if framework == "megatron-lm":
        script = next(i for i, word in enumerate(plan.argv) if word.endswith("pretrain_gpt.py"))
        entry["argv"] = list(plan.argv[script + 1 :])
        entry["device"] = DEVICES[run.platform.platform]
    else:
        entry["experiment"] = plan.files["primus_experiment.yaml"]
    return entry


def _values_of_interest(run: Any, values: dict[str, Any]) -> dict[str, Any]:
    """What the framework ended with, for everything tprimat renders, claims it keeps, or reads."""
    framework = run.plan.framework
    keys = [*framework.rendered, *MEGATRON_LM_DEFAULTS, *SHARED_SOURCES, *framework.kept]
    return {key: values[key] for key in dict.fromkeys(keys) if key in values}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("--name", required=True, help="the record file's name, e.g. megatron-lm-core_v0.15.0")
    parser.add_argument("--backends", nargs="+", help="only these backends' plans (default: all it checks)")
    parser.add_argument("--checkout", required=True, type=Path, help="the framework checkout at the assumed commit")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the runner (see its docstring)")
    parser.add_argument("--te-version", help="Megatron-LM: Transformer Engine version of the target image")
    args = parser.parse_args(argv)
    spec = FRAMEWORKS[args.framework]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        runs, entries = {}, []
        for backend, model, methodology in shipped(tuple(args.backends or spec["backends"])):
            key = plan_id(backend, model, methodology)
            checkout = args.checkout.resolve() if backend == "amd_primus" else None
            run = shipped_run(backend, model, methodology, work / key, checkout=checkout)
            runs[key] = run
            entries.append(_plan_entry(args.framework, run, key))
        plans, out = work / "plans.json", work / "accepted.json"
        plans.write_text(json.dumps(entries, indent=1))
        command = [args.python, str(HERE / spec["runner"]), spec["flag"], str(args.checkout), "--plans", str(plans)]
        command += ["--out", str(out)]
        if args.te_version:
            command += ["--te-version", args.te_version]
        if args.framework == "primus":
            command += ["--python", args.python]
        subprocess.run(command, check=False)
        if not out.is_file():
            print(f"error: the runner wrote no {out.name}", file=sys.stderr)
            return 2
        answer = json.loads(out.read_text())
    records = {}
    for result in answer.pop("results"):
        run = runs[result["id"]]
        records[run.plan_digest] = {
            "plan": result["id"],
            "backend": run.backend,
            "accepted": bool(result.get("accepted")),
            "error": result.get("error"),
            "values": _values_of_interest(run, result.get("values") or {}),
        }
    answer.pop("command", None)
    document = {
        "framework": args.framework,
        "made_with": f"python tools/acceptance/make_records.py {args.framework} --name {args.name}"
        + (f" --backends {' '.join(args.backends)}" if args.backends else "")
        + " --checkout CHECKOUT --python PYTHON"
        + (f" --te-version {args.te_version}" if args.te_version else ""),
        "runner": {k: v for k, v in answer.items() if not k.endswith("_checkout")},
        "records": dict(sorted(records.items(), key=lambda item: item[1]["plan"])),
    }
    RECORDS.mkdir(parents=True, exist_ok=True)
    target = RECORDS / f"{args.name}.json"
    target.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    refused = [r["plan"] for r in records.values() if not r["accepted"]]
    print(f"wrote {target}: {len(records)} plans" + (f"; refused: {', '.join(refused)}" if refused else ""))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
