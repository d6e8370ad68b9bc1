"""The comparison itself: runs grouped, gated, aggregated per system, with ratios and cost.

Everything a report shows is computed here from the results' own summaries
(which :mod:`tprimat.result.metrics` computed); the renderers only format it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.compare import frameworks
from tprimat.compare.group import (
    FAIR_FIELDS,
    Group,
    Run,
    config_diff,
    device_key,
    differences_within,
    differing_fields,
    group_runs,
)
from tprimat.compare.load import SkippedInput, load_runs
from tprimat.compare.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    Aggregate,
    Ratio,
    aggregate,
    ratio_of_medians,
)
from tprimat.errors import TprimatError
from tprimat.result.metrics import select_measured
from tprimat.settings.config import CostSection

#: Colour-blind-safe palette (Okabe & Ito), deliberately not the vendors' brand colours.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: The first system of each platform always gets the same colour, in every report.
PLATFORM_COLOURS = {"nvidia": "#0072B2", "amd": "#E69F00", "cpu": "#009E73"}


def assign_colours(systems: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """Colour per system label: its platform's colour for the first (by label) system of each
    platform, then unused palette colours in label order."""
    colours: dict[str, str] = {}
    for label, platform in sorted(systems):
        colour = PLATFORM_COLOURS.get(platform or "")
        if colour and colour not in colours.values():
            colours[label] = colour
    spare = [c for c in PALETTE if c not in colours.values()]
    for label, _ in sorted(systems):
        if label not in colours:
            colours[label] = spare.pop(0) if spare else PALETTE[len(colours) % len(PALETTE)]
    return colours


#: Memory quantities under their real names: (summary field, label).
MEMORY_FIELDS = (
    ("mem_max_allocated_gib", "allocator max allocated (GiB)"),
    ("mem_max_reserved_gib", "allocator max reserved (GiB)"),
    ("mem_device_used_gib", "device memory used, driver view (GiB)"),
    ("mem_rss_gib", "host process RSS (GiB)"),
)

#: Predicted beside measured memory per GPU, from each result's memory section: (field, label).
PREDICTED_MEMORY_FIELDS = (
    ("predicted_allocated_gib", "predicted peak allocated (GiB)"),
    ("measured_peak_allocated_gib", "measured peak allocated (GiB)"),
    ("predicted_total_gib", "predicted total with overhead (GiB)"),
    ("measured_peak_device_used_gib", "measured peak device used (GiB)"),
)


class MismatchError(TprimatError):
    """Results whose fair-comparison fields or framework settings differ, compared without
    ``--allow-mismatch``: ``rows`` are (field, one value per column), ``columns`` name the groups
    or runs they belong to."""

    def __init__(self, message: str, columns: list[str], rows: list[tuple[str, list[Any]]], *, title: str):
        super().__init__(message)
        self.columns = columns
        self.rows = rows
        self.title = title


@attrs.frozen(kw_only=True)
class Cost:
    price_per_gpu_hour: float | None
    gpu_hours_per_1t_tokens: float | None
    cost_per_1t_tokens: float | None
    cost_per_1t_tokens_range: tuple[float, float] | None  # from the throughput interval
    train_tokens: float
    world_size: int | None
    time_to_train_s: float | None
    note: str | None = None


@attrs.frozen(kw_only=True)
class SystemSummary:
    label: str
    group: str
    colour: str
    run_keys: list[str]
    platform: str | None
    device: str
    device_name: str | None
    framework: str | None
    backend: str
    world_size: int | None
    tokens_per_s_per_gpu: Aggregate | None
    step_time_median_s: Aggregate | None
    step_time_p95_s: Aggregate | None
    step_time_cv: Aggregate | None
    tflops_per_gpu: Aggregate | None
    mfu: Aggregate | None
    peak_tflops: list[float]
    peak_sources: list[str]
    memory: dict[str, Aggregate]
    device_memory_gib: float | None
    energy_per_token_j: Aggregate | None
    final_loss: Aggregate | None
    cost: Cost | None
    ratio: Ratio | None  # tokens/s/GPU over the baseline's; None for the baseline itself
    same_config_as_baseline: bool
    # Achieved TFLOP/s over the measured matmul ceiling (`tprimat microbench`), when recorded.
    mamf_utilisation: Aggregate | None = None
    mamf_tflops: list[float] = attrs.Factory(list)
    # The memory estimate beside the measured peak (result.memory): PREDICTED_MEMORY_FIELDS -> Aggregate.
    predicted_memory: dict[str, Aggregate] = attrs.Factory(dict)
    memory_peak_ranks: list[str] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class RunRow:
    """One run's own figures and where they come from."""

    key: str
    path: str
    run_id: str
    system: str
    group: str
    status: str
    device_name: str | None
    warmup_iterations: int
    measured_iterations: int
    measured_range: str
    tokens_per_s_per_gpu: float | None
    step_time_median_s: float | None
    step_time_p95_s: float | None
    step_time_cv: float | None
    tflops_per_gpu: float | None
    mfu: float | None
    final_loss: float | None
    notes: list[str]
    parser: str | None
    inputs: list[str]
    mamf_tflops: float | None = None
    mamf_utilisation: float | None = None
    # The pre-flight checks recorded in the run's manifest; None when it recorded none.
    preflight: list[dict[str, str]] | None = None


