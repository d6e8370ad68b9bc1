"""The memory estimator: arithmetic, layouts, capacities and the fits answer."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tprimat import hookimpl
from tprimat.cli import cli
from tprimat.contract import BackendSpec
from tprimat.contract.registry import Registry
from tprimat.memory import MemoryEstimateError, estimate_memory, find_capacity, optimizer_layout
from tprimat.memory.capacity import DEVICE_CAPACITIES
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

LLAMA = get_model("llama3.1-8b")


def test_terms_add_up_to_the_total_and_every_term_states_its_formula():
    estimate = estimate_memory(load_config(), LLAMA)
    assert sum(gib for _, gib, _ in estimate.terms()) == pytest.approx(estimate.total_gib)
    for name, gib, formula in estimate.terms():
        assert formula.endswith(f"= {gib:.2f} GiB"), name
    assert estimate.fits is None and estimate.margin_gib is None and estimate.capacity_gib is None


def test_mixed_precision_megatron_layout_is_18_bytes_per_parameter_without_distributed_optimizer():
    config = load_config(overrides=["parallel.distributed_optimizer=false"])
    estimate = estimate_memory(config, LLAMA)
    weights_and_optimizer = estimate.parameters_gib + estimate.gradients_gib + estimate.optimizer_states_gib
    assert weights_and_optimizer * 2**30 == pytest.approx(18 * LLAMA.parameter_count)


def test_distributed_optimizer_shards_master_weights_and_moments_over_data_parallel_ranks():
    full = estimate_memory(load_config(overrides=["parallel.distributed_optimizer=false"]), LLAMA)
    sharded = estimate_memory(load_config(), LLAMA)  # 8 GPUs, DP 8
    assert sharded.optimizer_states_gib == pytest.approx(full.optimizer_states_gib / 8)
    assert sharded.parameters_gib == pytest.approx(full.parameters_gib)
    assert sharded.gradients_gib == pytest.approx(full.gradients_gib)


def test_tensor_parallelism_splits_weights_and_sequence_parallelism_splits_the_rest_of_the_activations():
    tp1 = estimate_memory(load_config(), LLAMA)
    tp2 = estimate_memory(load_config(overrides=["parallel.tensor=2"]), LLAMA)
    tp2_sp = estimate_memory(load_config(overrides=["parallel.tensor=2", "parallel.sequence_parallel=true"]), LLAMA)
    assert tp2.parameters_gib == pytest.approx(tp1.parameters_gib / 2, rel=1e-3)
    assert tp1.activations_gib > tp2.activations_gib > tp2_sp.activations_gib


def test_full_recompute_keeps_only_layer_inputs_and_selective_changes_nothing_with_flash_attention():
    none = estimate_memory(load_config(), LLAMA)
    selective = estimate_memory(load_config(overrides=["training.recompute=selective"]), LLAMA)
    full = estimate_memory(load_config(overrides=["training.recompute=full"]), LLAMA)
    assert selective.activations_gib == pytest.approx(none.activations_gib)
    assert any("selective" in note for note in selective.notes)
    assert full.activations_gib < none.activations_gib / 3
    assert "full recompute" in full.formulas["activations"]


def test_unfused_attention_adds_the_quadratic_score_term_that_selective_recompute_removes():
    flash = estimate_memory(load_config(), LLAMA)
    unfused = estimate_memory(load_config(overrides=["kernels.attention_backend=unfused"]), LLAMA)
    unfused_sel = estimate_memory(
        load_config(overrides=["kernels.attention_backend=unfused", "training.recompute=selective"]), LLAMA
    )
    scores = 2 * LLAMA.num_attention_heads * 8192**2 * LLAMA.num_layers / 2**30
    assert unfused.activations_gib - flash.activations_gib == pytest.approx(scores)
    assert unfused_sel.activations_gib == pytest.approx(flash.activations_gib)


def test_fp8_keeps_extra_weight_copies_and_fp32_has_no_master_copy():
    bf16 = estimate_memory(load_config(), LLAMA)
    fp8 = estimate_memory(load_config(overrides=["precision.dtype='fp8'"]), LLAMA)
    fp32 = estimate_memory(load_config(overrides=["precision.dtype='fp32'"]), LLAMA)
    assert fp8.parameters_gib > bf16.parameters_gib
    assert "FP8" in fp8.formulas["parameters"]
    assert fp32.parameters_gib == pytest.approx(2 * bf16.parameters_gib)
    assert "0 B master" in fp32.formulas["optimizer_states"]


def test_torch_backend_fsdp2_shards_all_sixteen_bytes_and_ddp_shards_nothing():
    fsdp = optimizer_layout(load_config(), trainer="pytorch")
    ddp = optimizer_layout(load_config(overrides=["parallel.strategy='ddp'"]), trainer="pytorch")
    assert (fsdp.params_shards, fsdp.grads_shards, fsdp.optimizer_shards) == (8, 8, 8)
    assert fsdp.param_bytes + fsdp.grad_bytes + fsdp.master_bytes + fsdp.moment_bytes == 16
    assert (ddp.params_shards, ddp.grads_shards, ddp.optimizer_shards) == (1, 1, 1)
    sharded = estimate_memory(load_config(), LLAMA, trainer="pytorch")
    assert sharded.gradients_gib * 2**30 == pytest.approx(4 * LLAMA.parameter_count / 8)


def test_llama_8b_at_the_shipped_defaults_fits_an_mi300x_but_an_h100_only_with_full_recompute():
    mi300x = estimate_memory(load_config(), LLAMA, device="MI300X")
    h100 = estimate_memory(load_config(), LLAMA, device="NVIDIA H100 80GB HBM3")
    h100_full = estimate_memory(load_config(overrides=["training.recompute=full"]), LLAMA, device="H100")
    assert mi300x.fits and mi300x.device == "MI300X" and mi300x.margin_gib > 50
    assert h100.fits is False and h100.margin_gib < 0 and h100.device == "H100-SXM"
    assert h100_full.fits
    assert h100.margin_gib == pytest.approx(h100.capacity_gib - h100.total_gib)


def test_given_capacity_wins_and_an_unknown_device_is_an_actionable_error():
    estimate = estimate_memory(load_config(), LLAMA, device="MI300X", capacity_gib=64)
    assert estimate.capacity_gib == 64 and estimate.capacity_source == "given" and estimate.fits is False
    with pytest.raises(MemoryEstimateError, match="no memory capacity known for device 'TPU v5'.*--capacity-gib"):
        estimate_memory(load_config(), LLAMA, device="TPU v5")
    assert estimate_memory(load_config(), LLAMA, device="TPU v5", capacity_gib=95).capacity_gib == 95
    with pytest.raises(MemoryEstimateError, match="positive"):
        estimate_memory(load_config(), LLAMA, capacity_gib=0)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA B200", "B200"),
        ("AMD Instinct MI325X", "MI325X"),
    ],
)
def test_device_names_as_runtimes_print_them_find_their_capacity(name, key):
    row = find_capacity(name)
    assert row is not None and row.key == key


def test_every_capacity_names_its_source_and_is_in_gib():
    for row in DEVICE_CAPACITIES:
        assert row.source and 10 < row.capacity_gib < 400, row.key
    assert find_capacity("MI300X").capacity_gib == pytest.approx(191.98, abs=0.01)


def test_torch_backend_counts_the_eager_modules_activations_which_exceed_the_fused_kernels():
    fused = estimate_memory(load_config(), LLAMA)
    eager = estimate_memory(load_config(), LLAMA, trainer="pytorch")
    assert "eager modules" in eager.formulas["activations"] and "10V" in eager.formulas["activations"]
    h, q, kv, F = 4096, 4096, 1024, 14336
    per_layer = 8192 * (12 * h + 6 * q + 4 * kv + 8 * F)
    logits = 8192 * (6 * h + 10 * LLAMA.vocab_size)
    tokens = 16 * 8192
    assert eager.activations_gib * 2**30 == pytest.approx(32 * per_layer + logits + tokens)
    assert eager.activations_gib > 1.3 * fused.activations_gib


def test_a_mig_device_name_is_not_given_the_whole_gpus_memory():
    """CUDA names a MIG device ``... MIG 1g.10gb``: the capacity table holds the whole H100's 79 GiB."""
    from tprimat.memory.estimate import MemoryEstimateError, estimate_memory
    from tprimat.settings.config import load_config
    from tprimat.settings.models import get_model

    config = load_config(overrides=["benchmark.model=llama3.1-8b", "training.recompute=full"])
    with pytest.raises(MemoryEstimateError, match=r"MIG device \(1g.10gb\).*--capacity-gib"):
        estimate_memory(config, get_model("llama3.1-8b"), device="NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    given = estimate_memory(
        config, get_model("llama3.1-8b"), device="NVIDIA H100 80GB HBM3 MIG 1g.10gb", capacity_gib=9.5
    )
    assert given.capacity_gib == 9.5 and given.fits is False


