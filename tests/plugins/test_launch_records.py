"""The recorded config is what the rendered command runs: read every launch back, for every backend.

For each backend × model × methodology (``iso``, and ``tuned`` on the target
GPU: MI300X for AMD, H100 for NVIDIA), the run is prepared through the core,
its record is built as the runner builds it (:func:`result_config`), and the
rendered command is read back the way the framework reads it: the
``pretrain_gpt.py`` argv parsed into Megatron destinations, the Primus
experiment YAML loaded (base experiment merged), NeMo's settings JSON loaded,
the torch backend's ``config.toml`` loaded.  Every value must equal the
record, and every tuned deviation must be in the launched
environment/arguments/overrides.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.plugins.launching import prepared
from tprimat.plugins.amd_primus.launcher import EXPERIMENT_FILE
from tprimat.plugins.megatron.settings import FROM_CONFIG, from_argv
from tprimat.result.builder import result_config
from tprimat.running.prepare import PreparedRun
from tprimat.settings.config import dump_toml, load_config
from tprimat.settings.models import get_model

BACKENDS = ["amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo", "torch"]
MODELS = ["llama3.1-8b", "qwen2.5-7b"]
METHODOLOGIES = ["iso", "tuned"]
#: Variations that exercise derived settings (recompute, fp8, sequence parallelism, decay).
VARIANTS = {
    "defaults": [],
    "fp8-tp2-full": [
        'precision.dtype="fp8"',
        "parallel.tensor=2",
        "parallel.sequence_parallel=true",
        'training.recompute="full"',
        "kernels.fused_rope=false",
    ],
    "decay-40": ["training.lr_decay_iterations=40"],
}
#: Settings the torch backend cannot run (it refuses them rather than ignore them).
TORCH_REFUSES = {"fp8-tp2-full"}
#: Settings NeMo would replace at set-up, so its plan refuses them (tests/plugins/nvd_nemo).
NEMO_REFUSES = {"decay-40"}


def _same(value: Any, expected: Any) -> bool:
    """A read-back value (typed, or a command-line word) equals the recorded one."""
    if isinstance(expected, bool) or expected is None or isinstance(value, bool):
        return value == expected
    if isinstance(value, str) and not isinstance(expected, str):
        return type(expected)(value) == expected
    return value == expected


def _megatron_destinations(run: PreparedRun) -> dict[str, Any]:
    if run.backend == "amd_primus":
        experiment = yaml.safe_load(run.plan.files[EXPERIMENT_FILE])
        return experiment["modules"]["pre_trainer"]["overrides"]
    argv = list(run.plan.argv)
    return from_argv(argv[argv.index(next(a for a in argv if a.endswith("pretrain_gpt.py"))) + 1 :])


def _check_megatron(run: PreparedRun, recorded: dict[str, Any]) -> dict[str, Any]:
    """Every config field Megatron reads, read back; returns config field -> launched value."""
    dests = _megatron_destinations(run)
    launched: dict[str, Any] = {}
    for dest, field in FROM_CONFIG.items():
        section, key = field.split(".")
        assert _same(dests[dest], recorded[section][key]), (dest, dests[dest], recorded[section][key])
        launched[field] = dests[dest]
    t, p, b = recorded["training"], recorded["parallel"], recorded["benchmark"]
    assert _same(dests["lr_decay_iters"], t["lr_decay_iterations"] or b["iterations"])
    assert dests["recompute_granularity"] == (None if t["recompute"] == "none" else t["recompute"])
    assert dests["sequence_parallel"] is (p["sequence_parallel"] and p["tensor"] > 1)
    dtype = recorded["precision"]["dtype"]
    assert dests["bf16"] is (dtype != "fp32")
    assert dests["fp8"] == (recorded["precision"]["fp8_recipe"] if dtype == "fp8" else None)
    model = get_model(b["model"])
    assert _same(dests["num_layers"], model.num_layers) and _same(dests["hidden_size"], model.hidden_size)
    assert _same(dests["num_attention_heads"], model.num_attention_heads)
    assert dests["add_qkv_bias"] is model.qkv_bias
    return launched


#: NeMo settings key for each config field it takes (section None: top level).
NEMO_KEYS = {
    "benchmark.iterations": (None, "max_steps"),
    "benchmark.seed": (None, "seed"),
    "training.seq_length": (None, "seq_length"),
    "training.micro_batch_size": (None, "micro_batch_size"),
    "training.global_batch_size": (None, "global_batch_size"),
    "training.init_method_std": (None, "init_method_std"),
    "training.lr": ("optimizer", "lr"),
    "training.min_lr": ("optimizer", "min_lr"),
    "training.lr_warmup_iterations": ("optimizer", "warmup_steps"),
    "training.lr_decay_style": ("optimizer", "decay_style"),
    "training.weight_decay": ("optimizer", "weight_decay"),
    "training.adam_beta1": ("optimizer", "adam_beta1"),
    "training.adam_beta2": ("optimizer", "adam_beta2"),
    "training.adam_eps": ("optimizer", "adam_eps"),
    "training.clip_grad": ("optimizer", "clip_grad"),
    "parallel.tensor": ("parallel", "tensor"),
    "parallel.pipeline": ("parallel", "pipeline"),
    "parallel.context": ("parallel", "context"),
    "parallel.distributed_optimizer": ("parallel", "distributed_optimizer"),
    "parallel.overlap_grad_reduce": ("parallel", "overlap_grad_reduce"),
    "parallel.overlap_param_gather": ("parallel", "overlap_param_gather"),
    "precision.dtype": (None, "precision"),
    "precision.fp8_recipe": (None, "fp8_format"),
    "kernels.attention_backend": ("kernels", "attention_backend"),
    "kernels.fused_rope": ("kernels", "fused_rope"),
    "kernels.fused_swiglu": ("kernels", "fused_swiglu"),
    "kernels.fused_cross_entropy": ("kernels", "fused_cross_entropy"),
    "launch.nnodes": (None, "num_nodes"),
    "launch.nproc_per_node": (None, "num_gpus_per_node"),
}


def _check_nemo(run: PreparedRun, recorded: dict[str, Any]) -> dict[str, Any]:
    settings = json.loads(run.plan.files["nemo_settings.json"])
    launched: dict[str, Any] = {}
    for field, (section, key) in NEMO_KEYS.items():
        value = settings[key] if section is None else settings[section][key]
        config_section, config_key = field.split(".")
        assert _same(value, recorded[config_section][config_key]), (field, value)
        launched[field] = value
    t, b = recorded["training"], recorded["benchmark"]
    assert settings["optimizer"]["decay_steps"] == (t["lr_decay_iterations"] or b["iterations"])
    assert settings["recompute"]["granularity"] == (None if t["recompute"] == "none" else t["recompute"])
    return launched


def _check_torch(run: PreparedRun, recorded: dict[str, Any]) -> dict[str, Any]:
    argv = list(run.plan.argv)
    config_file = argv[argv.index("--config") + 1]
    assert config_file == str(run.run_dir / "config.toml")
    # The runner writes the final config there (Runner._write_inputs); the worker loads it
    # with load_config, as read here.
    written = run.run_dir.parent / "config.toml"
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(dump_toml(run.config))
    launched_config = load_config(str(written)).to_dict()
    launched: dict[str, Any] = {}
    for section, values in recorded.items():
        for key, value in values.items():
            assert launched_config[section][key] == value, (section, key)
            launched[f"{section}.{key}"] = launched_config[section][key]
    return launched


def _world_size(run: PreparedRun) -> int:
    if run.backend == "amd_primus":
        return int(run.plan.env["NNODES"]) * int(run.plan.env["GPUS_PER_NODE"])
    argv = list(run.plan.argv)
    nproc = argv[argv.index("--nproc-per-node") + 1]
    nnodes = argv[argv.index("--nnodes") + 1]
    return int(nproc) * int(nnodes)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("methodology", METHODOLOGIES)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_recorded_config_is_what_the_launch_runs(backend, model, methodology, variant, tmp_path):
    if backend == "torch" and variant in TORCH_REFUSES:
        pytest.skip("the torch backend refuses fp8 and tensor parallelism (tested in tests/plugins/torch)")
    if backend == "nvd_nemo" and variant in NEMO_REFUSES:
        pytest.skip("NeMo replaces the decay length at set-up; the plan refuses it (tests/plugins/nvd_nemo)")
    run = prepared(backend, model, tmp_path, [f'benchmark.methodology="{methodology}"', *VARIANTS[variant]])
    record = result_config(run.config, methodology=run.methodology, layers=run.layers)
    recorded = record.settings
    assert record.methodology == methodology and recorded["benchmark"]["methodology"] == methodology
    check = {"nvd_nemo": _check_nemo, "torch": _check_torch}.get(backend, _check_megatron)
    launched = check(run, recorded)
    assert _same(launched["training.micro_batch_size"], record.micro_batch_size)
    assert _same(launched["training.global_batch_size"], record.global_batch_size)
    assert _world_size(run) == record.world_size
    if methodology == "iso":
        assert record.preset is None and record.deviations == []
        return
    assert record.preset is not None and record.deviations, "a tuned run records its preset and deviations"
    assert record.deviations == [str(d) for d in run.methodology.deviations]
    overrides = _megatron_destinations(run) if backend == "amd_primus" else {}
    for deviation in run.methodology.deviations:
        section, _, key = deviation.setting.partition(".")
        if section == "env":
            assert run.plan.env[key] == deviation.tuned, deviation
        elif deviation.setting == "args":
            assert all(word in run.plan.argv for word in deviation.tuned), deviation
        elif section == backend:
            assert overrides[key] == deviation.tuned, deviation
        else:  # a config field: launched with the tuned value, and recorded with it
            assert _same(launched[deviation.setting], deviation.tuned), deviation
            assert recorded[section][key] == deviation.tuned, deviation
