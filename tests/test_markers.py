"""The test suite's own markers do what pyproject.toml says they do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A torch test that fails (the microbench command exits 2) when torch cannot be imported.
TORCH_TEST = "tests/cli/test_microbench_cli.py::test_json_output_is_the_saved_document"

#: A pytest plugin that makes the ml extra unimportable, as in an install without it.
HIDE_ML = """\
import sys

for name in ("torch", "transformers"):
    sys.modules[name] = None  # `import torch` raises ImportError, find_spec("torch") is None
"""


def test_torch_marked_tests_skip_where_the_ml_extra_is_missing(tmp_path):
    (tmp_path / "hide_ml.py").write_text(HIDE_ML)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "hide_ml",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(ROOT),
            str(ROOT / TORCH_TEST),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 skipped" in done.stdout, done.stdout[-3000:]
    assert "torch, transformers missing" in done.stdout
