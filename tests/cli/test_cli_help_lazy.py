"""``tprimat --help`` lists the commands without importing them, worded exactly as click would."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from tprimat.cli import COMMANDS, SUMMARIES, LazyGroup, cli


@pytest.mark.parametrize("width", [60, 80, 120])
def test_help_lists_what_the_commands_say(width):
    lazy = CliRunner().invoke(cli, ["--help"], terminal_width=width).output

    class Importing(LazyGroup):
        format_commands = click.Group.format_commands  # asks every command (imports them all)

    reference = (
        CliRunner()
        .invoke(
            Importing(
                name=cli.name,
                callback=cli.callback,
                params=cli.params,
                help=cli.help,
                context_settings=cli.context_settings,
            ),
            ["--help"],
            terminal_width=width,
        )
        .output
    )
    assert lazy.replace("Usage: cli", "Usage: tprimat") == reference.replace("Usage: cli", "Usage: tprimat")
    assert set(SUMMARIES) == set(COMMANDS)


def test_help_imports_no_command_module():
    code = (
        "import sys\nfrom tprimat.cli import main\nsys.argv = ['tprimat', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('tprimat.cli.')), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
