"""Every shipped plan was accepted by its framework's own code, and ran with the values it rendered.

``tests/fixtures/acceptance/<framework>.json`` holds what Megatron-LM's ``parse_args`` and
``validate_args`` and Primus's experiment loader said of each shipped plan, keyed by its
digest (made by ``tools/acceptance/make_records.py``, docs/backends.md).  A change to what a
backend renders changes the digest, and this test fails until the plans are checked again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.shipped import MEGATRON_BACKENDS, plan_id, shipped, shipped_run
from tprimat.plugins.megatron.argcheck import disagreements

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "acceptance"


def _framework(backend: str) -> str:
    return "primus" if backend == "amd_primus" else "megatron-lm"


def _records(framework: str) -> dict:
    return json.loads((RECORDS / f"{framework}.json").read_text())["records"]


def _printed(value) -> str:
    """A recorded value as the framework would print it (what argcheck compares by meaning)."""
    return value if isinstance(value, str) else repr(value)


@pytest.mark.parametrize(("backend", "model", "methodology"), shipped(("amd_megatron", "nvd_megatron")))
def test_the_framework_accepted_the_plan_and_ended_with_what_it_rendered(backend, model, methodology, tmp_path):
    run = shipped_run(backend, model, methodology, tmp_path)
    framework = _framework(backend)
    record = _records(framework).get(run.plan_digest)
    assert record is not None, (
        f"{plan_id(backend, model, methodology)}: no {framework} acceptance record for digest {run.plan_digest}; "
        f"the rendering changed: run tools/acceptance/make_records.py {framework} (docs/backends.md)"
    )
    assert record["plan"] == plan_id(backend, model, methodology)
    assert record["accepted"], record["error"]
    ended = {key: _printed(value) for key, value in record["values"].items()}
    assert disagreements(run.plan.framework.rendered, ended) == []


@pytest.mark.parametrize(("backend", "model", "methodology"), shipped(("amd_megatron", "nvd_megatron")))
def test_what_a_megatron_lm_plan_says_it_keeps_is_what_megatron_lm_ended_with(backend, model, methodology, tmp_path):
    run = shipped_run(backend, model, methodology, tmp_path)
    values = _records("megatron-lm")[run.plan_digest]["values"]
    kept = run.plan.framework.kept
    assert kept and {key: values[key] for key in kept} == kept


def test_every_record_belongs_to_a_shipped_plan(tmp_path):
    # a stale record (a plan no longer shipped) is removed when the records are made again
    digests = {
        shipped_run(b, m, how, tmp_path / plan_id(b, m, how)).plan_digest for b, m, how in shipped(MEGATRON_BACKENDS)
    }
    for framework in ("megatron-lm", "primus"):
        path = RECORDS / f"{framework}.json"
        if path.is_file():
            assert set(_records(framework)) <= digests, framework
