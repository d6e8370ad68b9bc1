"""Fixtures for comparison tests (see compare_helpers.py for where the results come from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from compare_helpers import write_legacy_results


@pytest.fixture(scope="session")
def legacy_dir(tmp_path_factory) -> Path:
    return write_legacy_results(tmp_path_factory.mktemp("legacy"))
