"""Reading every argument a Megatron-family framework printed, from real logs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tprimat.plugins.megatron.argcheck import disagreements, unstated
from tprimat.plugins.megatron.argdump import MEGATRON_DUMP, PRIMUS_ARGS, PRIMUS_LINES, read_arguments
from tprimat.plugins.megatron.settings import ARGS

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
FULL15 = LOGS / "megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
OOM = LOGS / "megatron/mlm_core0.16rc0_2026-03-26_llama3-1b_1gpu_GH200_OOM-iter1_stdout.log"
MLM2023 = LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log"
ROCM = LOGS / "megatron/rocm-megatron_2024-09_llama-32L-h4096_1node8gpu_ROCm6.1_slurm-2631.out_normal.log"
P21_ARGS = LOGS / (
    "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07"
    "_lines331-2399_argument-dumps_excerpt.log"
)
P21 = LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log"
P57 = LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p57r2_no_tilelang_v2_proxy_trace_MI355X_2026-05-15_full.log"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)


def read(path: Path, **kwargs):
    return read_arguments(lines_of(path), path.name, **kwargs)


#: Every destination tprimat renders, with the values of the 15-iteration run (core 0.16.0rc0).
FULL15_PLAN = {
    "num_layers": 16,
    "hidden_size": 2048,
    "ffn_hidden_size": 8192,
    "num_attention_heads": 32,
    "kv_channels": 64,
    "group_query_attention": True,
    "num_query_groups": 8,
    "swiglu": True,
    "normalization": "RMSNorm",
    "norm_epsilon": 1e-5,  # printed as layernorm_epsilon 1e-05
    "position_embedding_type": "rope",
    "rotary_base": 500000,
    "use_rope_scaling": True,
    "rope_scaling_factor": 32.0,
    "max_position_embeddings": 2048,
    "untie_embeddings_and_output_weights": False,
    "add_bias_linear": False,
    "add_qkv_bias": False,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1,
    "sequence_parallel": False,
    "use_distributed_optimizer": True,
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "micro_batch_size": 2,
    "global_batch_size": 80,
    "seq_length": 2048,
    "train_iters": 15,
    "seed": 28,
    "optimizer": "adam",
    "lr": 3e-4,  # printed 0.0003
    "min_lr": 3e-5,
    "lr_warmup_iters": 2,
    "lr_decay_style": "cosine",
    "lr_decay_iters": 15,  # printed None: the scheduler decays over train_iters
    "weight_decay": 0.1,
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "adam_eps": 1e-8,
    "clip_grad": 1,  # printed 1.0
    "init_method_std": 0.008944,
    "recompute_granularity": None,
    "recompute_method": None,
    "recompute_num_layers": None,
    "bf16": True,
    "fp8": None,
    "fp8_recipe": "delayed",
    "fp8_amax_history_len": 1,
    "fp8_amax_compute_algo": "most_recent",
    "attention_backend": "auto",  # printed AttnBackend.auto
    "apply_rope_fusion": True,
    "bias_swiglu_fusion": True,
    "cross_entropy_loss_fusion": True,
    "cross_entropy_fusion_impl": "native",
    "make_vocab_size_divisible_by": 128,
    "mock_data": True,
    "data_path": None,
    "split": None,
    "train_data_path": None,
    "valid_data_path": None,
    "test_data_path": None,
    "tokenizer_type": "NullTokenizer",
    "tokenizer_model": None,
    "vocab_size": 32768,
    "log_interval": 1,
    "log_throughput": True,
    "eval_interval": 100,
    "eval_iters": 0,
    "save": None,
    "load": None,
    "finetune": False,
    "profile": False,
    "use_pytorch_profiler": False,
    "profile_step_start": 10,
    "profile_step_end": 12,
    "profile_ranks": [],
    "tensorboard_dir": "/iopsstor/scratch/cscs/elyulina/Megatron-LM-Attention-Benchmark/attn_bench/results/"
    "correctness/correctness_sink_te_1node_1gpu_tp1_pp1_1772684/tensorboard",
    "record_memory_history": False,
    "memory_snapshot_path": "snapshot.pickle",
    "eod_mask_loss": False,
    "gradient_accumulation_fusion": True,
}


# -- the forms, on real logs -----------------------------------------------------------------


def test_megatron_lm_dump_core_016():
    stated = read(FULL15)
    assert (stated.form, stated.source, stated.complete, stated.notes) == (MEGATRON_DUMP, f"{FULL15.name}:6", True, ())
    assert len(stated) == 692  # lines 7-698
    assert stated["micro_batch_size"] == "2"
    assert stated["seq_length"] == "2048"
    assert stated["layernorm_epsilon"] == "1e-05"  # core 0.16: --norm-epsilon's destination
    assert "norm_epsilon" not in stated
    assert stated["attention_backend"] == "AttnBackend.auto"
    assert stated["attn_kwargs"] == "['init_sink_zero=true']"
    assert stated["config_logger_dir"] == ""  # an empty string, printed after the dots
    # 48 characters or more: no dots, two spaces
    assert stated["inference_dynamic_batching_prefix_caching_coordinator_policy"] == "first_prefix_block"
    line = lines_of(FULL15).index("  micro_batch_size ................................ 2\n") + 1
    assert stated.where("micro_batch_size") == f"{FULL15.name}:{line}"


def test_megatron_lm_dump_of_a_failed_run():
    stated = read(OOM)
    assert (stated.form, stated.source, stated.complete) == (MEGATRON_DUMP, f"{OOM.name}:6", True)
    assert (stated["micro_batch_size"], stated["seq_length"]) == ("2", "8192")


def test_megatron_lm_dump_2023():
    stated = read(MLM2023)
    assert (stated.form, stated.source, len(stated)) == (MEGATRON_DUMP, f"{MLM2023.name}:8", 225)
    assert (stated["micro_batch_size"], stated["seq_length"], stated["layernorm_epsilon"]) == ("2", "1024", "1e-05")
    assert stated["data_path"] == "['/workspace/data/my-gpt2_text_document']"


def test_rocm_fork_dump_behind_the_srun_prefix():
    stated = read(ROCM)  # every line "0: "
    assert (stated.form, stated.source, len(stated)) == (MEGATRON_DUMP, f"{ROCM.name}:34", 282)
    assert (stated["micro_batch_size"], stated["seq_length"], stated["norm_epsilon"]) == ("5", "2048", "1e-05")
    assert stated["profile_ranks"] == "[0]"


def test_primus_logs_the_megatron_dump_through_its_logger():
    # "[20260507 13:46:59][rank-0/8][DEBUG]    [----arguments.py:1576] :   seq_length ... 128", ANSI kept
    stated = read(P21_ARGS)
    assert (stated.form, stated.source, stated.complete) == (MEGATRON_DUMP, f"{P21_ARGS.name}:1110", True)
    assert len(stated) == 819  # lines 1111-1929
    assert (stated["micro_batch_size"], stated["seq_length"]) == ("1", "128")
    assert stated["layernorm_epsilon"] == "1e-05"  # Megatron-core's
    assert stated["norm_epsilon"] == "1e-06"  # Primus's model-config key, merged into the namespace
    assert stated["attention_backend"] == "auto"  # Primus passes text, not the enum
    assert stated["use_turbo_attention"] == "False"  # a Primus-only key


def test_primus_final_backend_args_when_the_dump_is_not_there():
    # The same file up to before Megatron's dump (a Primus log at INFO level has none).
    stated = read_arguments(lines_of(P21_ARGS)[:1100], P21_ARGS.name)
    assert (stated.form, stated.source, stated.complete) == (PRIMUS_ARGS, f"{P21_ARGS.name}:112", True)
    assert len(stated) == 673 + 143  # both sections, as announced: no note about a count
    assert (stated["micro_batch_size"], stated["seq_length"]) == ("1", "128")
    assert stated["norm_epsilon"] == "1e-06"  # from "Primus-specific parameters"
    assert stated["attention_backend"] == "auto"  # "auto (str)": the type is not part of the value
    assert stated["app_tag_run_version"] == "0.0.0"
    assert len(stated.notes) == 1 and "Primus's final backend args" in stated.notes[0]


def test_primus_argument_lines_without_a_header():
    # p57r2 was grep-filtered by its author: 9 lines of the dump survive, without its header.
    stated = read(P57)
    assert (stated.form, stated.source, stated.complete) == (PRIMUS_LINES, f"{P57.name}:41", False)
    assert len(stated) == 9
    assert stated["log_avg_skip_iterations"] == "2"
    assert stated["use_v4_triton_attention"] == "True"
    assert stated["iterations_to_skip"] == "[]"
    assert "filtered" in stated.notes[0]


def test_no_arguments_where_none_are_printed():
    # The p21 excerpt omits the lines with the dumps; its launcher lines are no argument block.
    stated = read(P21)
    assert len(stated) == 0 and not stated
    assert (stated.start, stated.form, stated.source) == (None, "", P21.name)


# -- copies, prefixes, bounds ------------------------------------------------------------------


def _rocm_block(rank: int = 0, **changed: str) -> list[str]:
    """The ROCm fork's dump (lines 34-317, each "0: "), as srun prints it for ``rank``, values ``changed``."""
    lines = []
    for line in lines_of(ROCM)[33:317]:
        name = line[3:].split(" ", 3)[2] if line.startswith("0:   ") else ""
        if name in changed:
            line = f"0:   {name} .... {changed[name]}\n"
        lines.append(f"{rank}{line[1:]}")
    return lines


