"""The shared vocabulary: one kind per setting, the same in docs/backends.md, reported by every backend."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.plugins.launching import prepared
from tprimat.settings.shared import MATH_SETTINGS, SHARED_SETTINGS

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends.md"


def _documented() -> dict[str, str]:
    """Shared name -> kind, from the table in docs/backends.md (a row may name several settings)."""
    table = DOC.read_text().split("### Shared settings", 1)[1].split("\n### ", 1)[0]
    kinds: dict[str, str] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) < 2 or cells[1] not in ("math", "speed"):
            continue
        names = re.findall(r"`([a-z0-9_.]+)`", cells[0])
        prefix = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        for name in names:
            kinds[name if "." in name or not prefix else prefix + name] = cells[1]
    return kinds


def test_the_documented_table_is_the_vocabulary():
    assert _documented() == {name: s.kind for name, s in SHARED_SETTINGS.items()}


def test_every_setting_has_a_reference_and_the_math_ones_are_the_step_s_definition():
    assert all(s.reference and s.meaning for s in SHARED_SETTINGS.values())
    assert set(MATH_SETTINGS) == {
        "loss.eod_mask",
        "norm.epsilon",
        "init.std",
        "dropout.hidden",
        "dropout.attention",
        "precision.dtype",
        "precision.fp8_format",
        "precision.fp8_recipe",
        "precision.fp8_amax_history_len",
        "precision.fp8_amax_compute_algo",
    }


@pytest.mark.parametrize("model", ["llama3.1-8b", "qwen2.5-7b"])
def test_every_backend_reports_the_whole_vocabulary_and_iso_plans_compute_the_same_step(model, tmp_path):
    plans = {
        backend: prepared(backend, model, tmp_path / backend).plan.framework
        for backend in ("amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo", "torch")
    }
    for backend, framework in plans.items():
        assert set(framework.shared) == set(SHARED_SETTINGS), backend
    for name in MATH_SETTINGS:
        values = {backend: framework.shared[name] for backend, framework in plans.items()}
        assert len({repr(v) for v in values.values()}) == 1, (name, values)