class _FsdpPlugin:
    """A third-party backend whose trainer is PyTorch FSDP2, declared the way any plugin would."""

    @hookimpl
    def register_backends(self):
        return [BackendSpec(name="my_fsdp", platform="any", framework="my-fsdp", description="x", trainer="pytorch")]


def test_the_layout_is_the_backends_declared_trainer_not_its_name():
    registry = Registry()
    registry.register(_FsdpPlugin(), name="my_fsdp_plugin")
    assert registry.backend("my_fsdp").spec.trainer == "pytorch"
    run = CliRunner().invoke(
        cli,
        ["memory", "estimate", "--model", "llama3.1-8b", "--backend", "my_fsdp", "--json"],
        obj={"registry_factory": lambda: registry},
        catch_exceptions=False,
    )
    assert json.loads(run.output)["layout"] == optimizer_layout(load_config(), trainer="pytorch").description
    megatron = CliRunner().invoke(cli, ["memory", "estimate", "--model", "llama3.1-8b", "--json"])
    assert json.loads(megatron.output)["layout"] == optimizer_layout(load_config()).description
    assert optimizer_layout(load_config()).description != optimizer_layout(load_config(), trainer="pytorch").description


def _one_process(*overrides: str):
    base = ["launch.nproc_per_node=1", "training.recompute='full'", "training.seq_length=2048"]
    return estimate_memory(load_config(overrides=[*base, *overrides]), LLAMA, trainer="pytorch")


