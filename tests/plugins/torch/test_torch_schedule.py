"""The torch trainer's learning-rate schedule and profiled iterations (no torch needed)."""

from __future__ import annotations

import math

import pytest

from tprimat.plugins.torch.schedule import lr_at, profiled_iterations


def schedule(style: str, **kw) -> list[float]:
    args = dict(lr=1.0, min_lr=0.1, warmup=2, decay_iterations=10, style=style) | kw
    return [lr_at(i, **args) for i in range(1, 13)]


def test_warmup_then_cosine_to_min_lr():
    values = schedule("cosine")
    assert values[:2] == [0.5, 1.0]
    # Iteration 6 is half-way through the 8 decay iterations: the cosine midpoint.
    assert values[5] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert values[9] == pytest.approx(0.1) and values[11] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(values[1:], values[2:], strict=False))


def test_linear_and_constant():
    assert schedule("linear")[5] == pytest.approx(1.0 - 0.9 * 0.5)
    assert schedule("constant")[2:] == [1.0] * 10
    assert schedule("cosine", warmup=0)[0] < 1.0
    with pytest.raises(ValueError):
        lr_at(0, lr=1, min_lr=0, warmup=0, decay_iterations=1, style="cosine")


def test_profiled_iterations_follow_torch_profiler_schedule():
    # wait 2, warm-up 1, active 2: steps 0-1 idle, 2 warm-up, 3-4 recorded (iterations are 1-based).
    assert profiled_iterations(wait=2, warmup=1, active=2, repeat=1, iterations=50) == (3, 4, 5)
    assert profiled_iterations(wait=1, warmup=0, active=1, repeat=2, iterations=50) == (2, 4)
    assert profiled_iterations(wait=1, warmup=0, active=1, repeat=0, iterations=5) == (2, 4)
    assert profiled_iterations(wait=0, warmup=0, active=0, repeat=1, iterations=5) == ()
