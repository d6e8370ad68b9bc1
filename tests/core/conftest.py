"""Fixtures shared by the core's tests."""

from __future__ import annotations

import pytest

from tprimat.parse import parallel as parse_parallel


@pytest.fixture
def tiny_ranges(monkeypatch):
    """Log reading in chunks of 2 KiB, any file of 4 KiB or more cut into ranges, a pool for any
    input, a range's events sent in pieces of 8."""
    monkeypatch.setattr(parse_parallel, "LEAD_BYTES", 16 * 1024)
    monkeypatch.setattr(parse_parallel, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(parse_parallel, "SPLIT_MIN_BYTES", 4096)
    monkeypatch.setattr(parse_parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parse_parallel, "PIECE_EVENTS", 8)


@pytest.fixture(params=["compiled", "python"])
def within_form(request, monkeypatch) -> str:
    """Run a test with the compiled check of a column's values (``_exact.within``), then without."""
    from tests.compiled import EXACT, compiled_or_skip
    from tprimat.result import compiled as result_compiled

    compiled = compiled_or_skip(EXACT).within if request.param == "compiled" else None
    monkeypatch.setattr(result_compiled, "WITHIN", compiled)
    return request.param
