"""Shared test helpers, and the gate that turns the ``torch`` marker into a skip without the ml extra."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


#: What ``@pytest.mark.torch`` stands for: the modules of the ml extra (see setup.cfg).
ML_EXTRA = ("torch", "transformers")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _no_user_presets(tmp_path_factory, monkeypatch) -> None:
    """Tests never read the presets in the user's own preset directory (``tprimat tune`` writes there)."""
    monkeypatch.setenv("TPRIMAT_PRESET_DIR", str(tmp_path_factory.mktemp("user-presets")))


@pytest.fixture(autouse=True)
def _idle_cpus(monkeypatch) -> None:
    """The pre-flight checks see idle CPUs: the load of a shared test machine is no finding of a test's run
    (the CPU-load check's own tests give it their load)."""
    monkeypatch.setattr("tprimat.running.doctor._load_average", lambda: None)


def _missing(modules: tuple[str, ...]) -> list[str]:
    """The modules that cannot be imported here, found without importing them."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a broken install, or a module hidden by sys.modules[name] = None
            found = None
        if found is None:
            missing.append(name)
    return missing


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.torch`` tests skip, naming what is missing, where the ml extra is not installed."""
    missing = _missing(ML_EXTRA)
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs the ml extra (pip install -e '.[ml]'): {', '.join(missing)} missing")
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)


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
