"""``tprimat compare`` on MLPerf result files: the systems side by side in report.md/html/json.

Published MLPerf runs carry no per-iteration records, so they do not become tprimat
results; this report shows what their logs give (olympic score, median and interval of time
to train, samples to converge, block throughput, the settings that decide equivalence) and
says where two systems did not do equivalent work.
"""

from __future__ import annotations

import json
from pathlib import Path

from tprimat.atomic import atomic_write_text
from tprimat.compare.document import DASH, Block, Bullets, Heading, Paragraph, Table, to_html, to_markdown
from tprimat.mlperf.summary import EQUIVALENCE_KEYS, MlperfSystem, differences, summary_to_dict


def _minutes(seconds: float | None) -> str:
    return DASH if seconds is None else f"{seconds / 60:.2f}"


def report_blocks(systems: list[MlperfSystem]) -> list[Block]:
    rows = []
    for s in systems:
        t = s.time_to_train_s
        interval = DASH
        if t is not None and t.ci_low is not None and t.ci_high is not None:
            interval = f"{t.ci_low / 60:.2f} {DASH} {t.ci_high / 60:.2f}"
        rows.append(
            [
                str(s.benchmark),
                s.label,
                f"{s.olympic.converged}/{s.olympic.runs}",
                _minutes(s.olympic.score_s) if s.olympic.score_s is not None else f"{DASH} ({s.olympic.reason})",
                _minutes(t.median if t else None),
                interval,
                f"{s.samples_to_converge.median:,.0f}" if s.samples_to_converge else DASH,
                f"{s.train_tokens_per_s.median:,.0f}" if s.train_tokens_per_s else DASH,
            ]
        )
    settings = [
        [key, *[str(s.runs[0].hyperparameters.get(key, DASH)) for s in systems]]
        for key in (*EQUIVALENCE_KEYS, "opt_base_learning_rate", "seed")
    ]
    blocks: list[Block] = [
        Heading(1, "MLPerf Training results side by side"),
        Paragraph(
            "Time to train = run_stop − run_start of each result file.  Olympic score: MLPerf's rule "
            "(drop the fastest and the slowest run, a run that did not converge counting as the "
            "slowest; mean of the rest), without MLPerf's scaling factors.  Median and 95% bootstrap "
            "interval over the converged runs are tprimat's."
        ),
        Table(
            [
                "benchmark",
                "system",
                "runs converged",
                "olympic score (min)",
                "median (min)",
                "95% CI (min)",
                "samples to converge",
                "training tokens/s (blocks)",
            ],
            rows,
        ),
        Heading(2, "Settings that decide equivalence"),
        Table(["key", *[s.label for s in systems]], settings),
    ]
    found = differences(systems)
    if found:
        blocks.append(Heading(2, "Not equivalent"))
        blocks.append(Bullets(found))
    blocks.append(Heading(2, "Files"))
    blocks.append(
        Bullets([f"{r.source}: {r.status}, {_minutes(r.time_to_train_s)} min" for s in systems for r in s.runs])
    )
    return blocks


def write_mlperf_report(systems: list[MlperfSystem], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = report_blocks(systems)
    return {
        "report.md": atomic_write_text(out_dir / "report.md", to_markdown(blocks)),
        "report.html": atomic_write_text(
            out_dir / "report.html", to_html(blocks, title="MLPerf results", base_dir=out_dir)
        ),
        "report.json": atomic_write_text(
            out_dir / "report.json", json.dumps(summary_to_dict(systems), indent=2) + "\n"
        ),
    }
