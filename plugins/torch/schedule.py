"""The learning-rate schedule of the torch trainer (Megatron's shape), without torch.

Linear warm-up from 0 to ``lr`` over ``lr_warmup_iterations``, then cosine
(or linear) decay to ``min_lr`` over the rest of ``lr_decay_iterations``
(0: all iterations), then ``min_lr``.  Iterations count from 1.
"""

from __future__ import annotations

import math


def lr_at(
    iteration: int,
    *,
    lr: float,
    min_lr: float,
    warmup: int,
    decay_iterations: int,
    style: str,
) -> float:
    """The learning rate used by the optimizer step of ``iteration`` (1-based)."""
    if iteration < 1:
        raise ValueError("iterations count from 1")
    if warmup > 0 and iteration <= warmup:
        return lr * iteration / warmup
    if style == "constant":
        return lr
    span = decay_iterations - warmup
    if span <= 0:
        return min_lr
    progress = min(1.0, (iteration - warmup) / span)
    if style == "linear":
        return lr - (lr - min_lr) * progress
    if style == "cosine":
        return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr_decay_style {style!r}")


def profiled_iterations(*, wait: int, warmup: int, active: int, repeat: int, iterations: int) -> tuple[int, ...]:
    """The iterations (1-based) a torch.profiler schedule records or warms up in.

    Warm-up iterations of the profiler already pay its tracing overhead, so
    they are counted as profiled too and left out of the statistics.
    ``repeat = 0`` cycles until the run ends, as in torch.profiler.
    """
    cycle = wait + warmup + active
    if active <= 0 or cycle <= 0:
        return ()
    marked: list[int] = []
    cycles = repeat if repeat > 0 else iterations // cycle + 1
    for k in range(cycles):
        start = k * cycle + wait + 1
        marked.extend(range(start, start + warmup + active))
    return tuple(i for i in marked if i <= iterations)
