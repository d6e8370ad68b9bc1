"""The comparison figures: what each bar and error bar stands for, from real runs."""

from __future__ import annotations

import attrs
import pytest
from compare_helpers import AMD, imported, window_result

from tprimat.compare.model import build_comparison
from tprimat.result.resultjson import write_result
from tprimat.settings.config import load_config

COST = load_config().cost


def _error_bar_spans(ax) -> list[tuple[float, float]]:
    """(bottom, top) of each vertical error bar on ``ax``."""
    (errorbar,) = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    segments = errorbar.lines[2][0].get_segments()
    return [(float(s[0][1]), float(s[1][1])) for s in segments]


def test_single_run_error_bar_comes_from_the_run_that_has_throughput(tmp_path, monkeypatch):
    # Two repeats of one system; the first has no tokens/s/GPU (as a repeat whose log lost it).
    # Its bar is the other run's median, and its error bar that run's p5-p95, not a crash on
    # the first run's missing statistics.
    plt = pytest.importorskip("matplotlib.pyplot")
    from tprimat.compare import plots

    amd = imported(AMD)
    without = window_result(amd, 3, 251, "amd-a")
    without = attrs.evolve(without, summary=attrs.evolve(without.summary, tokens_per_s_per_gpu=None))
    measured = window_result(amd, 252, 500, "amd-b")
    write_result(without, tmp_path / "runs" / "a" / "result.json")
    write_result(measured, tmp_path / "runs" / "b" / "result.json")
    comparison = build_comparison([tmp_path / "runs"], cost=COST)
    (system,) = comparison.systems
    assert comparison.runs_of(system.label)[0].result.summary.tokens_per_s_per_gpu is None
    assert system.tokens_per_s_per_gpu.n == 1 and system.tokens_per_s_per_gpu.ci_low is None

    axes = {}

    def keep(plt_, fig, path):
        axes[path.name] = fig.axes[0]
        return path

    monkeypatch.setattr(plots, "_save", keep)
    assert plots.plot_throughput(plt, comparison, tmp_path / "throughput.png") is not None
    ax = axes["throughput.png"]
    stats = measured.summary.tokens_per_s_per_gpu
    assert [bar.get_height() for bar in ax.patches] == [pytest.approx(stats.median)]
    assert _error_bar_spans(ax) == [pytest.approx((stats.p5, stats.p95))]
    assert ax.xaxis.label.get_text() == "error bars: p5–p95 over iterations (single run)"
    plt.close("all")
