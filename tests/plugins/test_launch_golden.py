"""Golden launch plans: the exact process each backend starts for each model, pinned.

A change to any generated argument, environment variable or file shows up as
a diff against ``tests/plugins/golden/``.  After checking that a change is
intended, regenerate with ``TPRIMAT_UPDATE_GOLDEN=1 python -m pytest
tests/plugins/test_launch_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import pytest

from tests.plugins.launching import prepared
from tprimat.contract.plans import LaunchContext
from tprimat.contract.registry import Registry
from tprimat.running.prepare import PreparedRun
from tprimat.settings.config import load_config

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
ROOT_PLUGINS = HERE.parents[1] / "plugins"
#: Generated files that are copies of a file tprimat ships (checked against it, not stored twice).
SHIPPED = {"nemo_pretrain.py": resources.files("tprimat.plugins.nvd_nemo") / "nemo_pretrain.py"}
BACKENDS = ["amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo"]
MODELS = ["llama3.1-8b", "qwen2.5-7b"]


def prepared_for(backend: str, model: str, tmp_path: Path, overrides=()) -> tuple[PreparedRun, dict[str, str]]:
    """The run the core prepares on the backend's target GPU, and the paths to normalise in goldens."""
    run = prepared(backend, model, tmp_path, overrides)
    replacements = {str(run.run_dir): "<RUN_DIR>"}
    for option, name in (("megatron_path", "<MEGATRON_PATH>"), ("primus_path", "<PRIMUS_PATH>")):
        if option in run.context.options:
            replacements[run.context.options[option]] = name
    return run, replacements


def context_for(backend: str, model: str, tmp_path: Path, overrides=()) -> tuple[LaunchContext, dict]:
    run, replacements = prepared_for(backend, model, tmp_path, overrides)
    return run.context, replacements


def normalise(text: str, replacements: dict[str, str]) -> str:
    for old, new in sorted(replacements.items(), key=lambda item: -len(item[0])):
        text = text.replace(old, new)
    return text


def plan_record(run: PreparedRun, replacements) -> tuple[dict, dict[str, str]]:
    plan = run.plan
    record = {
        "argv": [normalise(a, replacements) for a in plan.argv],
        "env": {k: normalise(v, replacements) for k, v in sorted(plan.env.items())},
        "cwd": normalise(str(plan.cwd), replacements) if plan.cwd else None,
        "files": sorted(plan.files),
        "methodology": run.methodology.methodology,  # the core's resolution, applied by the plan
        "deviations": [str(d) for d in run.methodology.deviations],
        "notes": [normalise(n, replacements) for n in plan.notes],
    }
    files = {name: normalise(text, replacements) for name, text in plan.files.items()}
    return record, files


