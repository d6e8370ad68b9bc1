"""What NeMo logs state about the workload outside their step lines (``BackendSpec.stated_facts``)."""

from __future__ import annotations

import pytest

from tests.plugins.nvd_nemo.nemologs import AWS, CELL14, DIT, E5, LLAMA8B, LLAMA70B, QWEN
from tprimat.contract.backend import STATED_LINES
from tprimat.plugins.nvd_nemo import BACKEND
from tprimat.plugins.nvd_nemo.runtable import resolved_arguments


def _head(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return [line for line, _ in zip(handle, range(STATED_LINES), strict=False)]


def _stated(path, parsed=None):
    facts, notes = BACKEND.stated_facts(_head(path), path.name, parsed or {})
    return {f.key: f.value for f in facts}, {f.key: f.source for f in facts}, notes


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            LLAMA8B,
            {"world_size": 8, "train_iters": 20, "global_batch_size": 128, "micro_batch_size": 2,
             "seq_length": 8192, "tensor_parallel": 1, "pipeline_parallel": 1, "context_parallel": 1,
             "fp8": True, "bf16": True, "data_parallel": 8},
        ),
        (
            LLAMA70B,  # pod 0 of 8: trainer.devices 8 × trainer.num_nodes 8
            {"world_size": 64, "global_batch_size": 128, "micro_batch_size": 1, "seq_length": 8192,
             "tensor_parallel": 2, "pipeline_parallel": 4, "virtual_pipeline_parallel": 5, "context_parallel": 1,
             "data_parallel": 8},
        ),
        (QWEN, {"world_size": 16, "global_batch_size": 256, "micro_batch_size": 4, "seq_length": 4096,
                "expert_parallel": 8, "data_parallel": 16}),
    ],
    ids=["llama3-8b", "llama3-70b", "qwen3-30b"],
)  # fmt: skip
def test_nemo1_experiment_configuration(path, expected):
    values, sources, notes = _stated(path)
    assert {k: values[k] for k in expected} == expected
    assert notes == []


def test_the_world_size_says_where_it_comes_from():
    # Line numbers count each carriage-return redraw as a line: two on line 437, so 451 is 453.
    _, sources, _ = _stated(LLAMA70B)
    assert sources["world_size"] == (
        f"NeMo experiment configuration, trainer.devices 8 × trainer.num_nodes 8, at {LLAMA70B.name}:453"
    )
    assert sources["seq_length"].endswith("model.encoder_seq_length, at " + LLAMA70B.name + ":509")


def test_the_file_name_and_job_name_are_not_the_config():
    # The 70B log's name says cp2, its config context_parallel_size 1; the Qwen run.name says pp2/ep4.
    assert _stated(LLAMA70B)[0]["context_parallel"] == 1
    assert _stated(QWEN)[0]["pipeline_parallel"] == 1 and _stated(QWEN)[0]["expert_parallel"] == 8


def test_nemo_run_resolved_arguments_table():
    values, sources, _ = _stated(DIT)
    assert values["seq_length"] == 1024 and values["micro_batch_size"] == 1 and values["global_batch_size"] == 8
    assert values["tensor_parallel"] == 1 and values["pipeline_parallel"] == 1 and values["context_parallel"] == 1
    assert sources["seq_length"] == f"NeMo-Run resolved arguments, data.seq_length, at {DIT.name}:38"
    # devices='auto' states no number: the world size comes from the start-up lines instead.
    assert values["world_size"] == 2 and "Starting with N processes" in sources["world_size"]
    table = resolved_arguments(_head(DIT))
    assert table["trainer.devices"][0] == "'auto'" and "trainer.plugins" not in table  # cut with "…"
    assert table["data.model_config.num_layers"][0] == 1  # nested objects keep their path


def test_nemo2_start_up_lines():
    values, _, _ = _stated(E5)  # one process: no MEMBER line, only "Starting with 1 processes"
    assert values == {"world_size": 1, "data_parallel": 1, "tensor_parallel": 1, "pipeline_parallel": 1,
                      "context_parallel": 1}  # fmt: skip
    values, _, _ = _stated(CELL14)  # TP 2 on 8 GPUs
    assert (values["world_size"], values["data_parallel"], values["tensor_parallel"]) == (8, 4, 2)
    assert "seq_length" not in values  # NeMo 2 with mock data never prints it


def test_a_log_that_states_nothing_stays_silent():
    assert _stated(AWS) == ({}, {}, [])


def test_a_disagreement_with_the_parsed_facts_is_noted():
    _, _, notes = _stated(LLAMA8B, {"world_size": 16})
    assert notes == [
        f"the log states world_size=8 (NeMo experiment configuration, trainer.devices 8 × trainer.num_nodes 1, "
        f"at {LLAMA8B.name}:453) and 16 elsewhere: kept 16"
    ]