@attrs.frozen(kw_only=True)
class TuningGain:
    """What ``tuned`` bought one system: its tuned runs' tokens/s/GPU over its iso runs'."""

    system: str  # the iso system's label
    iso: Aggregate | None
    tuned: Aggregate | None
    speedup: Ratio | None
    presets: list[str]
    deviations: list[str]


@attrs.frozen(kw_only=True)
class Comparison:
    generated_at: str
    tprimat_version: str
    runs: list[Run]
    run_rows: list[RunRow]
    groups: list[Group]
    mismatched: list[tuple[str, list[Any]]]
    allow_mismatch: bool
    systems: list[SystemSummary]
    baseline: str
    config_diff: list[tuple[str, list[Any]]]
    skipped: list[SkippedInput]
    cost_settings: CostSection
    flops: list[dict[str, Any]]
    method: dict[str, Any]
    tuning: list[TuningGain] = attrs.Factory(list)
    #: Shared framework settings (docs/backends.md) that are not the same in every run.
    shared_settings: list[frameworks.SharedRow] = attrs.Factory(list)
    #: Runs whose math settings could not be checked.
    unchecked_settings: list[str] = attrs.Factory(list)
    #: Rendered settings a run's framework stated with another value.
    disagreements: list[frameworks.StatedDisagreement] = attrs.Factory(list)
    #: ``--group-by`` keys (None: systems are defined by every launched setting).
    group_by: list[str] | None = None
    #: System label -> launched settings that differ between its runs (only with ``group_by``).
    within_system: dict[str, list[tuple[str, list[Any]]]] = attrs.Factory(dict)

    def system(self, label: str) -> SystemSummary:
        return next(s for s in self.systems if s.label == label)

    def runs_of(self, label: str) -> list[Run]:
        return [r for r in self.runs if r.system == label]

    @property
    def tuning_only(self) -> bool:
        """iso and tuned runs of the same work (see :func:`differ_only_in_methodology`)."""
        return differ_only_in_methodology(self.groups, self.mismatched)


def differ_only_in_methodology(groups: list[Any], mismatched: list[tuple[str, list[Any]]]) -> bool:
    """Whether the groups share the work and differ only in methodology (iso vs tuned): what tuning
    bought each platform is then the comparison, and no --allow-mismatch is needed."""
    return len(groups) > 1 and [name for name, _ in mismatched] == ["methodology"]


def _measured_range(run: Run) -> tuple[str, int]:
    measured, _ = select_measured(run.result.iterations, warmup_iterations=run.result.summary.warmup_iterations)
    if not measured:
        return "none", 0
    first = measured[0].iteration - measured[0].covers_iterations + 1
    return f"{first}-{measured[-1].iteration}", len(measured)


