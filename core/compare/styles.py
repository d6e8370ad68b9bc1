"""How runs look in the comparison figures: a colour family per system, a shade and marker per
run, legends beside the axes, and lines that stop where a run's log has no record.

Shared by :mod:`tprimat.compare.plots` and :mod:`tprimat.compare.convergence`, so that a run
looks the same in every figure of a report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tprimat.compare.model import Comparison

#: Markers that tell apart the runs of one system (drawn in shades of the system's colour).
RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def shade(colour: str, index: int) -> str:
    """The ``index``-th shade of ``colour`` (``#RRGGBB``): itself, then darker and lighter in turn."""
    if index == 0:
        return colour
    amount = min(0.35 * ((index + 1) // 2), 0.7)
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    if index % 2:  # darker
        mixed = [round(c * (1 - amount)) for c in channels]
    else:  # lighter
        mixed = [round(c + (255 - c) * amount) for c in channels]
    return "#" + "".join(f"{c:02X}" for c in mixed)


def run_styles(comparison: Comparison) -> dict[str, tuple[str, str]]:
    """Run key -> (colour, marker): a colour family per system, one shade and marker per run."""
    styles = {}
    for system in comparison.systems:
        for index, run in enumerate(comparison.runs_of(system.label)):
            styles[run.key] = (shade(system.colour, index), RUN_MARKERS[index % len(RUN_MARKERS)])
    return styles


def legend_outside(ax: Any) -> None:
    """The legend to the right of the axes, where it can never cover a data point."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)


def broken(
    points: Sequence[tuple[int, float, float]], gaps: Sequence[tuple[int, int]]
) -> tuple[list[float], list[float]]:
    """``points`` (iteration, x, y), in iteration order, as x and y lists with a NaN wherever a gap
    (first, last iteration missing) lies between two points: the line stops at the gap instead of
    being drawn across iterations that were never measured."""
    xs: list[float] = []
    ys: list[float] = []
    previous = None
    for iteration, x, y in points:
        if previous is not None and any(previous < first and last < iteration for first, last in gaps):
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(x)
        ys.append(y)
        previous = iteration
    return xs, ys
