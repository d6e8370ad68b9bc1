"""iso vs tuned: presets per device, every deviation listed, the compared work never changed."""

from __future__ import annotations

import re

import pytest

from tprimat.settings.config import load_config
from tprimat.settings.methodology import FROZEN_KEYS, Preset, PresetError, preset_for, presets, resolve


def test_iso_changes_nothing():
    config = load_config(None, [])
    resolved = resolve(config, backend="amd_megatron", device_name="AMD Instinct MI300X")
    assert resolved.methodology == "iso" and resolved.config == config
    assert resolved.deviations == () and resolved.env == {} and resolved.preset is None


def test_every_shipped_preset_loads_and_keeps_the_compared_work():
    shipped = presets()
    assert {p.name for p in shipped} >= {"mi300x", "h100"}
    for preset in shipped:
        assert not (FROZEN_KEYS & set(preset.config)), preset.name
        assert preset.source and preset.devices


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI325X", "mi300x"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h100"),
        ("NVIDIA A100", None),
        (None, None),
    ],
)
def test_preset_matching(device, name):
    found = preset_for(device)
    assert (found.name if found else None) == name


def test_tuned_lists_each_deviation_and_applies_it():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    resolved = resolve(config, backend="amd_megatron", device_name="AMD Instinct MI300X")
    assert resolved.preset == "mi300x" and "Primus" in resolved.source
    assert resolved.config.training.micro_batch_size == 2
    shown = [str(d) for d in resolved.deviations]
    assert "training.micro_batch_size: 1 -> 2" in shown
    assert 'env.HSA_NO_SCRATCH_RECLAIM: unset -> "1"' not in shown  # iso already has it
    assert 'env.GPU_MAX_HW_QUEUES: unset -> "2"' in shown
    assert resolved.env["GPU_MAX_HW_QUEUES"] == "2"
    # what is compared stays the same
    assert resolved.config.fingerprint() == config.fingerprint()


def test_tuned_h100_uses_context_parallelism():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    resolved = resolve(config, backend="nvd_nemo", device_name="NVIDIA H100 80GB HBM3")
    assert resolved.config.parallel.context == 2
    assert "parallel.context: 1 -> 2" in [str(d) for d in resolved.deviations]


def test_tuned_without_a_preset_says_so():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    with pytest.raises(PresetError, match="needs a preset for device 'NVIDIA A100'.*mi300x"):
        resolve(config, backend="nvd_nemo", device_name="NVIDIA A100")


def test_a_preset_may_not_change_what_is_compared():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    bad = Preset(name="bad", devices=("X",), platform="amd", source="test", config={"training.seq_length": 2048})
    with pytest.raises(PresetError, match="training.seq_length"):
        resolve(config, backend="amd_megatron", device_name="X", preset=bad)


def test_a_preset_that_breaks_the_config_is_refused():
    config = load_config(None, ['benchmark.methodology="tuned"', "training.global_batch_size=8"])
    odd = Preset(name="odd", devices=("X",), platform="amd", source="test", config={"training.micro_batch_size": 3})
    with pytest.raises(PresetError, match="does not fit"):
        resolve(config, backend="amd_megatron", device_name="X", preset=odd)


def _user_preset(folder, name, *, backend="torch", model="llama3.1-tiny", mbs=4):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(
        f'[preset]\nname = "{name}"\ndevices = ["H100"]\nplatform = "nvidia"\nsource = "tprimat tune"\n'
        f'backend = "{backend}"\nmodel = "{model}"\n\n[config]\n"training.micro_batch_size" = {mbs}\n'
        '\n[tune]\nwinner = "c-1"\n'
    )


def test_a_user_preset_beats_the_shipped_one_for_its_backend_and_model_only(tmp_path, monkeypatch):
    from tprimat.settings.methodology import PRESET_DIR_ENV, user_preset_dir

    monkeypatch.setenv(PRESET_DIR_ENV, str(tmp_path / "presets"))
    assert user_preset_dir() == tmp_path / "presets"
    _user_preset(tmp_path / "presets", "tuned-h100-torch-llama3.1-tiny")
    found = preset_for("NVIDIA H100 80GB HBM3", backend="torch", model="llama3.1-tiny")
    assert found.name == "tuned-h100-torch-llama3.1-tiny" and found.config == {"training.micro_batch_size": 4}
    # another backend or model on the same device keeps the shipped preset
    assert preset_for("NVIDIA H100 80GB HBM3", backend="nvd_megatron", model="llama3.1-tiny").name == "h100"
    assert preset_for("NVIDIA H100 80GB HBM3", backend="torch", model="llama3.1-8b").name == "h100"