def _run_row(run: Run) -> RunRow:
    s = run.result.summary
    measured_range, _ = _measured_range(run)
    return RunRow(
        key=run.key,
        path=run.path,
        run_id=run.result.run.id,
        system=run.system,
        group=run.group,
        status=run.result.run.status,
        device_name=run.result.hardware.device_name,
        warmup_iterations=s.warmup_iterations,
        measured_iterations=s.measured_iterations,
        measured_range=measured_range,
        tokens_per_s_per_gpu=s.tokens_per_s_per_gpu.median if s.tokens_per_s_per_gpu else None,
        step_time_median_s=s.step_time_s.median if s.step_time_s else None,
        step_time_p95_s=s.step_time_s.p95 if s.step_time_s else None,
        step_time_cv=s.step_time_s.cv if s.step_time_s else None,
        tflops_per_gpu=s.tflops_per_gpu,
        mfu=s.mfu,
        final_loss=s.final_loss,
        notes=list(run.result.provenance.notes),
        parser=run.result.provenance.parser,
        inputs=list(run.result.provenance.inputs),
        mamf_tflops=s.mamf_tflops,
        mamf_utilisation=s.mamf_utilisation,
        preflight=preflight_findings(Path(run.path)),
    )


def preflight_findings(result_path: Path) -> list[dict[str, str]] | None:
    """The ``tprimat doctor`` findings recorded in the manifest beside a result, if any."""
    from tprimat.running.manifest import MANIFEST_NAME, ManifestError, load_manifest

    path = result_path.parent / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        recorded = load_manifest(path).extra.get("doctor")
    except ManifestError:
        return None
    if not isinstance(recorded, list):
        return None
    return [{k: str(v) for k, v in f.items()} for f in recorded if isinstance(f, dict)]


def _cost(tokens: Aggregate | None, device: str, world: int | None, settings: CostSection) -> Cost:
    price = settings.gpu_hour_prices.get(device)
    note = None
    if price is None:
        note = (
            f"no price for {device} in [cost] gpu_hour_prices "
            f"(known: {', '.join(sorted(settings.gpu_hour_prices)) or 'none'})"
        )
    hours = cost = span = time = None
    if tokens is not None and tokens.median > 0:
        hours = 1e12 / tokens.median / 3600
        if price is not None:
            cost = hours * price
            if tokens.ci_low and tokens.ci_high:
                span = (1e12 / tokens.ci_high / 3600 * price, 1e12 / tokens.ci_low / 3600 * price)
        if world:
            time = settings.train_tokens / (tokens.median * world)
    return Cost(
        price_per_gpu_hour=price,
        gpu_hours_per_1t_tokens=hours,
        cost_per_1t_tokens=cost,
        cost_per_1t_tokens_range=span,
        train_tokens=settings.train_tokens,
        world_size=world,
        time_to_train_s=time,
        note=note,
    )


def _predicted_memory(results: Sequence[Any]) -> dict[str, Aggregate]:
    """The memory estimate and measured peaks of each result's memory section, aggregated."""
    predicted = {}
    for field, _label in PREDICTED_MEMORY_FIELDS:
        agg = aggregate([getattr(r.memory, field) if r.memory else None for r in results], interval=False)
        if agg is not None:
            predicted[field] = agg
    return predicted


def _unique(values: Sequence[Any]) -> Any:
    distinct = {repr(v): v for v in values}
    return next(iter(distinct.values())) if len(distinct) == 1 else None