def test_autocast_weight_copies_count_when_gradients_of_earlier_micro_batches_are_live():
    one = _one_process("training.global_batch_size=1")
    four = _one_process("training.global_batch_size=4")
    _, layer_linear = LLAMA.layer_parameters
    cast = LLAMA.num_layers * layer_linear + LLAMA.vocab_size * LLAMA.hidden_size  # linear weights + output layer
    assert (four.parameters_gib - one.parameters_gib) * 2**30 == pytest.approx(2 * cast)
    assert "3 earlier micro-batch(es)" in four.formulas["parameters"]
    assert "autocast" not in one.formulas["parameters"] and any("autocast" in n for n in one.notes)


def test_no_autocast_copies_under_fsdp2_bf16_parameters_or_fp32():
    fsdp = estimate_memory(load_config(), LLAMA, trainer="pytorch")  # 8 ranks, bf16 gathered layers
    fp32 = _one_process("training.global_batch_size=4", "precision.dtype='fp32'")
    assert "autocast" not in fsdp.formulas["parameters"] and "autocast" not in fp32.formulas["parameters"]


def test_remedies_leave_out_what_the_config_already_does():
    megatron = estimate_memory(load_config(overrides=["training.micro_batch_size=2"]), LLAMA)
    assert megatron.remedies[0] == "training.recompute=full"
    assert any("micro-batch" in r for r in megatron.remedies) and any("tensor" in r for r in megatron.remedies)
    torch_one = _one_process("training.global_batch_size=4")
    assert not any("recompute" in r or "tensor" in r for r in torch_one.remedies)
    assert any("one micro-batch a step" in r for r in torch_one.remedies)
    assert any("fsdp2" in r for r in torch_one.remedies)


def test_a_tied_output_layer_is_cast_like_an_untied_one():
    import attrs

    config = load_config(overrides=["launch.nproc_per_node=1", "training.global_batch_size=4"])
    untied = estimate_memory(config, LLAMA, trainer="pytorch")
    tied = estimate_memory(config, attrs.evolve(LLAMA, tie_embeddings=True), trainer="pytorch")
    # The untied model holds one more vocabulary × hidden matrix (4 B each); the copies are the same.
    extra = LLAMA.vocab_size * LLAMA.hidden_size * 4
    assert (untied.parameters_gib - tied.parameters_gib) * 2**30 == pytest.approx(extra)
    assert "cast weights × 2 B" in tied.formulas["parameters"]


def test_a_run_is_checked_against_what_the_runtime_can_allocate_not_the_management_tools_total():
    from tprimat.memory.capacity import usable_capacity

    smi_h200 = 143771 / 1024  # nvidia-smi's memory.total on an H200, in GiB
    assert usable_capacity("NVIDIA H200", smi_h200) == find_capacity("NVIDIA H200").capacity_gib == 139.8
    assert usable_capacity("NVIDIA H200", 60.0) == 60.0  # a smaller measured total (a MIG device's own) stays
    assert usable_capacity("NVIDIA H100 NVL", 93.1) == 93.1  # a datasheet figure never lowers a measurement
    assert usable_capacity("Some Future GPU", 50.0) == 50.0 and usable_capacity("NVIDIA H200", None) is None