def test_interleaved_copies_keep_the_first_and_say_where_they_disagree():
    first, second = _rocm_block(0), _rocm_block(1, micro_batch_size="6")
    mixed = [line for pair in zip(first, second, strict=True) for line in pair]
    stated = read_arguments(mixed, "two-ranks.log")
    assert (stated.source, stated["micro_batch_size"], len(stated)) == ("two-ranks.log:1", "5", 282)
    assert len(stated.notes) == 1
    note = stated.notes[0]
    assert "printed again at two-ranks.log:2" in note and "micro_batch_size=6 (first: 5)" in note


def test_copies_printed_one_after_another():
    stated = read_arguments(
        [*_rocm_block(0), "0: > building GPT model ...\n", *_rocm_block(1, seq_length="4096")], "ranks.log"
    )
    assert (stated.source, stated["seq_length"]) == ("ranks.log:1", "2048")
    assert len(stated.notes) == 1 and "seq_length=4096 (first: 2048)" in stated.notes[0]
    block = lines_of(FULL15)[5:699]  # no prefix: the second copy is a second block of the same stream
    again = [line.replace("  seed ............................................ 28", "  seed .... 29") for line in block]
    stated = read_arguments([*block, *again], "restarted.log")
    assert stated["seed"] == "28" and "printed again at restarted.log:695 with other values: seed=29" in stated.notes[0]