def _pick_baseline(labels: list[str], runs: list[Run], wanted: str | None) -> str:
    if wanted is None:
        return runs[0].system
    lowered = wanted.lower()
    exact = [label for label in labels if label.lower() == lowered]
    if exact:
        return exact[0]
    matches = []
    for label in labels:
        example = next(r for r in runs if r.system == label).result
        haystack = [
            label,
            example.run.platform or "",
            example.run.backend,
            example.run.framework or "",
            example.hardware.device_name or "",
        ]
        if any(lowered in h.lower() for h in haystack):
            matches.append(label)
    if len(matches) == 1:
        return matches[0]
    known = "; ".join(labels)
    if not matches:
        raise TprimatError(f"--baseline {wanted!r} matches no system; systems: {known}")
    raise TprimatError(f"--baseline {wanted!r} matches several systems ({'; '.join(matches)}); give one of: {known}")


def _tuning_gains(runs: Sequence[Run], systems: Sequence[SystemSummary]) -> list[TuningGain]:
    """Each system measured both ``iso`` and ``tuned``: the speed-up its tuned setup gave."""

    def machine(run: Run) -> tuple[Any, ...]:
        r = run.result
        return device_key(r), r.run.framework, r.run.backend, r.config.world_size

    def medians(results: Sequence[Run]) -> list[float]:
        return [r.result.summary.tokens_per_s_per_gpu.median for r in results if r.result.summary.tokens_per_s_per_gpu]

    by_label = {s.label: s for s in systems}
    gains = []
    for key in dict.fromkeys(machine(r) for r in runs):
        iso = [r for r in runs if machine(r) == key and r.result.config.methodology == "iso"]
        tuned = [r for r in runs if machine(r) == key and r.result.config.methodology == "tuned"]
        if not iso or not tuned:
            continue
        gains.append(
            TuningGain(
                system=iso[0].system,
                iso=by_label[iso[0].system].tokens_per_s_per_gpu,
                tuned=by_label[tuned[0].system].tokens_per_s_per_gpu,
                speedup=ratio_of_medians(medians(tuned), medians(iso)),
                presets=sorted({r.result.config.preset for r in tuned if r.result.config.preset}),
                deviations=sorted({d for r in tuned for d in r.result.config.deviations}),
            )
        )
    return gains


def build_comparison(
    paths: Sequence[str | Path],
    *,
    cost: CostSection,
    allow_mismatch: bool = False,
    baseline: str | None = None,
    group_by: Sequence[str] | None = None,
) -> Comparison:
    """Load, group, gate and aggregate the results under ``paths``.

    ``group_by``: keys that define a system (``--group-by``); by default every launched setting does.
    """
    loaded = load_runs(paths)
    if not loaded.runs:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in loaded.skipped[:5])
        raise TprimatError("no valid tprimat results to compare" + (f" ({reasons})" if reasons else ""))
    runs, groups = group_runs(loaded.runs, group_by)
    mismatched = differing_fields(groups)
    if not allow_mismatch:
        _refuse_unfair(runs, groups, mismatched)
    chosen, systems = _summarise_systems(runs, baseline, cost)
    return Comparison(
        tuning=_tuning_gains(runs, systems),
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tprimat_version=__version__,
        runs=runs,
        run_rows=[_run_row(r) for r in runs],
        groups=groups,
        mismatched=mismatched,
        allow_mismatch=allow_mismatch,
        systems=systems,
        baseline=chosen,
        config_diff=config_diff(runs) if len(runs) > 1 else [],
        shared_settings=frameworks.shared_rows(runs),
        unchecked_settings=frameworks.unknown_math(runs) if len(runs) > 1 else [],
        disagreements=frameworks.disagreements(runs),
        group_by=list(group_by) if group_by is not None else None,
        within_system=differences_within(runs),
        skipped=loaded.skipped,
        cost_settings=cost,
        flops=_flops_entries(runs),
        method=_method(group_by),
    )


