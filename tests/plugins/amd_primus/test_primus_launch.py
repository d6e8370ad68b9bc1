"""The Primus experiment: real Primus keys, every config field pinned, launcher choice, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tprimat.contract.plans import LaunchContext, PreparedDataset, ProfilePlan
from tprimat.errors import TprimatError
from tprimat.hardware.platform import PlatformInfo
from tprimat.plugins.amd_primus.launcher import EXPERIMENT_FILE, plan
from tprimat.plugins.megatron.data import data_arguments
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

PRIMUS_TREE = Path(__file__).resolve().parents[2] / "fixtures" / "primus_configs"
MI300X = PlatformInfo(platform="amd", device_name="AMD Instinct MI300X", source="test")
MI355X = PlatformInfo(platform="amd", device_name="AMD Instinct MI355X", source="test")


def _yaml_keys(file: Path) -> set[str]:
    data = yaml.safe_load(file.read_text()) or {}
    keys = set(data) - {"extends"}
    for parent in data.get("extends", []) or []:
        keys |= _yaml_keys(file.parent / parent)
    return keys


def primus_keys() -> set[str]:
    """Every key Primus's Megatron trainer and model configs define (the override vocabulary)."""
    keys: set[str] = set()
    for folder in ("primus/configs/modules/megatron", "primus/configs/models/megatron"):
        for file in (PRIMUS_TREE / folder).glob("*.yaml"):
            keys |= _yaml_keys(file)
    return keys


@pytest.fixture
def primus(tmp_path) -> Path:
    root = tmp_path / "Primus"
    shutil.copytree(PRIMUS_TREE, root)
    (root / "runner").mkdir()
    (root / "runner" / "primus-cli").write_text("")
    return root


def context(primus: Path, tmp_path: Path, overrides=(), platform=MI300X, **kw) -> LaunchContext:
    config = load_config(None, list(overrides))
    return LaunchContext(
        run_id="r7",
        run_dir=tmp_path / "run",
        config=config,
        model=get_model(config.benchmark.model),
        platform=platform,
        options={"primus_path": str(primus)},
        **kw,
    )


def overrides_of(launch_plan) -> dict:
    return yaml.safe_load(launch_plan.files[EXPERIMENT_FILE])["modules"]["pre_trainer"]["overrides"]


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_every_override_is_a_real_primus_key(primus, tmp_path, model, dtype):
    ctx = context(
        primus, tmp_path, [f'benchmark.model="{model}"', f'precision.dtype="{dtype}"', 'training.recompute="full"']
    )
    unknown = sorted(set(overrides_of(plan(ctx))) - primus_keys())
    assert unknown == []


def test_a_key_primus_does_not_know_would_be_caught():
    keys = primus_keys()
    assert "seq_length" in keys and "mock_data" in keys and "use_rope_scaling" in keys
    assert "sequence_length" not in keys


def test_seq_length_and_architecture_are_pinned_not_left_to_primus(primus, tmp_path):
    ctx = context(primus, tmp_path, ['benchmark.model="qwen2.5-7b"', "training.seq_length=4096"])
    o = overrides_of(plan(ctx))
    assert o["seq_length"] == 4096  # Primus's Qwen experiment would read $PRIMUS_SEQ_LENGTH (2048)
    assert o["add_qkv_bias"] is True  # Primus's Qwen 2.5 model file leaves it off
    assert o["num_query_groups"] == 4 and o["rotary_base"] == 1000000
    assert o["norm_epsilon"] == 1e-6
    assert o["vocab_size"] == 152063 and o["tokenizer_type"] == "NullTokenizer"  # core < 0.18
    llama = overrides_of(plan(context(primus, tmp_path, [])))
    assert llama["use_rope_scaling"] is True and llama["rope_scaling_factor"] == 8.0
    assert llama["norm_epsilon"] == 1e-5  # Primus's experiment says 1e-6; Llama 3.1 uses 1e-5


