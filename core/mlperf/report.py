"""``tprimat compare`` on MLPerf result files: the systems side by side in report.md/html/json.

Published MLPerf runs carry no per-iteration records, so they do not become tprimat
results; this report shows what their logs give (olympic score, scaled as MLPerf publishes
it where the folder has a scaling factor, median and interval of time to train, samples to
converge, block throughput, the settings that decide equivalence), says where two systems
did not do equivalent work, and lists the files found beside the runs that were not read.
"""

from __future__ import annotations

import json
from pathlib import Path

from tprimat.atomic import atomic_write_text
from tprimat.compare.document import DASH, Block, Bullets, Heading, Paragraph, Table, to_html, to_markdown
from tprimat.mlperf.summary import (
    EQUIVALENCE_KEYS,
    SCORE_NOTE,
    SYSTEM_COLUMNS,
    MlperfSummary,
    differences,
    minutes,
    other_file_notes,
    scaling_notes,
    summary_to_dict,
    system_rows,
)


def report_blocks(summary: MlperfSummary) -> list[Block]:
    systems = summary.systems
    settings = [
        [key, *[str(s.runs[0].hyperparameters.get(key, DASH)) for s in systems]]
        for key in (*EQUIVALENCE_KEYS, "opt_base_learning_rate", "seed")
    ]
    blocks: list[Block] = [
        Heading(1, "MLPerf Training results side by side"),
        Paragraph(
            f"Time to train = run_stop − run_start of each result file.  {SCORE_NOTE}.  "
            "Median and 95% bootstrap interval over the converged runs are tprimat's."
        ),
        Table(list(SYSTEM_COLUMNS), system_rows(systems)),
        Heading(2, "Settings that decide equivalence"),
        Table(["key", *[s.label for s in systems]], settings),
    ]
    scaling = scaling_notes(systems)
    if scaling:
        blocks.append(Heading(2, "Scaling factors"))
        blocks.append(Bullets(scaling))
    found = differences(systems)
    if found:
        blocks.append(Heading(2, "Not equivalent"))
        blocks.append(Bullets(found))
    blocks.append(Heading(2, "Files"))
    blocks.append(
        Bullets([f"{r.source}: {r.status}, {minutes(r.time_to_train_s)} min" for s in systems for r in s.runs])
    )
    if summary.other_files:
        blocks.append(Heading(2, "Files not read"))
        blocks.append(Bullets(other_file_notes(summary.other_files, shown=None)))
    return blocks


def write_mlperf_report(summary: MlperfSummary, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = report_blocks(summary)
    return {
        "report.md": atomic_write_text(out_dir / "report.md", to_markdown(blocks)),
        "report.html": atomic_write_text(
            out_dir / "report.html", to_html(blocks, title="MLPerf results", base_dir=out_dir)
        ),
        "report.json": atomic_write_text(
            out_dir / "report.json", json.dumps(summary_to_dict(summary), indent=2) + "\n"
        ),
    }