def _refuse_unfair(runs: list[Run], groups: list[Group], mismatched: list[tuple[str, list[Any]]]) -> None:
    """Raise :class:`MismatchError` when the runs are not one workload (beyond iso vs tuned), or
    their frameworks do not compute the same step (what ``--allow-mismatch`` lets through)."""
    if len(groups) > 1 and not differ_only_in_methodology(groups, mismatched):
        names = ", ".join(name for name, _ in mismatched)
        raise MismatchError(
            f"the results do not share the fields a fair comparison needs ({names} differ "
            f"across {len(groups)} groups); compare matching runs, or pass --allow-mismatch "
            "to put them side by side anyway",
            [f"group {g.id} ({', '.join(g.run_keys)})" for g in groups],
            mismatched,
            title="Fields that differ between the results (they must match)",
        )
    refused = frameworks.refusal(runs)
    if refused is not None:
        reason, rows = refused
        raise MismatchError(
            f"{reason}; compare runs that compute the same step, or pass --allow-mismatch to put "
            "them side by side anyway (the report then lists every difference)",
            [r.key for r in runs],
            rows,
            title="Framework settings that change what a step computes, or were not what the plan said",
        )


def _summarise_systems(runs: list[Run], baseline: str | None, cost: CostSection) -> tuple[str, list[SystemSummary]]:
    """The baseline system's label and one summary per system, the baseline first."""
    labels = list(dict.fromkeys(r.system for r in runs))
    chosen = _pick_baseline(labels, runs, baseline)
    colours = assign_colours(
        [(label, next(r for r in runs if r.system == label).result.run.platform) for label in labels]
    )
    baseline_runs = [r for r in runs if r.system == chosen]
    baseline_tokens = [
        r.result.summary.tokens_per_s_per_gpu.median for r in baseline_runs if r.result.summary.tokens_per_s_per_gpu
    ]
    ordered = [chosen] + [label for label in labels if label != chosen]
    systems = []
    for label in ordered:
        members = [r for r in runs if r.system == label]
        ratio = None
        if label != chosen:
            ratio = ratio_of_medians(
                [
                    m.result.summary.tokens_per_s_per_gpu.median
                    for m in members
                    if m.result.summary.tokens_per_s_per_gpu
                ],
                baseline_tokens,
            )
        systems.append(
            _system_summary(
                label,
                members,
                colour=colours[label],
                ratio=ratio,
                same_config_as_baseline=members[0].group == baseline_runs[0].group,
                cost=cost,
            )
        )
    return chosen, systems


def _system_summary(
    label: str,
    members: list[Run],
    *,
    colour: str,
    ratio: Ratio | None,
    same_config_as_baseline: bool,
    cost: CostSection,
) -> SystemSummary:
    """One system's figures aggregated over its runs (``members``): each run counts by its own summary."""
    results = [r.result for r in members]
    summaries = [r.summary for r in results]
    tokens = aggregate([s.tokens_per_s_per_gpu.median if s.tokens_per_s_per_gpu else None for s in summaries])
    first = results[0]
    device = device_key(first)
    world = _unique([r.config.world_size for r in results])
    memory = {}
    for field, _label in MEMORY_FIELDS:
        agg = aggregate([getattr(s, field) for s in summaries], interval=False)
        if agg is not None:
            memory[field] = agg
    return SystemSummary(
        label=label,
        group=members[0].group,
        colour=colour,
        run_keys=[r.key for r in members],
        platform=first.run.platform,
        device=device,
        device_name=first.hardware.device_name,
        framework=first.run.framework,
        backend=first.run.backend,
        world_size=world,
        tokens_per_s_per_gpu=tokens,
        step_time_median_s=aggregate(
            [s.step_time_s.median if s.step_time_s else None for s in summaries], interval=False
        ),
        step_time_p95_s=aggregate([s.step_time_s.p95 if s.step_time_s else None for s in summaries], interval=False),
        step_time_cv=aggregate([s.step_time_s.cv if s.step_time_s else None for s in summaries], interval=False),
        tflops_per_gpu=aggregate([s.tflops_per_gpu for s in summaries], interval=False),
        mfu=aggregate([s.mfu for s in summaries], interval=False),
        peak_tflops=sorted({s.peak_tflops for s in summaries if s.peak_tflops is not None}),
        peak_sources=sorted({s.peak_source for s in summaries if s.peak_source}),
        memory=memory,
        device_memory_gib=_unique([r.hardware.memory_per_device_gib for r in results]),
        energy_per_token_j=aggregate([s.energy_per_token_j for s in summaries]),
        final_loss=aggregate([s.final_loss for s in summaries], interval=False),
        cost=_cost(tokens, device, world, cost),
        ratio=ratio,
        same_config_as_baseline=same_config_as_baseline,
        mamf_utilisation=aggregate([s.mamf_utilisation for s in summaries], interval=False),
        predicted_memory=_predicted_memory(results),
        memory_peak_ranks=sorted({r.memory.peak_rank for r in results if r.memory and r.memory.peak_rank}),
        mamf_tflops=sorted({s.mamf_tflops for s in summaries if s.mamf_tflops is not None}),
    )


