"""The images name themselves: every run inside records the image, its base and tprimat's commit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parents[2] / "docker"


@pytest.mark.parametrize("name", ["amd.Dockerfile", "nvd.Dockerfile"])
def test_the_image_sets_what_the_manifest_reads(name):
    text = (DOCKER / name).read_text()
    base = re.search(r"^FROM \$\{(\w+)\}$", text, re.M).group(1)
    after_from = text.split(f"FROM ${{{base}}}", 1)[1]
    # An ARG declared before FROM is only visible after it when declared again.
    assert re.search(rf"^ARG {base}$", after_from, re.M)
    env = re.search(r"^ENV (.*?)\n\n", after_from, re.M | re.S).group(1)
    settings = dict(re.findall(r"(\w+)=(\S+?)\s*(?:\\|$)", env, re.M))
    assert settings["TPRIMAT_BASE_IMAGE"] == f"${{{base}}}"
    image_arg = re.fullmatch(r"\$\{(\w+)\}", settings["TPRIMAT_CONTAINER_IMAGE"]).group(1)
    default = re.search(rf"^ARG {image_arg}=(\S+)$", after_from, re.M).group(1)
    assert default == "tprimat:" + name.split(".")[0]  # the tag docs/docker.md builds
    assert settings["TPRIMAT_GIT_COMMIT"] == "${TPRIMAT_GIT_COMMIT}"
    assert "TPRIMAT_CONTAINER_DIGEST" not in env  # known only after a push: given at run time
