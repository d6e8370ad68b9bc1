"""Golden launch plans: the exact process each backend starts for each model, pinned.

A change to any generated argument, environment variable or file shows up as
a diff against ``tests/plugins/golden/``.  After checking that a change is
intended, regenerate with ``TPRIMAT_UPDATE_GOLDEN=1 python -m pytest
tests/plugins/test_launch_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchContext
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
#: Generated files that are copies of a file tprimat ships (checked against it, not stored twice).
SHIPPED = {"nemo_pretrain.py": resources.files("tprimat.plugins.nvd_nemo") / "nemo_pretrain.py"}
FIXTURES = HERE.parent / "fixtures"
BACKENDS = ["amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo"]
MODELS = ["llama3.1-8b", "qwen2.5-7b"]

MI300X = PlatformInfo(platform="amd", device_name="AMD Instinct MI300X", device_count=8,
                      stack="rocm", source="test")
H100 = PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8,
                    stack="cuda", source="test")


def fake_megatron(root: Path) -> Path:
    """A directory shaped like a Megatron-LM core 0.15 checkout (launch only checks paths)."""
    (root / "megatron" / "core").mkdir(parents=True)
    (root / "pretrain_gpt.py").write_text("")
    info = root / "megatron" / "core" / "package_info.py"
    info.write_text("MAJOR = 0\nMINOR = 15\nPATCH = 0\n")
    return root


def fake_primus(root: Path) -> Path:
    """The real Primus config tree (fixture) plus an empty launcher file where Primus keeps it."""
    shutil.copytree(FIXTURES / "primus_configs", root)
    (root / "runner").mkdir()
    (root / "runner" / "primus-cli").write_text("")
    return root


def context_for(
    backend: str, model: str, tmp_path: Path, overrides=()
) -> tuple[LaunchContext, dict]:
    config = load_config(None, [f'benchmark.model="{model}"', *overrides])
    run_dir = tmp_path / "runs" / "r1"
    options: dict = {}
    replacements = {str(run_dir): "<RUN_DIR>"}
    if backend.endswith("_megatron"):
        options["megatron_path"] = str(fake_megatron(tmp_path / "megatron"))
        replacements[options["megatron_path"]] = "<MEGATRON_PATH>"
    if backend == "amd_primus":
        options["primus_path"] = str(fake_primus(tmp_path / "primus"))
        replacements[options["primus_path"]] = "<PRIMUS_PATH>"
    platform = MI300X if backend.startswith("amd") else H100
    context = LaunchContext(run_id="r1", run_dir=run_dir, config=config, model=get_model(model),
                            platform=platform, options=options)
    return context, replacements


def normalise(text: str, replacements: dict[str, str]) -> str:
    for old, new in sorted(replacements.items(), key=lambda item: -len(item[0])):
        text = text.replace(old, new)
    return text


def plan_record(plan, replacements) -> tuple[dict, dict[str, str]]:
    record = {
        "argv": [normalise(a, replacements) for a in plan.argv],
        "env": {k: normalise(v, replacements) for k, v in sorted(plan.env.items())},
        "cwd": normalise(str(plan.cwd), replacements) if plan.cwd else None,
        "files": sorted(plan.files),
        "methodology": plan.methodology,
        "deviations": list(plan.deviations),
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
    context, replacements = context_for(backend, model, tmp_path)
    plan = registry.launch(backend, context=context)
    record, files = plan_record(plan, replacements)
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
        backend, "llama3.1-8b", tmp_path,
        ["launch.nnodes=4", 'launch.master_addr="10.1.2.3"', "launch.master_port=29611",
         "training.global_batch_size=256"],
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
        assert pairs == {"--nnodes": "4", "--node-rank": "3", "--master-addr": "10.1.2.3",
                         "--master-port": "29611", "--nproc-per-node": "8"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_stay_registered_after_their_submodules_are_imported(backend):
    import importlib

    for submodule in ("launcher", "data", "profiling", "parse"):
        importlib.import_module(f"tprimat.plugins.{backend}.{submodule}")
    fresh = Registry.from_environment({})
    for hook in ("launch", "prepare_data", "profile", "parse_metrics"):
        assert fresh.implements(backend, hook), hook


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuned_plans_carry_their_deviations(backend, tmp_path, registry):
    context, _ = context_for(backend, "llama3.1-8b", tmp_path, ['benchmark.methodology="tuned"'])
    iso_context, _ = context_for(backend, "llama3.1-8b", tmp_path / "iso", [])
    plan = registry.launch(backend, context=context)
    iso = registry.launch(backend, context=iso_context)
    assert plan.methodology == "tuned" and iso.methodology == "iso" and iso.deviations == ()
    assert plan.deviations, "a tuned plan lists what it changed"
    assert any(n.startswith("tuned preset ") for n in plan.notes)
    for deviation in plan.deviations:  # every env deviation is really in the environment
        if deviation.startswith("env."):
            name = deviation[4:].split(":")[0]
            assert name in plan.env and name not in iso.env
    if backend == "nvd_megatron":
        argv = list(plan.argv)
        assert argv[argv.index("--context-parallel-size") + 1] == "2"
    if backend == "amd_megatron":
        argv = list(plan.argv)
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
    done = subprocess.run([sys.executable, "-I", "-S", str(tmp_path / "nemo_pretrain.py"),
                           "--settings", str(tmp_path / "nemo_settings.json"), "--dry-run"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "docker/nvd.Dockerfile" in done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_prepared_dataset_reaches_each_backends_launch(backend, tmp_path, registry):
    import attrs

    from tprimat.contract.plans import DataArguments, PreparedDataset

    config = load_config(None, ['benchmark.model="qwen2.5-7b"'])
    dataset = PreparedDataset(path_prefix=tmp_path / "data" / "qwen_text_document",
                              tokenizer=str(tmp_path / "tokenizer"), fingerprint="sha256:0",
                              documents=3, tokens=300, vocab_size=151665)
    data = registry.prepare_data(backend, dataset=dataset, config=config)
    assert isinstance(data, DataArguments)
    context, _ = context_for(backend, "qwen2.5-7b", tmp_path)
    plan = registry.launch(backend, context=attrs.evolve(context, data=data))
    generated = " ".join(plan.argv) + " ".join(plan.files.values())
    assert str(dataset.path_prefix) in generated and str(tmp_path / "tokenizer") in generated
    assert "NullTokenizer" not in " ".join(plan.argv)
    assert "--mock-data" not in plan.argv
