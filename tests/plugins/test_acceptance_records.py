"""Every shipped plan was accepted by its framework's own code, and ran with the values it rendered.

``tests/fixtures/acceptance/*.json`` hold what Megatron-LM's ``parse_args`` and
``validate_args`` (at core_v0.15.0 for nvd_megatron, at the Megatron-LM of Primus v26.5 for
amd_megatron) and Primus v26.5's experiment loader said of each shipped plan, keyed by its
digest (made by ``tools/acceptance/make_records.py``, docs/backends.md).  A change to what a
backend renders changes the digest, and this test fails until the plans are checked again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.shipped import MEGATRON_BACKENDS, plan_id, shipped, shipped_run
from tprimat.plugins.megatron.argcheck import disagreements
from tprimat.plugins.megatron.framework import SHARED_SOURCES

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "acceptance"


def _records() -> dict:
    """Every record of every framework, by plan digest."""
    found: dict = {}
    for path in sorted(RECORDS.glob("*.json")):
        for digest, record in json.loads(path.read_text())["records"].items():
            found[digest] = {**record, "file": path.name}
    return found


def _printed(value) -> str:
    """A recorded value as the framework would print it (what argcheck compares by meaning)."""
    return value if isinstance(value, str) else repr(value)


@pytest.mark.parametrize(("backend", "model", "methodology"), shipped(MEGATRON_BACKENDS))
def test_the_framework_accepted_the_plan_and_ended_with_what_it_rendered(backend, model, methodology, tmp_path):
    run = shipped_run(backend, model, methodology, tmp_path)
    record = _records().get(run.plan_digest)
    assert record is not None, (
        f"{plan_id(backend, model, methodology)}: no acceptance record for digest {run.plan_digest}; "
        "the rendering changed: make the records again with tools/acceptance/make_records.py (docs/backends.md)"
    )
    assert record["plan"] == plan_id(backend, model, methodology)
    assert record["accepted"], record["error"]
    ended = {key: _printed(value) for key, value in record["values"].items()}
    assert disagreements(run.plan.framework.rendered, ended) == []


@pytest.mark.parametrize(("backend", "model", "methodology"), shipped(MEGATRON_BACKENDS))
def test_what_a_plan_says_the_framework_keeps_is_what_the_framework_ended_with(backend, model, methodology, tmp_path):
    run = shipped_run(backend, model, methodology, tmp_path)
    values = _records()[run.plan_digest]["values"]
    kept = run.plan.framework.kept
    if backend == "amd_primus":
        # the test plans read Primus's config tree from tests/fixtures/primus_configs (a later
        # commit than v26.5): the values the shared settings read must be the release's
        kept = {key: value for key, value in kept.items() if key in SHARED_SOURCES}
    assert kept and {key: values[key] for key in kept} == kept


def test_every_record_belongs_to_a_shipped_plan(tmp_path):
    # a stale record (a plan no longer shipped) is removed when the records are made again
    digests = {
        shipped_run(b, m, how, tmp_path / plan_id(b, m, how)).plan_digest for b, m, how in shipped(MEGATRON_BACKENDS)
    }
    assert set(_records()) == digests
