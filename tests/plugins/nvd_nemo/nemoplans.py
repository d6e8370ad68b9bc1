"""The NeMo plans tprimat ships, written out as ``tprimat run`` would, for tests that run the script on real NeMo.

Tests that use these need ``nemo-toolkit[llm]`` (CI installs it in its NeMo
stage): :func:`need_nemo` skips them on a developer machine without NeMo and
fails them under CI, where a missing NeMo is never a silent skip.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.plugins.launching import FIXTURES, prepared
from tprimat.plugins.nvd_nemo.launcher import SCRIPT, SETTINGS
from tprimat.plugins.nvd_nemo.nemo_pretrain import FRAMEWORK_ENV
from tprimat.running.prepare import PreparedRun

HAVE_NEMO = importlib.util.find_spec("nemo") is not None and importlib.util.find_spec("nemo_run") is not None
#: Every NeMo plan tprimat ships: each model under each methodology, planned for an H100 node.
SHIPPED = [(model, methodology) for model in ("llama3.1-8b", "qwen2.5-7b") for methodology in ("iso", "tuned")]
#: NeMo's resolved recipe for each shipped plan, recorded with the NeMo version in the folder's name.
RECORDED = FIXTURES / "framework_settings" / "nemo-2.7.3"


def need_nemo() -> None:
    if not HAVE_NEMO:
        if os.environ.get("CI"):
            pytest.fail("NeMo (nemo-toolkit[llm], nemo-run) is not installed in this CI stage")
        pytest.skip("NeMo not installed (CI runs these in its NeMo stage)")


def plan_name(model: str, methodology: str) -> str:
    return f"{model}-{methodology}-h100"


def written(model: str, methodology: str, root: Path, overrides: tuple[str, ...] = ()) -> PreparedRun:
    """The shipped plan for ``model`` under ``methodology`` on an H100 node, its files written out."""
    run = prepared("nvd_nemo", model, root, [f'benchmark.methodology="{methodology}"', *overrides])
    run.run_dir.mkdir(parents=True, exist_ok=True)
    for name, text in run.plan.files.items():
        (run.run_dir / name).write_text(text)
    return run


def script_args(run: PreparedRun) -> list[str]:
    """The script and its arguments from the plan's command line (after torchrun's own)."""
    argv = list(run.plan.argv)
    index = argv.index(str(run.run_dir / SCRIPT))
    assert argv[index + 1 : index + 3] == ["--settings", str(run.run_dir / SETTINGS)]
    return argv[index:]


def plan_environment(run: PreparedRun) -> dict[str, str]:
    """This process's environment without framework variables of its own, with the plan's added."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(FRAMEWORK_ENV) and k != "RANK"}
    return {**base, **run.plan.env}