def test_config_fields_land_in_the_overrides(primus, tmp_path):
    ctx = context(
        primus,
        tmp_path,
        [
            "benchmark.iterations=20",
            "training.micro_batch_size=2",
            "training.global_batch_size=64",
            "parallel.tensor=2",
            "parallel.sequence_parallel=true",
            'precision.dtype="fp8"',
            'training.recompute="selective"',
            "kernels.fused_rope=false",
            "benchmark.seed=9",
        ],
    )
    launch_plan = plan(ctx)
    o = overrides_of(launch_plan)
    assert (o["train_iters"], o["micro_batch_size"], o["global_batch_size"]) == (20, 2, 64)
    assert o["tensor_model_parallel_size"] == 2 and o["sequence_parallel"] is True
    assert o["fp8"] == "hybrid" and o["bf16"] is True and o["fp8_recipe"] == "delayed"
    assert o["recompute_granularity"] == "selective" and o["apply_rope_fusion"] is False
    assert o["seed"] == 9 and o["log_interval"] == 1 and o["log_throughput"] is True
    assert o["eval_iters"] == 0 and o["save"] is None and o["mock_data"] is True
    assert "FP8-pretrain.yaml" in launch_plan.files[EXPERIMENT_FILE].splitlines()[1]


def test_mi355x_uses_primus_mi355x_experiment(primus, tmp_path):
    launch_plan = plan(context(primus, tmp_path, [], platform=MI355X))
    assert "configs/MI355X/llama3.1_8B-BF16-pretrain.yaml" in launch_plan.notes[0]


def test_run_pretrain_sh_is_the_fallback_launcher(primus, tmp_path):
    (primus / "runner" / "primus-cli").unlink()
    (primus / "examples" / "run_pretrain.sh").write_text("")
    launch_plan = plan(context(primus, tmp_path, []))
    assert launch_plan.argv == ("bash", str(primus / "examples" / "run_pretrain.sh"))
    assert launch_plan.env["EXP"] == str(tmp_path / "run" / EXPERIMENT_FILE)
    assert launch_plan.env["HSA_NO_SCRATCH_RECLAIM"] == "1"


def test_a_config_tree_without_a_launcher_is_refused_with_a_hint(primus, tmp_path):
    (primus / "runner" / "primus-cli").unlink()
    with pytest.raises(TprimatError, match="neither .*primus-cli nor .*run_pretrain.sh"):
        plan(context(primus, tmp_path, []))


def test_without_a_checkout_the_plan_names_a_placeholder_and_the_base_experiment(tmp_path):
    config = load_config(None, ['precision.dtype="fp8"'])
    ctx = LaunchContext(run_id="r", run_dir=tmp_path, config=config, model=get_model("llama3.1-8b"), platform=MI300X)
    launch_plan = plan(ctx)
    assert launch_plan.argv[1] == "${PRIMUS_PATH}/runner/primus-cli"
    notes = "\n".join(launch_plan.notes)
    assert "placeholder ${PRIMUS_PATH}" in notes and "docker/amd.Dockerfile" in notes
    assert "examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml" in notes
    assert "assumed Megatron-core 0.15" in notes
    experiment = yaml.safe_load(launch_plan.files[EXPERIMENT_FILE])
    assert experiment["modules"]["pre_trainer"]["model"] == "llama3.1_8B.yaml"
    assert overrides_of(launch_plan)["fp8"] == "hybrid"


def test_a_path_that_is_not_a_primus_checkout_is_refused(tmp_path):
    config = load_config(None, [])
    ctx = LaunchContext(
        run_id="r",
        run_dir=tmp_path,
        config=config,
        model=get_model("llama3.1-8b"),
        platform=MI300X,
        options={"primus_path": str(tmp_path / "nowhere")},
    )
    with pytest.raises(TprimatError, match=r"Primus not found: .*docker/amd\.Dockerfile"):
        plan(ctx)


def test_every_megatron_destination_is_a_primus_key():
    from tprimat.plugins.megatron.settings import ARGS

    assert sorted(set(ARGS) - primus_keys()) == []