def test_copies_that_agree_say_nothing():
    first, second = _rocm_block(0), _rocm_block(1)
    stated = read_arguments([line for pair in zip(first, second, strict=True) for line in pair], "x.log")
    assert stated.notes == () and stated.complete


def test_a_block_cut_off_by_a_new_one_gives_way_to_the_complete_one():
    block = _rocm_block()
    stated = read_arguments([*block[:20], *block], "restart.log")
    assert (stated.source, stated.complete, len(stated)) == ("restart.log:21", True, 282)


def test_timestamps_and_colour_around_the_lines_do_not_matter():
    block = lines_of(FULL15)[5:699]
    stamped = [f"\x1b[32m[2026-03-31 14:11:11.448457]\x1b[0m [rank-3/8] {line}" for line in block]
    plain, prefixed = read_arguments(block, "a.log"), read_arguments(stamped, "a.log")
    assert prefixed.arguments == plain.arguments and prefixed.complete


def test_reading_stops_when_the_block_ends():
    def poisoned() -> Iterator[str]:
        raise AssertionError("read past the end of the argument dump")
        yield ""

    # The dump takes lines 6-699; a copy could start in the 694 lines after it, not later.
    noise = ["INFO:megatron.core.num_microbatches_calculator:setting number of microbatches to constant 40\n"] * 694
    stated = read_arguments(itertools.chain(lines_of(FULL15)[:699], noise, poisoned()), FULL15.name)
    assert stated.complete and len(stated) == 692