@pytest.fixture(scope="module")
def registry():
    return Registry.from_environment({})


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_generated_invocation_matches_golden(backend, model, tmp_path, registry):
    run, replacements = prepared_for(backend, model, tmp_path)
    record, files = plan_record(run, replacements)
    stem = GOLDEN / backend / model
    # Files the plan copies verbatim from the package are compared with the package's copy.
    verbatim = {name: text for name, text in files.items() if name in SHIPPED}
    for name, text in verbatim.items():
        assert text == SHIPPED[name].read_text(), f"{name} is not the shipped script"
    pinned = {name: text for name, text in files.items() if name not in SHIPPED}
    if os.environ.get("TPRIMAT_UPDATE_GOLDEN"):
        stem.mkdir(parents=True, exist_ok=True)
        (stem / "plan.json").write_text(json.dumps(record, indent=2) + "\n")
        for name, text in pinned.items():
            (stem / name).write_text(text)
    assert json.loads((stem / "plan.json").read_text()) == record
    for name, text in pinned.items():
        assert (stem / name).read_text() == text, f"{backend}/{model}/{name} differs from golden"


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_node_rendezvous_reaches_the_launcher(backend, tmp_path, registry):
    context, _ = context_for(
        backend,
        "llama3.1-8b",
        tmp_path,
        [
            "launch.nnodes=4",
            'launch.master_addr="10.1.2.3"',
            "launch.master_port=29611",
            "training.global_batch_size=256",
        ],
    )
    import attrs

    plan = registry.launch(backend, context=attrs.evolve(context, node_rank=3))
    if backend == "amd_primus":  # Primus's launcher runs torchrun from these
        assert plan.env["NNODES"] == "4" and plan.env["NODE_RANK"] == "3"
        assert plan.env["MASTER_ADDR"] == "10.1.2.3" and plan.env["MASTER_PORT"] == "29611"
        assert plan.env["GPUS_PER_NODE"] == "8"
    else:
        argv = list(plan.argv)
        assert argv[0] == "torchrun"
        pairs = dict(zip(argv[1:11:2], argv[2:11:2], strict=True))
        assert pairs == {
            "--nnodes": "4",
            "--node-rank": "3",
            "--master-addr": "10.1.2.3",
            "--master-port": "29611",
            "--nproc-per-node": "8",
        }


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_stay_registered_after_their_submodules_are_imported(backend):
    import importlib

    fresh = Registry.from_environment({})
    plugin = fresh.backend(backend).plugin_name
    for package in {backend, plugin}:
        for module in (ROOT_PLUGINS / package).glob("*.py"):
            importlib.import_module(f"tprimat.plugins.{package}.{module.stem}")
    fresh = Registry.from_environment({})
    for hook in ("launch", "prepare_data", "profile", "parse_metrics"):
        assert fresh.implements(backend, hook), hook


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuned_plans_apply_the_cores_deviations(backend, tmp_path):
    run, _ = prepared_for(backend, "llama3.1-8b", tmp_path, ['benchmark.methodology="tuned"'])
    iso, _ = prepared_for(backend, "llama3.1-8b", tmp_path / "iso", [])
    assert run.methodology.methodology == "tuned" and iso.methodology.deviations == ()
    assert run.methodology.deviations, "a tuned run lists what it changed"
    assert run.methodology.preset == ("mi300x" if backend.startswith("amd") else "h100")
    for deviation in run.methodology.deviations:  # every env deviation is really in the environment
        if deviation.setting.startswith("env."):
            name = deviation.setting[4:]
            assert run.plan.env[name] == deviation.tuned and name not in iso.plan.env
    argv = list(run.plan.argv)
    if backend == "nvd_megatron":
        assert argv[argv.index("--context-parallel-size") + 1] == "2"
    if backend == "amd_megatron":
        assert argv[argv.index("--micro-batch-size") + 1] == "2"


def test_nemo_script_without_nemo_says_so_in_one_line(tmp_path):
    import subprocess
    import sys

    context, _ = context_for("nvd_nemo", "llama3.1-8b", tmp_path)
    from tprimat.plugins.nvd_nemo.launcher import plan

    launch_plan = plan(context)
    for name, text in launch_plan.files.items():
        (tmp_path / name).write_text(text)
    # -I: an isolated interpreter that cannot see NeMo even where it is installed
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(tmp_path / "nemo_pretrain.py"),
            "--settings",
            str(tmp_path / "nemo_settings.json"),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "docker/nvd.Dockerfile" in done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_prepared_dataset_reaches_each_backends_launch(backend, tmp_path, registry):
    import attrs

    from tprimat.contract.plans import DataArguments, PreparedDataset

    config = load_config(None, ['benchmark.model="qwen2.5-7b"'])
    dataset = PreparedDataset(
        path_prefix=tmp_path / "data" / "qwen_text_document",
        tokenizer=str(tmp_path / "tokenizer"),
        fingerprint="sha256:0",
        documents=3,
        tokens=300,
        vocab_size=151665,
    )
    data = registry.prepare_data(backend, dataset=dataset, config=config)
    assert isinstance(data, DataArguments)
    context, _ = context_for(backend, "qwen2.5-7b", tmp_path)
    plan = registry.launch(backend, context=attrs.evolve(context, data=data))
    generated = " ".join(plan.argv) + " ".join(plan.files.values())
    assert str(dataset.path_prefix) in generated and str(tmp_path / "tokenizer") in generated
    assert "NullTokenizer" not in " ".join(plan.argv)
    assert "--mock-data" not in plan.argv