def test_prepared_dataset_switches_mock_data_off(primus, tmp_path):
    config = load_config(None, ['benchmark.model="qwen2.5-7b"'])
    dataset = PreparedDataset(
        path_prefix=tmp_path / "d" / "text_document",
        tokenizer="/tok",
        fingerprint="sha256:1",
        documents=1,
        tokens=10,
        vocab_size=151665,
    )
    ctx = context(primus, tmp_path, ['benchmark.model="qwen2.5-7b"'], data=data_arguments(dataset, config))
    o = overrides_of(plan(ctx))
    # the same data settings pretrain_gpt.py gets: one prefix, every token in the training split
    assert o["mock_data"] is False and o["data_path"] == [str(tmp_path / "d" / "text_document")]
    assert o["split"] == "100,0,0" and o["train_data_path"] is None
    assert o["tokenizer_type"] == "HuggingFaceTokenizer" and o["tokenizer_model"] == "/tok"
    assert o["make_vocab_size_divisible_by"] == 512 and o["vocab_size"] is None


def test_profile_overrides_are_carried(primus, tmp_path):
    profile = ProfilePlan(overrides={"profile": True, "use_pytorch_profiler": True}, env={"PRIMUS_X": "1"})
    launch_plan = plan(context(primus, tmp_path, [], profile=profile))
    o = overrides_of(launch_plan)
    assert o["profile"] is True and o["use_pytorch_profiler"] is True
    assert launch_plan.env["PRIMUS_X"] == "1"


def test_tuned_applies_the_cores_resolution(tmp_path):
    from tests.plugins.launching import prepared

    run = prepared("amd_primus", "llama3.1-8b", tmp_path / "llama", ['benchmark.methodology="tuned"'])
    deviations = [str(d) for d in run.methodology.deviations]
    assert "training.micro_batch_size: 1 -> 2" in deviations
    assert 'env.GPU_MAX_HW_QUEUES: unset -> "2"' in deviations
    o = overrides_of(run.plan)
    assert o["micro_batch_size"] == 2 and o["use_turbo_attention"] is False  # Primus's Llama experiment
    assert run.plan.env["GPU_MAX_HW_QUEUES"] == "2"
    # Qwen gets what Primus's Qwen experiment publishes, not Llama's micro-batch; the deviation
    # shows the value the iso launch really has
    qwen = prepared("amd_primus", "qwen2.5-7b", tmp_path / "qwen", ['benchmark.methodology="tuned"'])
    deviations = [str(d) for d in qwen.methodology.deviations]
    assert "amd_primus.use_turbo_attention: false -> true" in deviations
    assert not any(d.startswith("training.micro_batch_size") for d in deviations)
    assert overrides_of(qwen.plan)["use_turbo_attention"] is True


def test_a_tuned_megatron_key_goes_through_the_settings_checks(primus, tmp_path):
    import attrs

    from tprimat.settings.methodology import Resolved

    base = context(primus, tmp_path, [])
    tuned = Resolved(
        methodology="tuned",
        config=base.config,
        overrides={"overlap_param_gather": True, "use_distributed_optimizer": False},
    )
    with pytest.raises(TprimatError, match="distributed_optimizer"):
        plan(attrs.evolve(base, methodology=tuned))


@pytest.mark.parametrize(("version", "key"), [("0.15", "norm_epsilon"), ("0.16", "layernorm_epsilon")])
def test_the_norm_epsilon_goes_where_the_primus_megatron_reads_it(version, key, tmp_path):
    # From Megatron-core 0.16, --norm-epsilon stores into layernorm_epsilon: a Primus override
    # still named norm_epsilon would be ignored, and Qwen 2.5 (1e-6) would train with 1e-5.
    from tests.plugins.launching import checkout_options, prepared

    options = {**checkout_options("amd_primus", tmp_path), "megatron_version": version}
    run = prepared("amd_primus", "qwen2.5-7b", tmp_path, options=options)
    o = overrides_of(run.plan)
    assert o[key] == 1e-06
    assert ({"norm_epsilon", "layernorm_epsilon"} - {key}).isdisjoint(run.plan.framework.rendered)
    assert run.plan.framework.shared["norm.epsilon"] == 1e-06
