"""A trace written by torch.profiler itself (CPU only, no GPU here) reads and analyses cleanly."""

from __future__ import annotations

import json

import pytest

from tprimat.errors import TprimatError

torch = pytest.importorskip("torch")


@pytest.mark.torch
@pytest.mark.slow
def test_cpu_trace_from_torch_profiler(tmp_path):
    from tprimat.trace.analyze import analyze_trace, parse_steps
    from tprimat.trace.compare import compare_traces
    from tprimat.trace.reader import read_trace

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as prof:
        for _ in range(6):
            loss = model(torch.randn(32, 64)).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    path = tmp_path / "rank-0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    assert json.loads(path.read_text())["traceEvents"]  # a real Kineto document

    trace = read_trace(path)
    assert [s.number for s in trace.steps] == [2, 3, 4]  # the three active steps
    assert len(trace.ts) == 0  # no GPU activity on a CPU-only machine
    assert trace.rank == 0  # from the Kineto file-name pattern
    result = analyze_trace(trace)
    assert result["window"]["mode"] == "before-last-step" and result["activities"] == 0
    # No GPU activity: no breakdown rather than zeros that would read as measured.
    assert result["gpu_activity"] is False and result["temporal"] is None
    assert "no GPU activity" in result["note"]
    one = analyze_trace(trace, steps=parse_steps("3"))
    assert one["window"]["steps"] == [3]
    (step,) = one["steps"]
    assert step["temporal"] is None
    assert step["host_us"] == next(s.dur for s in trace.steps if s.number == 3) > 0
    with pytest.raises(TprimatError, match="no GPU activity"):
        compare_traces([path], [path], labels=("x", "y"))
