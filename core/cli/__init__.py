"""The ``tprimat`` command line.

Each command lives in its own module and is imported only when it is run (or
when help lists it), so ``tprimat backends`` never pays for the imports of
``tprimat run``.  To add a command, add one line to :data:`COMMANDS`.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from tprimat import __version__

#: command name -> "module:attribute" of its click command, in help order.
COMMANDS: dict[str, str] = {
    "run": "tprimat.cli.run:run",
    "parse": "tprimat.cli.parse:parse",
    "compare": "tprimat.cli.compare:compare",
    "export": "tprimat.cli.export:export",
    "prepare-data": "tprimat.cli.prepare_data:prepare_data",
    "make-tokenizer": "tprimat.cli.prepare_data:make_tokenizer",
    "profile": "tprimat.cli.profile:profile",
    "trace": "tprimat.cli.trace:trace",
    "microbench": "tprimat.cli.microbench:microbench",
    "suite": "tprimat.cli.suite:suite",
    "tune": "tprimat.cli.tune:tune",
    "doctor": "tprimat.cli.doctor:doctor",
    "bundle": "tprimat.cli.bundle:bundle",
    "unbundle": "tprimat.cli.bundle:unbundle",
    "import-legacy": "tprimat.cli.import_legacy:import_legacy",
    "backends": "tprimat.cli.backends:backends",
    "plugins": "tprimat.cli.plugins:plugins",
    "models": "tprimat.cli.models:models",
    "detect": "tprimat.cli.detect:detect",
    "config": "tprimat.cli.config:config",
    "memory": "tprimat.cli.memory:memory",
    "schema": "tprimat.cli.schema:schema",
}


#: command name -> the first paragraph of its help, so that ``tprimat --help`` lists the commands
#: without importing them (a test checks these against the commands themselves).
SUMMARIES: dict[str, str] = {
    "run": "Train a model for N iterations, measure every one, write a result.",
    "parse": "Parse Primus, Megatron-LM, Megatron-Bridge or NeMo logs into a result.",
    "compare": "Compare results (files or directories of them) in one report.",
    "export": "Write results (files, run or suite directories) to experiment trackers.",
    "prepare-data": "Fetch, clean, tokenize and fingerprint a corpus for MODEL.",
    "make-tokenizer": "Train a small byte-level BPE tokenizer for MODEL from a local corpus, offline.",
    "profile": "Profile a run and analyse its traces.",
    "trace": "Analyse profiler traces: where GPU time goes, what set a step's length, and why two runs differ.",
    "microbench": "Time the model's GEMMs and attention; find the maximum achievable matmul FLOP/s.",
    "suite": "Run, resume and inspect benchmark campaigns (backends × models × precisions × repeats).",
    "tune": "Find the fastest configuration of BACKEND for MODEL on this device.",
    "memory": "Training memory: what a configuration needs per GPU, and whether it fits.",
    "doctor": "Check this machine for conditions that distort benchmark numbers.",
    "bundle": "Pack results, manifests, configs and logs under DIRECTORY with a SHA256SUMS list.",
    "unbundle": "Extract BUNDLE_FILE safely and verify every checksum.",
    "import-legacy": "Convert benchmark_*.json / train_*.json results of the earlier scripts.",
    "backends": "List installed backends with their platform, framework and status.",
    "plugins": "List loaded plugins, their backends, exporters and hooks, and plugins that failed to load.",
    "models": "List registered models with parameter count and training FLOPs per token.",
    "detect": "Show the platform, devices, memory, driver and stack versions of this machine.",
    "config": "Inspect benchmark configs (TOML).",
    "schema": "Print the JSON Schemas of the documents tprimat writes.",
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from :data:`SUMMARIES` (as click words it, no imports)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit)) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def invoke(self, ctx: click.Context) -> Any:
        """Turn expected errors into one line and exit code 2 (``--debug`` shows the traceback).

        A bad value for an option or argument (a missing file, an unknown model) is such an
        error too: the line names the option and what is wrong, without the usage block that
        click prints for a command line it cannot parse (a missing argument, an unknown option).
        """
        from tprimat.errors import TprimatError

        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:
            if isinstance(exc, click.MissingParameter) or (ctx.obj or {}).get("debug"):
                raise
            raise _one_line_error(exc.format_message(), exc.exit_code) from None
        except TprimatError as exc:
            if (ctx.obj or {}).get("debug"):
                raise
            raise _one_line_error(str(exc), exc.exit_code) from None


def _one_line_error(message: str, exit_code: int) -> click.ClickException:
    """An error click prints as ``Error: message`` (no usage block), exiting with ``exit_code``."""
    error = click.ClickException(message)
    # click declares exit_code a ClassVar, yet reads it from the instance (``e.exit_code``).
    error.exit_code = exit_code  # type: ignore[misc]
    return error


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tprimat")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Benchmark LLM pretraining on AMD and NVIDIA GPUs, fairly and auditably."""
    from tprimat.contract.registry import Registry

    ctx.ensure_object(dict)
    ctx.obj.setdefault("registry_factory", Registry.from_environment)
    ctx.obj["debug"] = debug


def main() -> None:
    """Console entry point."""
    cli(prog_name="tprimat")