def test_reading_stops_at_the_limit():
    stated = read(FULL15, limit=100)
    assert (stated.form, stated.complete, len(stated)) == (MEGATRON_DUMP, False, 94)
    assert "cut off (the first 100 lines end)" in stated.notes[0]


# -- the plan against the real logs --------------------------------------------------------------


def test_every_destination_tprimat_renders_is_printed_by_core_016():
    assert unstated(dict.fromkeys(ARGS), read(FULL15)) == []


def test_core_016_dump_agrees_with_a_matching_plan():
    stated = read(FULL15)
    assert unstated(FULL15_PLAN, stated) == []
    assert disagreements(FULL15_PLAN, stated) == []


@pytest.mark.parametrize(
    ("setting", "value", "printed"),
    [
        ("micro_batch_size", 4, "2"),
        ("seq_length", 4096, "2048"),
        ("norm_epsilon", 1e-6, "1e-05"),
        ("lr", 3e-5, "0.0003"),
        ("attention_backend", "flash", "AttnBackend.auto"),
        ("lr_decay_iters", 10, "None"),
        ("profile_ranks", [0], "[]"),
        ("bf16", False, "True"),
        ("fp8", "hybrid", "None"),
    ],
)
def test_one_changed_setting_is_one_disagreement(setting, value, printed):
    stated = read(FULL15)
    found = disagreements({**FULL15_PLAN, setting: value}, stated)
    assert [(d.setting, d.planned, d.stated) for d in found] == [(setting, value, printed)]
    name = found[0].printed_as or setting
    assert found[0].source == stated.where(name)
    assert (found[0].printed_as == "layernorm_epsilon") == (setting == "norm_epsilon")


ROCM_PLAN = {
    "num_layers": 32,
    "hidden_size": 4096,
    "ffn_hidden_size": 14336,
    "group_query_attention": True,
    "num_query_groups": 8,
    "norm_epsilon": 1e-5,
    "micro_batch_size": 5,
    "global_batch_size": 80,
    "seq_length": 2048,
    "train_iters": 10,
    "optimizer": "sgd",
    "lr": 1e-4,
    "min_lr": 1e-5,
    "lr_decay_iters": 320000,
    "split": "949,50,1",
    "train_data_path": None,  # this fork reads its own --train-data instead
    "tokenizer_type": "HFTokenizer",
    "profile_ranks": [0],
    "use_distributed_optimizer": True,
    "untie_embeddings_and_output_weights": True,
    "attention_backend": "flash",  # this fork has no --attention-backend
}


def test_rocm_fork_agrees_with_a_matching_plan():
    stated = read(ROCM)
    assert disagreements(ROCM_PLAN, stated) == []
    assert unstated(ROCM_PLAN, stated) == ["attention_backend"]
    found = disagreements({**ROCM_PLAN, "micro_batch_size": 4}, stated)
    assert [(d.setting, d.stated, d.source) for d in found] == [("micro_batch_size", "5", f"{ROCM.name}:175")]


