"""Comparing rendered settings with the text a framework printed: by meaning, with the documented transformations."""

from __future__ import annotations

import enum
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tprimat.plugins.megatron import argcheck
from tprimat.plugins.megatron.argcheck import TRANSFORMS, disagreements, unstated, values_agree

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
#: Inside a printed list: Python prints nan and inf as bare names, which are no literals.
ELEMENTS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
VALUES = SCALARS | st.recursive(
    ELEMENTS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner), max_leaves=8
)


@given(VALUES)
def test_a_value_printed_the_way_python_prints_it_agrees_with_itself(value):
    assert values_agree(value, str(value))


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_an_int_printed_as_argparse_prints_a_float_agrees(number):
    assert values_agree(number, str(float(number)))


@given(st.integers(), st.integers())
def test_different_numbers_disagree(a, b):
    assert values_agree(a, str(b)) == (a == b)


@pytest.mark.parametrize(
    ("planned", "text"),
    [
        (1e-5, "1e-05"),
        (1e-5, "1e-5"),
        (1e-5, "0.00001"),
        (0.00001, "1e-05"),
        (1, "1.0"),
        (500000, "500000"),
        (True, "True"),
        (False, "False"),
        (None, "None"),
        ("flash", "AttnBackend.flash"),
        ("flash", "flash"),
        (["a", "b"], "['a', 'b']"),
        ([0, 0, 4], "[0,0,4]"),
        ((1, 2), "(1, 2)"),
        ({"a": 1}, "{'a': 1}"),
        (Path("/runs/x"), "/runs/x"),
        (float("nan"), "nan"),
    ],
)
def test_same_meaning(planned, text):
    assert values_agree(planned, text)


@pytest.mark.parametrize(
    ("planned", "text"),
    [
        (1e-5, "1e-06"),
        (0.1, "0.10000000000000002"),  # exact: no tolerance
        (1, "True"),
        (True, "1"),
        (True, "true"),  # Megatron prints Python's spelling; "true" would be a string
        (None, "null"),
        (None, ""),
        ("bfloat16", "torch.bfloat16"),  # a dtype, not an enum member
        ("flash", "AttnBackend.fused"),
        ([1], "[1, 2]"),
        (["a"], "a"),
        (2, "two"),
    ],
)
def test_other_meaning(planned, text):
    assert not values_agree(planned, text)


def test_a_planned_enum_agrees_with_its_member_printed():
    class Backend(enum.Enum):
        flash = "flash"

    assert values_agree(Backend.flash, "Backend.flash")
    assert values_agree(Backend.flash, "flash")
    assert not values_agree(Backend.flash, "fused")


def test_an_unprinted_setting_is_unstated_not_a_disagreement():
    plan = {"micro_batch_size": 2, "mock_data": True}
    assert disagreements(plan, {"micro_batch_size": "2"}) == []
    assert unstated(plan, {"micro_batch_size": "2"}) == ["mock_data"]


def test_a_plain_mapping_gives_disagreements_without_a_line():
    (found,) = disagreements({"seq_length": 4096}, {"seq_length": "2048"})
    assert (found.setting, found.planned, found.stated, found.source, found.printed_as) == (
        "seq_length",
        4096,
        "2048",
        "",
        "",
    )
    assert str(found) == "seq_length: rendered 4096, the framework states 2048 at "


# -- the transformation table, one rule each ----------------------------------------------------------


def test_norm_epsilon_is_read_under_layernorm_epsilon_first():
    assert disagreements({"norm_epsilon": 1e-5}, {"layernorm_epsilon": "1e-05"}) == []
    assert disagreements({"norm_epsilon": 1e-5}, {"norm_epsilon": "1e-05"}) == []
    (found,) = disagreements({"norm_epsilon": 1e-6}, {"layernorm_epsilon": "1e-05", "norm_epsilon": "1e-06"})
    assert found.printed_as == "layernorm_epsilon"
    assert unstated({"norm_epsilon": 1e-5}, {}) == ["norm_epsilon"]


def test_num_query_groups_unset_without_grouped_query_attention():
    plan = {"group_query_attention": False, "num_query_groups": None}
    assert disagreements(plan, {"group_query_attention": "False", "num_query_groups": "1"}) == []
    gqa = {"group_query_attention": True, "num_query_groups": None}
    assert [d.setting for d in disagreements(gqa, {"group_query_attention": "True", "num_query_groups": "1"})] == [
        "num_query_groups"
    ]


def test_lr_decay_iters_unset_decays_over_train_iters():
    assert (
        disagreements({"train_iters": 15, "lr_decay_iters": 15}, {"train_iters": "15", "lr_decay_iters": "None"}) == []
    )
    found = disagreements({"train_iters": 15, "lr_decay_iters": 10}, {"train_iters": "15", "lr_decay_iters": "None"})
    assert [d.setting for d in found] == ["lr_decay_iters"]


def test_sequence_parallel_off_at_tensor_parallel_one():
    printed = {"tensor_model_parallel_size": "1", "sequence_parallel": "False"}
    assert disagreements({"tensor_model_parallel_size": 1, "sequence_parallel": True}, printed) == []
    printed2 = {"tensor_model_parallel_size": "2", "sequence_parallel": "False"}
    found = disagreements({"tensor_model_parallel_size": 2, "sequence_parallel": True}, printed2)
    assert [d.setting for d in found] == ["sequence_parallel"]


def test_rope_fusion_off_without_rope():
    plan = {"position_embedding_type": "learned_absolute", "apply_rope_fusion": True}
    assert disagreements(plan, {"position_embedding_type": "learned_absolute", "apply_rope_fusion": "False"}) == []
    plan = {"position_embedding_type": "rope", "apply_rope_fusion": True}
    assert len(disagreements(plan, {"position_embedding_type": "rope", "apply_rope_fusion": "False"})) == 1


def test_split_takes_the_legacy_default_with_a_data_path():
    assert disagreements({"data_path": ["d"], "split": None}, {"data_path": "['d']", "split": "969, 30, 1"}) == []
    assert len(disagreements({"data_path": None, "split": None}, {"data_path": "None", "split": "969, 30, 1"})) == 1


def test_primus_checkpoint_folder_without_a_final_save():
    printed = {"save": "/w/out/checkpoints", "disable_last_saving": "True"}
    assert disagreements({"save": None}, printed) == []
    assert len(disagreements({"save": None}, {**printed, "disable_last_saving": "False"})) == 1
    assert len(disagreements({"save": None}, {**printed, "save": "/w/out/elsewhere"})) == 1


def test_every_transformation_says_why():
    for setting, transform in TRANSFORMS.items():
        assert transform.why, setting
        assert f"\n{setting} " in (argcheck.__doc__ or ""), f"{setting} is missing from the module's table"


def test_nan_only_agrees_with_nan():
    assert values_agree(math.nan, "nan")
    assert not values_agree(math.nan, "1.0")
    assert not values_agree(1.0, "nan")