def _flops_entries(runs: list[Run]) -> list[dict[str, Any]]:
    """Each distinct (model, sequence length) FLOPs-per-token figure and its formula, in run order."""
    flops: list[dict[str, Any]] = []
    for run in runs:
        s = run.result.summary
        entry = {
            "model": run.result.config.model,
            "seq_length": run.result.config.seq_length,
            "flops_per_token": s.flops_per_token,
            "formula": s.flops_formula,
        }
        if s.flops_per_token is not None and entry not in flops:
            flops.append(entry)
    return flops


def _method(group_by: Sequence[str] | None) -> dict[str, Any]:
    """How every figure of the comparison is computed, for the report's Method section."""
    return {
        "per_run_value": "each run's own median over its measured iterations "
        "(tprimat.result.metrics; warm-up and profiled iterations left out)",
        "systems": "runs are repeats of one system when they launched the same thing (device, backend, "
        "framework, software, every recorded setting but the seed)"
        if group_by is None
        else f"runs pooled by --group-by {','.join(group_by)}",
        "interval": f"{CONFIDENCE:.0%} percentile bootstrap of the median over runs; called the range "
        "of N runs when it is the observed range (too few runs for a confidence interval)",
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        "bootstrap_seed": BOOTSTRAP_SEED,
        "ratio": "median tokens/s/GPU of a system over the baseline's; interval from "
        "resampling each system's runs independently",
        "fair_fields": list(FAIR_FIELDS),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if attrs.has(type(value)):
        return _plain(attrs.asdict(value, recurse=False))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def comparison_to_dict(comparison: Comparison) -> dict[str, Any]:
    """The JSON-ready form of the comparison (``report.json``)."""
    data = {
        field.name: _plain(getattr(comparison, field.name))
        for field in attrs.fields(Comparison)
        if field.name != "runs"
    }
    data["runs"] = [
        {
            "key": r.key,
            "path": r.path,
            "run_id": r.result.run.id,
            "system": r.system,
            "group": r.group,
            "fair_fields": r.fields,
        }
        for r in comparison.runs
    ]
    data["mismatched"] = [
        {"field": name, "values_by_group": dict(zip([g.id for g in comparison.groups], _plain(values), strict=True))}
        for name, values in comparison.mismatched
    ]
    keys = [r.key for r in comparison.runs]
    data["config_diff"] = [
        {"key": name, "values_by_run": dict(zip([r.key for r in comparison.runs], _plain(values), strict=True))}
        for name, values in comparison.config_diff
    ]
    data["shared_settings"] = [
        {"name": row.name, "kind": row.kind, "values_by_run": dict(zip(keys, _plain(row.values), strict=True))}
        for row in comparison.shared_settings
    ]
    data["unchecked_settings"] = list(comparison.unchecked_settings)
    data["within_system"] = {
        label: [
            {"key": name, "values_by_run": dict(zip(comparison.system(label).run_keys, _plain(values), strict=True))}
            for name, values in rows
        ]
        for label, rows in comparison.within_system.items()
    }
    data["disagreements"] = [attrs.asdict(d) for d in comparison.disagreements]
    data["schema"] = "tprimat.compare/1"
    return data