def test_2023_dump_agrees_and_lacks_what_megatron_had_not_yet():
    plan = {
        "micro_batch_size": 2,
        "global_batch_size": 8,
        "seq_length": 1024,
        "norm_epsilon": 1e-5,  # 2023: --layernorm-epsilon, destination layernorm_epsilon
        "tensor_model_parallel_size": 4,
        "sequence_parallel": True,
        "data_path": ["/workspace/data/my-gpt2_text_document"],
        "split": "700,200,100",
        "bf16": False,
        "mock_data": True,
        "attention_backend": "flash",
    }
    stated = read(MLM2023)
    assert disagreements(plan, stated) == []
    assert unstated(plan, stated) == ["mock_data", "attention_backend"]


#: Primus experiment overrides as tprimat renders them, with the p21 run's values.
P21_PLAN = {
    "num_layers": 8,
    "micro_batch_size": 1,
    "global_batch_size": 16,
    "seq_length": 128,
    "max_position_embeddings": 128,
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 2,
    "expert_model_parallel_size": 4,
    "num_experts": 8,
    "moe_router_topk": 2,
    "train_iters": 10,
    "lr": 1e-5,
    "min_lr": 0.0,
    "lr_warmup_iters": 0,
    "lr_decay_iters": 10,
    "recompute_granularity": "full",
    "recompute_method": "block",
    "recompute_num_layers": 0,
    "overlap_grad_reduce": False,
    "overlap_param_gather": False,
    "bf16": True,
    "fp8": None,
    "attention_backend": "auto",
    "mock_data": True,
    "data_path": None,
    "tokenizer_type": "NullTokenizer",
    "vocab_size": 129280,
    "compress_ratios": [0, 0, 4, 4, 4, 4, 4, 0],  # printed as the text Primus was given
    "profile": False,
    "use_pytorch_profiler": False,
    "profile_step_start": 6,
    "profile_step_end": 7,
    "profile_ranks": [0],
    "save": None,  # Primus printed <experiment>/checkpoints, with disable_last_saving
    "disable_last_saving": True,
    "auto_continue_train": False,
    "disable_tensorboard": True,
    "tensorboard_dir": None,
    "use_turbo_attention": False,
}


def test_primus_dump_agrees_with_its_overrides():
    stated = read(P21_ARGS)
    assert unstated(P21_PLAN, stated) == []
    assert disagreements(P21_PLAN, stated) == []
    found = disagreements({**P21_PLAN, "pipeline_model_parallel_size": 1}, stated)
    assert [(d.setting, d.stated) for d in found] == [("pipeline_model_parallel_size", "2")]


def test_primus_final_backend_args_are_before_megatrons_own_conversions():
    # The launcher gave "--fp8 null": Primus's block holds the text ("fp8 : null (str)"),
    # Megatron-LM's dump the None it ran with.  So the dump is read when the log has it.
    stated = read_arguments(lines_of(P21_ARGS)[:1100], P21_ARGS.name)
    found = disagreements(P21_PLAN, stated)
    assert [(d.setting, d.stated, d.source) for d in found] == [("fp8", "null", f"{P21_ARGS.name}:300")]
    assert read(P21_ARGS)["fp8"] == "None"
    found = disagreements({**P21_PLAN, "fp8": "null", "use_turbo_attention": True}, stated)
    assert [(d.setting, d.stated) for d in found] == [("use_turbo_attention", "False")]


def test_primus_norm_epsilon_is_the_one_megatron_core_built_the_model_with():
    # Core 0.16 under Primus prints Primus's norm_epsilon (1e-06) and Megatron's layernorm_epsilon
    # (1e-05); outside DeepSeek-V4's config only the latter reaches the model.
    stated = read(P21_ARGS)
    found = disagreements({"norm_epsilon": 1e-6}, stated)
    assert [(d.setting, d.stated, d.printed_as) for d in found] == [("norm_epsilon", "1e-05", "layernorm_epsilon")]
