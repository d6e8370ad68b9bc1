"""Group MLPerf result files by benchmark and system, score each group, and print or export it.

The olympic score is MLPerf's; the scaled score multiplies it by the scaling factor
of the runs' folder (``scaling.json``, :mod:`tprimat.mlperf.layout`; 1 without one),
as MLPerf's result summarizer does for the time to train it publishes.  Both are
shown, with the factor and the file it came from.  tprimat's median of the converged
runs with its bootstrap 95% interval (:mod:`tprimat.compare.stats`) stands beside
them.  Groups are keyed by ``(submission_benchmark, submission_platform,
submission_org)``.  Where the groups differ in precision or global batch size the
summary says they are not equivalent; files found beside the runs that were not
read are listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from tprimat.compare.document import DASH
from tprimat.compare.stats import Aggregate, aggregate
from tprimat.mlperf.layout import NO_SCALING, OtherFile, Scaling, find_results
from tprimat.mlperf.reader import MlperfRun, OlympicScore, olympic_score, read_file

#: Settings two MLPerf systems must share to be called equivalent.
EQUIVALENCE_KEYS = ("global_batch_size", "max_sequence_length", "lowest_numerical_precision_in_linear")


@attrs.frozen(kw_only=True)
class MlperfSystem:
    benchmark: str | None
    platform: str | None
    org: str | None
    runs: list[MlperfRun]
    olympic: OlympicScore
    scaling: Scaling  # of the folder the runs came from
    time_to_train_s: Aggregate | None  # median and bootstrap interval over converged runs
    samples_to_converge: Aggregate | None
    train_tokens_per_s: Aggregate | None

    @property
    def label(self) -> str:
        return " / ".join(str(part) for part in (self.org, self.platform) if part)

    @property
    def scaled_score_s(self) -> float | None:
        """The olympic score times the scaling factor: the time to train MLPerf publishes."""
        if self.olympic.score_s is None or self.scaling.factor is None:
            return None
        return self.olympic.score_s * self.scaling.factor


@attrs.frozen(kw_only=True)
class MlperfSummary:
    """The systems read from the paths given, and the files beside their runs that were not read."""

    systems: list[MlperfSystem]
    other_files: list[OtherFile] = attrs.Factory(list)  # found beside the runs, not read


def _group_scaling(runs: list[MlperfRun], scaling: Mapping[str, Scaling]) -> Scaling:
    """The one scaling of the runs' folders; runs from folders scaled differently get no factor."""
    found = {scaling.get(run.source, NO_SCALING) for run in runs}
    if len(found) == 1:
        return found.pop()
    factors = {s.factor for s in found}
    sources = ", ".join(sorted(s.source for s in found if s.source))
    if len(factors) == 1 and None not in factors:
        return Scaling(factor=factors.pop(), source=sources)
    shown = "; ".join(sorted(f"{s.source or 'no scaling.json'}: {s.factor}" for s in found))
    return Scaling(
        factor=None,
        source=sources or None,
        problem=f"the runs come from folders scaled differently ({shown}); give each folder on its own",
    )


def summarize_runs(runs: list[MlperfRun], scaling: Mapping[str, Scaling] | None = None) -> list[MlperfSystem]:
    """One system per (benchmark, platform, org); ``scaling`` maps a run's source to its folder's scaling."""
    scaling = scaling or {}
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
                scaling=_group_scaling(members, scaling),
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


def summarize_paths(paths: Iterable[str | Path]) -> MlperfSummary:
    """Read the MLPerf results under ``paths`` (files, or folders as MLPerf lays them out)."""
    found = find_results(paths)
    if found is None:
        return MlperfSummary(systems=[])
    runs = [read_file(f) for f in found.runs]
    return MlperfSummary(systems=summarize_runs(runs, found.scaling), other_files=found.other)


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


