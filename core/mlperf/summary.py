"""Group MLPerf result files by benchmark and system, score each group, and print or export it.

The olympic score is MLPerf's; tprimat's median of the converged runs with its bootstrap
95% interval (:mod:`tprimat.compare.stats`) stands beside it.  Groups are keyed by
``(submission_benchmark, submission_platform, submission_org)``.  Where the groups
differ in precision or global batch size the summary says they are not equivalent.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from tprimat.compare.document import DASH
from tprimat.compare.stats import Aggregate, aggregate
from tprimat.mlperf.reader import MlperfRun, OlympicScore, mllog_files, olympic_score, read_file

#: Settings two MLPerf systems must share to be called equivalent.
EQUIVALENCE_KEYS = ("global_batch_size", "max_sequence_length", "lowest_numerical_precision_in_linear")


@attrs.frozen(kw_only=True)
class MlperfSystem:
    benchmark: str | None
    platform: str | None
    org: str | None
    runs: list[MlperfRun]
    olympic: OlympicScore
    time_to_train_s: Aggregate | None  # median and bootstrap interval over converged runs
    samples_to_converge: Aggregate | None
    train_tokens_per_s: Aggregate | None

    @property
    def label(self) -> str:
        return " / ".join(str(part) for part in (self.org, self.platform) if part)


def summarize_runs(runs: list[MlperfRun]) -> list[MlperfSystem]:
    groups: dict[tuple[Any, Any, Any], list[MlperfRun]] = {}
    for run in runs:
        groups.setdefault((run.benchmark, run.platform, run.org), []).append(run)
    systems = []
    for (benchmark, platform, org), members in groups.items():
        converged = [r for r in members if r.converged]
        systems.append(
            MlperfSystem(
                benchmark=benchmark,
                platform=platform,
                org=org,
                runs=members,
                olympic=olympic_score(members),
                time_to_train_s=aggregate([r.time_to_train_s for r in converged]),
                samples_to_converge=aggregate([r.samples_to_converge for r in converged]),
                train_tokens_per_s=aggregate([r.train_tokens_per_s for r in members]),
            )
        )
    return systems


def differences(systems: list[MlperfSystem]) -> list[str]:
    """Settings that differ between the systems (each system's first run speaks for it)."""
    found = []
    for key in EQUIVALENCE_KEYS:
        values = {s.label: s.runs[0].hyperparameters.get(key) for s in systems}
        if len(systems) > 1 and all(v is None for v in values.values()):
            found.append(f"{key} is not in these logs (MLPerf logs it from v6.0 on): it cannot be checked")
            continue
        if len({repr(v) for v in values.values()}) > 1:
            shown = ", ".join(f"{label}: {value}" for label, value in values.items())
            found.append(f"{key} differs ({shown}): the times are not of equivalent work")
    return found


def summarize_paths(paths: Iterable[str | Path]) -> list[MlperfSystem]:
    files = mllog_files(paths) or []
    return summarize_runs([read_file(f) for f in files])


def _aggregate_dict(value: Aggregate | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {
        "n": value.n,
        "median": value.median,
        "min": value.min,
        "max": value.max,
        "ci_low": value.ci_low,
        "ci_high": value.ci_high,
    }


def summary_to_dict(systems: list[MlperfSystem]) -> dict[str, Any]:
    return {
        "kind": "mlperf-training-results",
        "systems": [
            {
                "benchmark": s.benchmark,
                "platform": s.platform,
                "org": s.org,
                "olympic_score_s": s.olympic.score_s,
                "olympic_score_min": s.olympic.score_min,
                "olympic_dropped": s.olympic.dropped,
                "olympic_reason": s.olympic.reason,
                "runs": s.olympic.runs,
                "converged": s.olympic.converged,
                "time_to_train_s": _aggregate_dict(s.time_to_train_s),
                "samples_to_converge": _aggregate_dict(s.samples_to_converge),
                "train_tokens_per_s": _aggregate_dict(s.train_tokens_per_s),
                "hyperparameters": s.runs[0].hyperparameters,
                "files": [
                    {
                        "source": r.source,
                        "status": r.status,
                        "time_to_train_s": r.time_to_train_s,
                        "samples_to_converge": r.samples_to_converge,
                    }
                    for r in s.runs
                ],
            }
            for s in systems
        ],
        "not_equivalent": differences(systems),
    }


#: The columns of the systems table, in the terminal and in the comparison report alike.
SYSTEM_COLUMNS = (
    "benchmark",
    "system",
    "runs converged",
    "olympic score (min)",
    "median (min)",
    "95% CI (min)",
    "samples to converge",
    "training tokens/s (blocks)",
)


def minutes(seconds: float | None) -> str:
    """Seconds as minutes with two decimals, or a dash."""
    return DASH if seconds is None else f"{seconds / 60:.2f}"


def system_rows(systems: list[MlperfSystem]) -> list[list[str]]:
    """One row of :data:`SYSTEM_COLUMNS` per system, as text."""
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
                minutes(s.olympic.score_s) if s.olympic.score_s is not None else f"{DASH} ({s.olympic.reason})",
                minutes(t.median if t else None),
                interval,
                f"{s.samples_to_converge.median:,.0f}" if s.samples_to_converge else DASH,
                f"{s.train_tokens_per_s.median:,.0f}" if s.train_tokens_per_s else DASH,
            ]
        )
    return rows


def print_summary(systems: list[MlperfSystem], console: Any) -> None:
    from rich.table import Table

    table = Table(title="MLPerf Training results (time to train = run_stop - run_start)", title_justify="left")
    for column in SYSTEM_COLUMNS:
        table.add_column(column)
    for row in system_rows(systems):
        table.add_row(*row)
    console.print(table)
    console.print(
        "olympic score: MLPerf's rule (drop the fastest and the slowest run, a failed run counting "
        "as the slowest; mean of the rest); no scaling factor applied",
        markup=False,
        highlight=False,
    )
    for line in differences(systems):
        console.print(f"  note  {line}", markup=False, highlight=False)
