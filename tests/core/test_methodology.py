"""iso vs tuned: presets per device, every deviation listed, the compared work never changed."""

from __future__ import annotations

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


@pytest.mark.parametrize(("device", "name"), [
    ("AMD Instinct MI300X", "mi300x"), ("AMD Instinct MI325X", "mi300x"),
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h100"), ("NVIDIA A100", None), (None, None),
])
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
    bad = Preset(name="bad", devices=("X",), platform="amd", source="test",
                 config={"training.seq_length": 2048})
    with pytest.raises(PresetError, match="training.seq_length"):
        resolve(config, backend="amd_megatron", device_name="X", preset=bad)


def test_a_preset_that_breaks_the_config_is_refused():
    config = load_config(None, ['benchmark.methodology="tuned"', "training.global_batch_size=8"])
    odd = Preset(name="odd", devices=("X",), platform="amd", source="test",
                 config={"training.micro_batch_size": 3})
    with pytest.raises(PresetError, match="does not fit"):
        resolve(config, backend="amd_megatron", device_name="X", preset=odd)