def summary_to_dict(summary: MlperfSummary) -> dict[str, Any]:
    systems = summary.systems
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
                "scaling_factor": s.scaling.factor,
                "scaling_source": s.scaling.source,
                "scaling_problem": s.scaling.problem,
                "scaled_score_s": s.scaled_score_s,
                "scaled_score_min": s.scaled_score_s / 60 if s.scaled_score_s is not None else None,
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
        "other_files": [{"path": o.path, "kind": o.kind, "note": o.note} for o in summary.other_files],
    }


#: The columns of the systems table, in the terminal and in the comparison report alike.
SYSTEM_COLUMNS = (
    "benchmark",
    "system",
    "runs converged",
    "olympic score (min)",
    "scaling",
    "scaled score (min)",
    "median (min)",
    "95% CI (min)",
    "samples to converge",
    "training tokens/s (blocks)",
)


def minutes(seconds: float | None) -> str:
    """Seconds as minutes with two decimals, or a dash."""
    return DASH if seconds is None else f"{seconds / 60:.2f}"


def scaling_text(scaling: Scaling) -> str:
    """The factor as a table cell: ``×1.00401``, ``none`` (no scaling.json) or a dash (unusable)."""
    if scaling.factor is None:
        return DASH
    return f"×{scaling.factor:.6g}" if scaling.source else "none"


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
                scaling_text(s.scaling),
                minutes(s.scaled_score_s),
                minutes(t.median if t else None),
                interval,
                f"{s.samples_to_converge.median:,.0f}" if s.samples_to_converge else DASH,
                f"{s.train_tokens_per_s.median:,.0f}" if s.train_tokens_per_s else DASH,
            ]
        )
    return rows


#: How the two scores relate, in the terminal and in the comparison report alike.
SCORE_NOTE = (
    "Olympic score: MLPerf's rule (drop the fastest and the slowest run, a failed run counting as the "
    "slowest; mean of the rest); scaled score: the olympic score times the scaling factor of the runs' "
    "folder (scaling.json, set in MLPerf's review when the runs converged in fewer samples than the "
    "reference; none: factor 1), the time to train MLPerf publishes"
)

#: Files not read are listed up to this many in the terminal (all of them in the JSON).
OTHER_FILES_SHOWN = 10


def scaling_notes(systems: list[MlperfSystem]) -> list[str]:
    """Where each factor came from, or why a system has no scaled score."""
    notes = []
    for s in systems:
        name = f"{s.benchmark} {s.label}"
        if s.scaling.problem:
            notes.append(f"{name}: no scaled score: {s.scaling.problem}")
        elif s.scaling.source:
            notes.append(f"{name}: scaling factor {s.scaling.factor!r} from {s.scaling.source}")
    return notes


def other_file_notes(other: list[OtherFile], shown: int | None = OTHER_FILES_SHOWN) -> list[str]:
    """The files found beside the runs and not read: power readings counted, the rest named."""
    notes = []
    power = [o for o in other if o.kind == "power"]
    if power:
        folders = sorted({str(Path(o.path).parent.parent) for o in power})
        notes.append(f"{len(power)} power reading files (in {', '.join(folders)}): tprimat scores time to train only")
    unknown = [o for o in other if o.kind != "power"]
    for o in unknown[:shown]:
        notes.append(f"{o.path}: {o.note}")
    if shown is not None and len(unknown) > shown:
        notes.append(f"{len(unknown) - shown} more files (all listed in --json)")
    return notes


def print_summary(summary: MlperfSummary, console: Any) -> None:
    from rich.table import Table

    systems = summary.systems
    table = Table(title="MLPerf Training results (time to train = run_stop - run_start)", title_justify="left")
    for column in SYSTEM_COLUMNS:
        table.add_column(column)
    for row in system_rows(systems):
        table.add_row(*row)
    console.print(table)
    console.print(SCORE_NOTE, markup=False, highlight=False)
    for line in scaling_notes(systems):
        console.print(f"  scaling  {line}", markup=False, highlight=False)
    for line in differences(systems):
        console.print(f"  note  {line}", markup=False, highlight=False)
    for line in other_file_notes(summary.other_files):
        console.print(f"  not read  {line}", markup=False, highlight=False)
