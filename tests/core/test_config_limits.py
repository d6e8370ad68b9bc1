"""Config values are what they say: whole numbers stay whole, numbers are finite, sizes have limits.

A value that breaks a rule stops the command before anything starts, with one line naming the
key, where it was set (file and line, or the ``--set`` item) and the rule or the limit.
"""

from __future__ import annotations

import typing

import attrs
import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.settings import config as config_module
from tprimat.settings.config import (
    FLOAT_LIMITS,
    INT_LIMITS,
    MAX_ITERATIONS,
    MAX_SEQ_LENGTH,
    BenchmarkConfig,
    ConfigError,
    default_config_dict,
    load_config,
)


def refused(*overrides: str, path=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, list(overrides))
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "override",
    [
        "training.micro_batch_size=3.9",
        "training.seq_length=64.5",
        "training.micro_batch_size=2.0",
        "parallel.tensor=2.5",
    ],
)
def test_a_float_for_a_whole_number_is_an_error_never_truncated(override):
    key = override.split("=")[0]
    message = refused(override)
    assert f"--set {override}" in message and key in message and "must be a whole number" in message


def test_a_number_in_quotes_is_text_not_a_whole_number():
    message = refused('training.micro_batch_size="3.9"')
    assert "training.micro_batch_size" in message and "must be a whole number, not a string" in message


def test_a_float_in_a_file_names_the_file_and_line(tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text('[benchmark]\nmodel = "llama3.1-8b"\n\n[training]\n# the context\nseq_length = 64.5\n')
    message = refused(path=path)
    assert message.startswith(f"{path}:6: training.seq_length = 64.5 must be a whole number")


def test_a_config_file_that_is_not_utf8_is_one_line_with_the_byte_offset(tmp_path):
    path = tmp_path / "bench.toml"
    data = b'[benchmark]\nmodel = "llama3.1-8b"  # caf\xe9\n'
    path.write_bytes(data)
    message = refused(path=path)
    assert message.startswith(f"{path}:2: not UTF-8 text: byte 0xe9 at byte offset {data.index(0xE9)}")


def test_warmup_not_below_iterations_is_refused():
    message = refused("benchmark.warmup_iterations=20", "benchmark.iterations=4")
    assert "benchmark.warmup_iterations = 20 (--set benchmark.warmup_iterations=20)" in message
    assert "benchmark.iterations = 4" in message and "nothing measured" in message
    refused("benchmark.warmup_iterations=4", "benchmark.iterations=4")
    assert load_config(None, ["benchmark.warmup_iterations=3", "benchmark.iterations=4"]).benchmark.iterations == 4


@pytest.mark.parametrize(
    ("override", "limit"),
    [
        ("benchmark.iterations=100000000000000000000000", f"above the limit of {MAX_ITERATIONS} (10^9)"),
        ("training.seq_length=10000000000", f"above the limit of {MAX_SEQ_LENGTH} (2^24)"),
        ("training.global_batch_size=33554432", "above the limit of 16777216 (2^24)"),
        ("launch.nproc_per_node=4096", "above the limit of 1024"),
        ("launch.timeout_s=1e12", "above the limit of 31536000"),
        ("benchmark.seed=-1", "must be at least 0"),
        ("profile.ranks=[0, 99999999999]", "above the limit of 67108863 (2^26 - 1)"),
    ],
)
def test_absurd_sizes_are_refused_with_their_limit(override, limit):
    message = refused(override)
    assert override.split("=")[0] in message and limit in message


def test_iterations_written_as_a_float_never_start_a_run():
    assert "must be a whole number" in refused("benchmark.iterations=1e23")


@pytest.mark.parametrize("override", ["training.lr=nan", "training.clip_grad=inf", "cost.train_tokens=-inf"])
def test_numbers_must_be_finite(override):
    assert "must be a finite number" in refused(override)


def test_every_whole_number_setting_has_a_limit_and_the_shipped_configs_keep_them():
    for section in attrs.fields(BenchmarkConfig):
        hints = typing.get_type_hints(section.type, vars(config_module))
        for field in attrs.fields(section.type):
            if hints[field.name] in (int, list[int]):
                assert f"{section.name}.{field.name}" in INT_LIMITS
            elif f"{section.name}.{field.name}" in FLOAT_LIMITS:
                assert hints[field.name] is float
    load_config()
    load_config(base=default_config_dict(cpu=True))


def test_the_limits_hold_for_configs_built_in_code_too():
    config = load_config()
    with pytest.raises(ValueError, match="training.seq_length must be from 1 to 16777216"):
        attrs.evolve(config.training, seq_length=MAX_SEQ_LENGTH + 1)


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show", "--set", "training.seq_length=64.5"],
        ["run", "--dry-run", "--set", "training.seq_length=10000000000"],
        ["run", "--set", "benchmark.warmup_iterations=20", "--iterations", "4"],
        ["run", "--set", "benchmark.iterations=1e23"],
    ],
)
def test_commands_stop_with_one_line_and_exit_code_2(args, tmp_path):
    if args[0] == "run":  # a launch timeout, so that a run wrongly started ends
        args = [*args, "--output", str(tmp_path / "runs"), "--set", "launch.timeout_s=5"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.output
    assert not (tmp_path / "runs").exists()  # nothing started
