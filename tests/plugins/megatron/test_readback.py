"""The Megatron family's readback on a real argument dump: what ran, against a plan, and its shared names."""

from __future__ import annotations

from pathlib import Path

from tprimat.plugins.megatron.readback import READBACK, typed

LOG = (
    Path(__file__).resolve().parents[2]
    / "fixtures/logs/megatron/mlm_core0.16rc0_2026-03-31_llama3-1b_1gpu_GH200_full15iter_stdout.log"
)


def _stated():
    return READBACK.read(LOG.read_text().splitlines(keepends=True)[:5000], LOG.name)


def test_the_dump_is_read_with_where_each_argument_was_printed():
    stated = _stated()
    assert stated.form == "Megatron-LM argument dump" and stated.source == f"{LOG.name}:6"
    assert stated.values["micro_batch_size"] == "2"
    assert stated.where["micro_batch_size"].startswith(f"{LOG.name}:")


def test_a_plan_that_matches_the_dump_has_no_disagreement_and_one_change_is_named():
    stated = _stated()
    plan = {name: typed(stated.values[name]) for name in ("micro_batch_size", "seq_length", "num_layers", "bf16")}
    assert READBACK.disagreements(plan, stated) == []
    (one,) = READBACK.disagreements({**plan, "micro_batch_size": 4}, stated)
    assert (one.setting, one.planned, one.stated) == ("micro_batch_size", 4, "2")
    assert one.source == stated.where["micro_batch_size"]


def test_a_log_read_alone_gives_the_shared_settings_from_what_it_printed():
    shared = READBACK.shared(_stated())
    assert shared["loss.eod_mask"] is False
    assert shared["norm.epsilon"] == 1e-05
    assert shared["init.std"] == 0.008944
    assert shared["precision.dtype"] == "bf16" and shared["precision.fp8_format"] is None
    assert shared["grad.accumulation_fusion"] is True


def test_printed_values_are_read_as_python_prints_them():
    assert typed("True") is True and typed("None") is None and typed("1e-05") == 1e-05
    assert typed("AttnBackend.flash") == "flash" and typed("[0]") == [0] and typed("cosine") == "cosine"
