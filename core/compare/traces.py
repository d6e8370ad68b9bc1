"""Optional traces section: kernel-level comparison when runs kept profiler traces.

The analysis itself belongs to :mod:`tprimat.trace.compare`; this module only
finds ``<run directory>/traces/`` files and, when that module is importable,
asks it for a comparison of the baseline with each other system.
"""

from __future__ import annotations

from pathlib import Path

from tprimat.compare.document import Block, Heading, Image, Markdown, Paragraph
from tprimat.compare.model import Comparison


def trace_files(run_path: str) -> list[Path]:
    """The profiles in the run's ``traces/`` folder (:func:`tprimat.trace.reader.traces_in`)."""
    from tprimat.trace.reader import traces_in

    directory = Path(run_path).parent / "traces"
    return traces_in(directory) if directory.is_dir() else []


def trace_section(comparison: Comparison, out_dir: Path) -> list[Block]:
    by_system: dict[str, list[Path]] = {}
    for system in comparison.systems:
        files = [f for run in comparison.runs_of(system.label) for f in trace_files(run.path)]
        if files:
            by_system[system.label] = files
    if not by_system:
        return []
    blocks: list[Block] = [Heading(2, "Traces")]
    if comparison.baseline not in by_system or len(by_system) < 2:
        blocks.append(
            Paragraph(
                "Profiler traces were found only for: "
                + "; ".join(f"{label} ({len(files)} file(s))" for label, files in by_system.items())
                + ". A trace comparison needs traces from the baseline and another system."
            )
        )
        return blocks
    try:
        from tprimat.trace.compare import compare_traces
    except ImportError:
        blocks.append(
            Paragraph(
                "Profiler traces were found, but this installation of tprimat has no trace "
                "comparison module (`tprimat.trace.compare`), so no kernel-level section is shown."
            )
        )
        return blocks
    baseline_files = by_system[comparison.baseline]
    for index, (label, files) in enumerate(by_system.items()):
        if label == comparison.baseline:
            continue
        blocks.append(Heading(3, f"{label} vs {comparison.baseline}"))
        try:
            result = compare_traces(
                [str(f) for f in baseline_files], [str(f) for f in files], labels=(comparison.baseline, label)
            )
            blocks.append(Markdown(result.to_markdown()))
            name = f"traces_{index}.png"
            result.plot(out_dir / name)
            if (out_dir / name).is_file():
                blocks.append(Image(name, f"Trace comparison: {label} vs {comparison.baseline}"))
        except Exception as exc:  # an optional section must not lose the rest of the report
            if type(exc).__name__ != "NoGpuActivityError":
                blocks.append(Paragraph(f"The trace comparison failed: {type(exc).__name__}: {exc}"))
                continue
            blocks.append(
                Paragraph(
                    "The traces record no GPU activity (CPU-only profiles), so there is no GPU time "
                    f"to attribute; no kernel-level comparison is shown ({exc})."
                )
            )
    return blocks
