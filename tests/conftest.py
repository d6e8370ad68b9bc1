"""Shared test helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _no_user_presets(tmp_path_factory, monkeypatch) -> None:
    """Tests never read the presets in the user's own preset directory (``tprimat tune`` writes there)."""
    monkeypatch.setenv("TPRIMAT_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))


def _slurm_answers() -> bool:
    import shutil
    import subprocess

    if shutil.which("sbatch") is None:
        return False
    try:
        done = subprocess.run(["sinfo", "-h"], capture_output=True, check=False, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """A running SLURM: skipped where there is none, a failure under CI (its stage starts one)."""
    import os

    if not _slurm_answers():
        if os.environ.get("CI"):
            pytest.fail("no SLURM: CI starts one with .ci/slurm-up.sh before the slurm tests")
        pytest.skip("no SLURM here (start one with .ci/slurm-up.sh)")
