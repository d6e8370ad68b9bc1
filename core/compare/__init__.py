"""Comparison reports: results grouped by the fields a fair comparison needs, gated, aggregated.

``build_comparison(paths, cost=...)`` loads and groups results and computes every figure;
``write_report(comparison, out_dir, formats)`` writes Markdown, self-contained HTML, a
MAD-compatible CSV and JSON (matplotlib is imported only to draw the figures).
See ``docs/compare.md``.
"""

from tprimat.compare.model import Comparison, MismatchError, build_comparison
from tprimat.compare.report import write_report

__all__ = ["Comparison", "MismatchError", "build_comparison", "write_report"]