def test_a_broken_user_preset_is_an_error_naming_the_file(tmp_path, monkeypatch):
    from tprimat.settings.methodology import PRESET_DIR_ENV

    monkeypatch.setenv(PRESET_DIR_ENV, str(tmp_path))
    (tmp_path / "bad.toml").write_text("[preset\n")
    with pytest.raises(PresetError, match="bad.toml"):
        preset_for("H100")


def _megatron_owned():
    from tprimat.plugins.megatron.owned import config_owned

    return config_owned()


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"overrides": {"global_batch_size": 256}}, "global_batch_size (set from training.global_batch_size)"),
        ({"overrides": {"seq_length": 4096}}, "seq_length (set from training.seq_length)"),
        ({"args": ["--global-batch-size", "256"]}, "--global-batch-size (set from training.global_batch_size)"),
        ({"args": ["--seq-length=4096"]}, "--seq-length (set from training.seq_length)"),
    ],
)
def test_a_preset_may_not_set_a_framework_setting_that_a_config_field_owns(table, named):
    # the config and the result would say 128 / 8192 while the framework ran the preset's values
    config = load_config(None, ['benchmark.methodology="tuned"'])
    sneaky = Preset(name="sneaky", devices=("X",), platform="amd", source="test", backends={"amd_megatron": table})
    with pytest.raises(PresetError, match=re.escape(named)):
        resolve(config, backend="amd_megatron", device_name="X", preset=sneaky, owned=_megatron_owned())


def test_a_preset_may_set_a_framework_switch_no_config_field_owns():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    table = {"overrides": {"gradient_accumulation_fusion": False}}
    free = Preset(name="free", devices=("X",), platform="amd", source="test", backends={"amd_megatron": table})
    resolved = resolve(config, backend="amd_megatron", device_name="X", preset=free, owned=_megatron_owned())
    assert resolved.overrides == {"gradient_accumulation_fusion": False}


def test_a_preset_for_the_other_vendor_is_refused():
    config = load_config(None, ['benchmark.methodology="tuned"'])
    with pytest.raises(PresetError, match="preset mi300x is for amd devices and backend nvd_nemo runs on nvidia"):
        resolve(config, backend="nvd_nemo", device_name="AMD Instinct MI300X", platform="nvidia")


def test_a_preset_applies_each_models_published_settings_to_that_model_only():
    llama = load_config(None, ['benchmark.methodology="tuned"', 'benchmark.model="llama3.1-8b"'])
    qwen = load_config(None, ['benchmark.methodology="tuned"', 'benchmark.model="qwen2.5-7b"'])
    on_llama = resolve(llama, backend="amd_primus", device_name="AMD Instinct MI300X", platform="amd")
    on_qwen = resolve(qwen, backend="amd_primus", device_name="AMD Instinct MI300X", platform="amd")
    # Primus's Llama experiment: micro-batch 2; its Qwen experiment: Turbo attention
    assert on_llama.config.training.micro_batch_size == 2 and "use_turbo_attention" not in on_llama.overrides
    assert on_qwen.config.training.micro_batch_size == 1 and on_qwen.overrides == {"use_turbo_attention": True}
    # both ask for Transformer Engine's CK fused attention, which Primus's images run and the
    # preset's NVTE_CK_USES_BWD_V3 tunes
    assert on_llama.config.kernels.attention_backend == on_qwen.config.kernels.attention_backend == "fused"


def test_a_models_table_may_not_change_what_is_compared():
    from tprimat.settings.methodology import _parse

    data = {
        "preset": {"name": "bad", "devices": ["X"], "platform": "amd", "source": "test"},
        "models": {"llama3.1-8b": {"config": {"training.global_batch_size": 256}}},
    }
    with pytest.raises(PresetError, match=r"models\.llama3\.1-8b\.config\.training\.global_batch_size"):
        _parse("bad", data)


@pytest.mark.parametrize(
    ("device", "preset"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h100"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI308X", "mi300x"),  # not in the device table: matched by its own name
        ("NVIDIA GH200 480GB", None),  # its name contains H200; it is another device
        ("NVIDIA H100 NVL", None),  # another H100 than the SXM part the preset was made on
    ],
)
def test_a_preset_is_for_the_devices_it_names_not_for_names_that_contain_them(device, preset):
    found = preset_for(device)
    assert (found.name if found else None) == preset
