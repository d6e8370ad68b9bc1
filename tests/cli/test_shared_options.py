"""Options several commands share read and behave alike in all of them (core/cli/options.py).

Every command is walked (the subcommands of groups too), so a command added later is held to
the same conventions: ``-o`` is always ``--output``, and ``--config``/``--set`` are the shared
declaration with one help text and one check of ``--set`` items.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tprimat.cli import COMMANDS, cli
from tprimat.cli.options import CONFIG_HELP, SET_HELP


def _commands() -> list[tuple[str, click.Command]]:
    """(``tprimat ...`` words, command) for every leaf command, groups walked."""
    ctx = click.Context(cli)
    found = []

    def walk(command: click.Command, words: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, [*words, name])
        else:
            found.append((" ".join(words), command))

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        walk(command, [name])
    return found


COMMANDS_WALKED = _commands()


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in param.opts:
            return param
    return None


def test_the_walk_sees_every_command_and_the_subcommands():
    names = {words for words, _ in COMMANDS_WALKED}
    assert {"run", "compare", "suite run", "suite report", "trace compare", "config show"} <= names


def test_o_is_short_for_output_everywhere():
    """A command with ``--output`` also takes ``-o``; no command uses ``-o`` for anything else."""
    with_output = 0
    for words, command in COMMANDS_WALKED:
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            opts = set(param.opts) | set(param.secondary_opts)
            if "--output" in opts or "-o" in opts:
                assert {"-o", "--output"} <= opts, f"tprimat {words}: {sorted(opts)}"
                with_output += 1
    assert with_output >= 10


def test_run_takes_o_for_its_runs_directory(tmp_path):
    done = CliRunner().invoke(cli, ["run", "--backend", "torch", "--dry-run", "-o", str(tmp_path / "mine")])
    assert done.exit_code == 0, done.output
    assert str(tmp_path / "mine") in done.output


def _with(name: str) -> list[tuple[str, click.Command]]:
    return [(words, command) for words, command in COMMANDS_WALKED if _option(command, name) is not None]


def test_config_and_set_are_the_shared_options_wherever_they_appear():
    with_config = _with("--config")
    assert {words for words, _ in with_config} >= {
        "run", "parse", "compare", "tune", "doctor", "microbench", "config show", "memory estimate",
    }  # fmt: skip
    for words, command in with_config:
        config, overrides = _option(command, "--config"), _option(command, "--set")
        assert overrides is not None, f"tprimat {words} takes --config without --set"
        assert (config.name, overrides.name) == ("config_file", "overrides"), words
        assert config.help.startswith(CONFIG_HELP) and overrides.help.startswith(SET_HELP), words
        assert overrides.multiple and overrides.metavar == "SECTION.KEY=VALUE", words
    assert {words for words, _ in _with("--set")} == {words for words, _ in with_config}


@pytest.mark.parametrize("words", sorted(words for words, _ in _with("--set")))
def test_a_malformed_set_is_refused_the_same_way_by_every_command(words):
    done = CliRunner().invoke(cli, [*words.split(), "--set", "training.seq_length"])
    assert done.exit_code == 2, done.output
    (line,) = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert "'--set'" in line and "is not of the form section.key=value" in line, line
    assert "Traceback" not in done.output


@pytest.mark.parametrize("words", sorted(words for words, _ in _with("--config")))
def test_a_missing_config_file_is_refused_the_same_way_by_every_command(words, tmp_path):
    done = CliRunner().invoke(cli, [*words.split(), "--config", str(tmp_path / "absent.toml")])
    assert done.exit_code == 2, done.output
    assert "'--config'" in done.output and "does not exist" in done.output, done.output
