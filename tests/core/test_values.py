"""One reader of the values logs print (tprimat.contract.values), its rules and each caller's options."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tprimat.contract import typed_value
from tprimat.plugins.megatron.stated import bridge_config_dumps, scan_lines
from tprimat.plugins.nvd_nemo.dllogger import PARAMETER, model_config, read_stdout

LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
NEMO1_DLL = LOGS / "nemo" / "nemo1_2025-06-12_gpu-recipes_llama3-8b_8xB200_fp8_nemo25.04_dll-stdout_full.log"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" True ", True),
        ("False", False),
        ("-3", -3),
        ("+12", 12),
        ("0.0003", 0.0003),
        ("1.5E-04", 1.5e-4),
        ("-inf", -math.inf),
        ("None", "None"),  # a stated None is kept as the text the log printed
        ("true", "true"),  # Python's spellings only, unless asked
        ("1_000", "1_000"),  # float() would take it; no framework prints it
        ("153.81GB", "153.81GB"),  # units are the field readers' business
        ("9" * 5000, "9" * 5000),  # more digits than Python converts
        ("ring_exchange", "ring_exchange"),
    ],
)
def test_the_default_rules(text, expected):
    assert typed_value(text) == expected and type(typed_value(text)) is type(expected)


def test_nan_is_a_float():
    assert math.isnan(typed_value("nan"))


def test_options_nulls_lower_case_and_no_floats():
    assert typed_value("None", nulls=True) is None
    assert typed_value("null", nulls=True) == "null"
    assert typed_value("null", nulls=True, lower_case=True) is None
    assert typed_value("false", lower_case=True) is False
    assert typed_value("0.0003", floats=False) == "0.0003"
    assert typed_value("8192", floats=False) == 8192


def test_dllogger_stdout_records_read_with_python_spellings_and_none():
    lines = NEMO1_DLL.read_text(encoding="utf-8").splitlines()
    parameters = next(r for r in map(read_stdout, lines) if r is not None and r.step == PARAMETER)
    config = model_config(parameters)
    assert config["global_batch_size"] == 128 and config["mcore_gpt"] is True
    assert config["rampup_batch_size"] is None
    assert config["encoder_seq_length"] == 8192
    step = next(r for r in map(read_stdout, lines) if r is not None and r.step == 1)
    assert step.data["global_step"] == 1.0 and isinstance(step.data["global_step"], float)
    assert step.data["epoch"] == 0 and isinstance(step.data["epoch"], int)


def test_launcher_and_yaml_spellings_in_the_megatron_family_stated_values():
    found = scan_lines(["torchrun pretrain_gpt.py --seq_length 128 --profile true --profile_step_start 6"], "log")
    assert {k: f.value for k, f in found.items()} == {"seq_length": 128, "profile": True, "profile_step_start": 6}
    dump = [
        "_target_: megatron.bridge.training.config.ConfigContainer",
        "profiling: null",
        "optimizer:",
        "  lr: 0.0003",
        "  use_distributed_optimizer: true",
        "  weight_decay: None",
    ]
    ((_, values),) = bridge_config_dumps(dump)
    assert values["profiling"] is None
    assert values["optimizer.lr"] == "0.0003"  # sizes and switches only: floats stay text
    assert values["optimizer.use_distributed_optimizer"] is True
    assert values["optimizer.weight_decay"] is None
