"""Successive halving over the candidates, one short benchmark at a time, resumable after a kill.

Round 0 runs every candidate once for a few iterations; each later round keeps
the faster half (never fewer than ``finalists``) and doubles the iterations;
the last round runs the finalists ``final_repeats`` times, so the winner is
chosen on the core's statistics: the median tokens/s/GPU over runs with its
bootstrap interval (:mod:`tprimat.compare.stats`).  The finalist with the
highest median wins when the interval of its speed ratio to every other
finalist lies above 1; when one includes 1 the measurements cannot tell them
apart, the tune is *undecided* and names no winner (:func:`_decide`).  A trial
budget too small to compare two candidates is refused before anything runs.

Every trial is a run of the suite machinery (:mod:`tprimat.suite.campaign`): a stable
id that covers what it runs, one ``tprimat run`` child at a time that dies
with the tuner, results on disk as the only truth.  Every decision (which
candidates a round holds, who is promoted, who wins) is a function of the
completed results on disk and the fixed simplicity order, so a tuner killed
at any moment and started again makes the same decisions from the same
results; completed trials are never run again.  A trial that dies of
out-of-memory (:mod:`tprimat.tune.oom`) makes its candidate *infeasible*; any
other failure is recorded and the candidate leaves the search.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat.atomic import atomic_write_text
from tprimat.compare.stats import aggregate, ratio_of_medians
from tprimat.errors import TprimatError
from tprimat.result.schema import ResultError, load_result
from tprimat.settings.tomltext import toml_document
from tprimat.suite.campaign import RUNS_DIR, STATE_FILE, SuiteSpec, SuiteState, expand, run_status, run_suite
from tprimat.tune.oom import oom_in_run
from tprimat.tune.space import Candidate

DEFINITION_FILE = "tune.json"
PROGRESS_FILE = "progress.json"
SUMMARY_FILE = "summary.json"
TRIAL_PRESETS_DIR = "trial-presets"


class TuneError(TprimatError):
    """A tune directory or budget that cannot be used."""


@attrs.frozen(kw_only=True)
class Budget:
    """At most ``trials`` trial runs, or ``seconds`` of trial time (summed over resumes)."""

    trials: int | None = None
    seconds: float | None = None

    def __str__(self) -> str:
        if self.trials is not None:
            return f"{self.trials} trials"
        return f"{self.seconds:g} s"


@attrs.frozen(kw_only=True)
class TuneSpec:
    """What a tune searches and how; stored in the tune directory (``tune.json``)."""

    backend: str
    model: str
    precision: str
    overrides: tuple[str, ...] = ()  # the user's --set values, for every trial
    config: str | None = None  # absolute path of the base config (a copy in the tune directory)
    candidates: tuple[Candidate, ...] = ()  # after validity checks and pruning, simplest first
    budget: Budget = Budget(trials=24)
    min_iterations: int = 5
    eta: int = 2
    finalists: int = 2
    final_repeats: int = 3
    device: str | None = None  # the device name trial presets are matched against

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model": self.model,
            "precision": self.precision,
            "overrides": list(self.overrides),
            "config": self.config,
            "candidates": [c.as_dict() for c in self.candidates],
            "budget": {"trials": self.budget.trials, "seconds": self.budget.seconds},
            "min_iterations": self.min_iterations,
            "eta": self.eta,
            "finalists": self.finalists,
            "final_repeats": self.final_repeats,
            "device": self.device,
        }


def worst_case_trials(n: int, *, eta: int, finalists: int, final_repeats: int) -> int:
    """Trial runs successive halving needs for ``n`` candidates when every one runs."""
    total = 0
    while n > finalists:
        total += n
        n = max(finalists, math.ceil(n / eta))
    return total + n * final_repeats


def fit_budget(
    found: list[Candidate], budget: Budget, *, eta: int, finalists: int, final_repeats: int
) -> tuple[list[Candidate], list[Candidate]]:
    """The simplest candidates whose search fits a trial budget, and those left out."""
    if budget.trials is None:
        return list(found), []
    n = len(found)
    while n > 0 and worst_case_trials(n, eta=eta, finalists=finalists, final_repeats=final_repeats) > budget.trials:
        n -= 1
    if n < 2 <= len(found):
        need = worst_case_trials(2, eta=eta, finalists=finalists, final_repeats=final_repeats)
        raise TuneError(
            f"--budget {budget.trials} trials is too small to compare two candidates: the "
            f"simplest (the config as written, when it is valid) and one other, {final_repeats} "
            f"runs each, need {need} trial runs; give --budget {need} or more"
        )
    return list(found[:n]), list(found[n:])


@attrs.frozen(kw_only=True)
class Trial:
    """One trial run: a candidate at a round's iterations, one repeat."""

    id: str
    candidate: str
    round: int
    iterations: int
    repeat: int
    status: str  # completed | infeasible | failed | pending
    tokens_per_s_per_gpu: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    software: dict[str, Any] = attrs.Factory(dict)
    evidence: str | None = None  # the out-of-memory line, or the failure


@attrs.frozen(kw_only=True)
class Outcome:
    """What a tune found: every trial, the rounds, the winner and why."""

    trials: tuple[Trial, ...]
    rounds: tuple[tuple[str, ...], ...]  # candidate ids per round
    status: dict[str, str]  # candidate id -> winner | finalist | eliminated in round N | infeasible | ...
    winner: Candidate | None
    decision: str
    statistics: dict[str, dict[str, Any]]  # candidate id -> median/interval of the deciding round
    undecided: bool = False  # measured, but the intervals could not tell the finalists apart
    budget_spent: bool = False
    seconds: float = 0.0


def trial_suite(spec: TuneSpec, candidate: Candidate, iterations: int, repeats: int, directory: Path) -> SuiteSpec:
    """The suite (one cell, ``repeats`` runs) that measures ``candidate`` at ``iterations``.

    Config knobs are ``--set`` overrides of an ``iso`` run.  A candidate with backend
    switches runs ``tuned`` with its own trial preset (:func:`trial_presets`), and its
    base config is a copy that names the switches, so that the suite's run ids (which
    cover the base config's content) differ between switch values.
    """
    config = spec.config
    if candidate.switches():
        base = Path(spec.config).read_text(encoding="utf-8") if spec.config else ""
        marker = f"# backend switches of {candidate.id} (from its trial preset): {json.dumps(candidate.switches())}\n"
        path = directory / TRIAL_PRESETS_DIR / candidate.id / "base-config.toml"
        if not path.exists() or path.read_text(encoding="utf-8") != marker + base:
            atomic_write_text(path, marker + base)
        config = str(path.absolute())
    return SuiteSpec(
        name="tune",
        backends=(spec.backend,),
        models=(spec.model,),
        precisions=(spec.precision,),
        methodologies=("tuned",) if candidate.switches() else ("iso",),
        repeats=repeats,
        iterations=iterations,
        config=config,
        max_attempts=1,
        overrides=(*spec.overrides, *candidate.overrides()),
    )


def _trial(directory: Path, state: SuiteState, run: Any, candidate: Candidate, round_: int, iterations: int) -> Trial:
    run_dir = directory / RUNS_DIR / run.id
    status, problem = run_status(run_dir)
    result = None
    if status not in ("pending", "invalid"):
        try:
            result = load_result(run_dir / "result.json")
        except ResultError:
            result = None
    # The fields every status has (dates and versions once the run has written a result).
    known: dict[str, Any] = {
        "id": run.id,
        "candidate": candidate.id,
        "round": round_,
        "iterations": iterations,
        "repeat": run.repeat,
    }
    if result is not None:
        software = {k: v for k, v in attrs.asdict(result.software).items() if v}
        software["tprimat"] = result.run.tprimat_version
        known |= {"started_at": result.run.started_at, "finished_at": result.run.finished_at, "software": software}
    if status == "completed":
        assert result is not None
        return Trial(**known, status="completed", tokens_per_s_per_gpu=_run_median(result))
    if state.attempts.get(run.id, 0) < 1:
        return Trial(**known, status="pending")
    oom = oom_in_run(run_dir)
    if oom:
        return Trial(**known, status="infeasible", evidence=oom)
    return Trial(**known, status="failed", evidence=state.last_error.get(run.id) or problem)


def _run_median(result: Any) -> float | None:
    """A run's own median tokens/s/GPU over its measured iterations (the core's summary)."""
    stats = result.summary.tokens_per_s_per_gpu
    return None if stats is None else stats.median


@contextlib.contextmanager
def trial_presets(spec: TuneSpec, candidate: Candidate, directory: Path) -> Iterator[None]:
    """While it is open, ``tprimat run`` (and its children) find only ``candidate``'s trial preset:
    its backend switches as ``[backends.<b>.overrides]``, for this device, backend and model."""
    if not candidate.switches():
        yield
        return
    from tprimat.settings.methodology import PRESET_DIR_ENV

    folder = directory / TRIAL_PRESETS_DIR / candidate.id / "preset"  # beside its base-config.toml
    preset = {
        "name": f"trial-{candidate.id}",
        "devices": [spec.device or ""],
        "platform": "any",
        "source": f"tprimat tune trial of {candidate.id}",
        "backend": spec.backend,
        "model": spec.model,
    }
    backends = {backend: {"overrides": values} for backend, values in candidate.switches().items()}
    atomic_write_text(
        folder / "trial.toml",
        toml_document({"preset": preset, "backends": backends} if backends else {"preset": preset}),
    )
    before = os.environ.get(PRESET_DIR_ENV)
    os.environ[PRESET_DIR_ENV] = str(folder.absolute())
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PRESET_DIR_ENV, None)
        else:
            os.environ[PRESET_DIR_ENV] = before


def _progress(directory: Path) -> float:
    try:
        return float(json.loads((directory / PROGRESS_FILE).read_text())["trial_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _save_progress(directory: Path, seconds: float) -> None:
    atomic_write_text(directory / PROGRESS_FILE, json.dumps({"trial_seconds": seconds}) + "\n")


Announce = Callable[[str], None]


@attrs.define
class _Search:
    """The running state of one :func:`tune` call."""

    spec: TuneSpec
    directory: Path
    launcher: Callable[[list[str]], int] | None
    say: Announce
    clock: Callable[[], float]
    seconds: float = 0.0
    budget_spent: bool = False
    trials: list[Trial] = attrs.Factory(list)
    status: dict[str, str] = attrs.Factory(dict)

    def measure(self, candidate: Candidate, round_: int, iterations: int, repeats: int) -> list[float]:
        """Run what is left of ``candidate``'s trials in this round; its completed values."""
        suite = trial_suite(self.spec, candidate, iterations, repeats, self.directory)
        runs = expand(suite)
        state = SuiteState.load(self.directory / STATE_FILE)
        pending = any(_trial(self.directory, state, r, candidate, round_, iterations).status == "pending" for r in runs)
        budget = self.spec.budget.seconds
        if pending and budget is not None and self.seconds >= budget:
            self.budget_spent = True
        if pending and not self.budget_spent:
            self.say(f"  {candidate.id} {candidate.text}")
            started = self.clock()
            with trial_presets(self.spec, candidate, self.directory):
                run_suite(suite, self.directory, launcher=self.launcher)
            self.seconds += self.clock() - started
            _save_progress(self.directory, self.seconds)
        state = SuiteState.load(self.directory / STATE_FILE)
        found = [_trial(self.directory, state, r, candidate, round_, iterations) for r in runs]
        self.trials.extend(found)
        done = [t.tokens_per_s_per_gpu for t in found if t.status == "completed" and t.tokens_per_s_per_gpu is not None]
        if any(t.status == "infeasible" for t in found):
            self.status[candidate.id] = "infeasible (out of memory)"
            return []
        if not done:
            failed = any(t.status in ("failed", "completed") for t in found)  # completed: nothing measured
            self.status[candidate.id] = f"failed in round {round_}" if failed else "not run (budget spent)"
        return done


def tune(
    spec: TuneSpec,
    directory: Path,
    *,
    launcher: Callable[[list[str]], int] | None = None,
    announce: Announce | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Run (or resume) the search in ``directory`` and decide; trials already done are kept."""
    order = {c.id: i for i, c in enumerate(spec.candidates)}
    by_id = {c.id: c for c in spec.candidates}
    search = _Search(
        spec=spec,
        directory=directory,
        launcher=launcher,
        say=announce or (lambda _: None),
        clock=clock,
        seconds=_progress(directory),
    )
    rounds: list[tuple[str, ...]] = []
    alive = list(spec.candidates)
    deciding: dict[str, list[float]] = {}
    round_ = 0
    while alive:
        final = len(alive) <= spec.finalists
        iterations = spec.min_iterations * spec.eta**round_
        repeats = spec.final_repeats if final else 1
        rounds.append(tuple(c.id for c in alive))
        search.say(f"round {round_}: {len(alive)} candidate(s), {iterations} iterations, {repeats} run(s) each")
        values = {}
        for candidate in alive:
            done = search.measure(candidate, round_, iterations, repeats)
            if done:
                values[candidate.id] = done
        if values and not (search.budget_spent and deciding):
            deciding = values  # a round the budget cut short does not replace a whole one
        ranked = sorted(values, key=lambda cid: (-_median(values[cid]), order[cid]))
        if search.budget_spent or final or not ranked:
            break
        keep = len(ranked) if len(ranked) <= spec.finalists else max(spec.finalists, math.ceil(len(ranked) / spec.eta))
        for cid in ranked[keep:]:
            search.status[cid] = f"eliminated in round {round_}"
        alive = [by_id[cid] for cid in ranked[:keep]]
        round_ += 1
    others = [search.status.get(c.id, "") for c in spec.candidates if c.id not in deciding]
    rest_infeasible = bool(others) and all(status.startswith("infeasible") for status in others)
    winner, decision, statistics = _decide(deciding, order, by_id, rest_infeasible=rest_infeasible)
    for cid in deciding:
        search.status[cid] = "winner" if winner and cid == winner.id else "finalist"
    if search.budget_spent:
        decision = (
            f"the budget ({spec.budget}) ran out in round {round_}; decided on the last "
            f"round with completed runs. {decision}"
        )
    return Outcome(
        trials=tuple(search.trials),
        rounds=tuple(rounds),
        status=search.status,
        winner=winner,
        undecided=decision.startswith(UNDECIDED),
        decision=decision,
        statistics=statistics,
        budget_spent=search.budget_spent,
        seconds=search.seconds,
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


#: The decision when the measurements cannot tell the finalists apart: no winner, no preset.
UNDECIDED = "undecided — rerun with more repeats or on a quiet machine"


def _decide(
    values: dict[str, list[float]],
    order: dict[str, int],
    by_id: dict[str, Candidate],
    *,
    rest_infeasible: bool = False,
) -> tuple[Candidate | None, str, dict[str, dict[str, Any]]]:
    """The winner among ``values`` (candidate id -> tokens/s/GPU per run), and why.

    The only possible winner is the candidate with the highest median; it wins when the
    interval of its speed ratio to every other measured candidate lies above 1.  When an
    interval includes 1 (or there is none: single runs) the measurements cannot tell them
    apart and nothing wins (:data:`UNDECIDED`): a wide interval never hands the win to a
    slower median.  A candidate measured alone wins only when every other one could not
    run at all (``rest_infeasible``: out of memory), which is a finding, not a comparison.
    """
    statistics: dict[str, dict[str, Any]] = {}
    for cid, runs in values.items():
        agg = aggregate(runs)
        assert agg is not None
        statistics[cid] = {
            "n": agg.n,
            "median": agg.median,
            "ci_low": agg.ci_low,
            "ci_high": agg.ci_high,
            "interval": agg.interval,
            "values": list(agg.values),
        }
    if not values:
        return None, "no candidate completed a run: nothing to choose", statistics
    fastest = min(values, key=lambda cid: (-statistics[cid]["median"], order[cid]))
    best = statistics[fastest]
    if len(values) == 1:
        if rest_infeasible:
            return (
                by_id[fastest],
                f"{fastest} wins: the only candidate that ran (every other one ran out of memory); "
                f"median tokens/s/GPU {best['median']:.1f} over {best['n']} run(s)",
                statistics,
            )
        return None, f"{UNDECIDED}: only {fastest} completed its runs, there is nothing to compare it with", statistics
    apart = []
    for cid in sorted(values, key=order.__getitem__):
        if cid == fastest:
            continue
        ratio = ratio_of_medians(values[fastest], values[cid])
        assert ratio is not None  # medians of positive throughputs
        if ratio.ci_low is None or ratio.ci_high is None:
            return (
                None,
                f"{UNDECIDED}: {fastest} has the highest median, {ratio.value:.3f}x that of {cid}, "
                f"but {ratio.note or 'there is no interval'}",
                statistics,
            )
        bounds = f"[{ratio.ci_low:.3f}, {ratio.ci_high:.3f}] ({ratio.interval})"
        if ratio.ci_low <= 1.0:
            statistics[fastest].setdefault("ratio_to", {})[cid] = [ratio.value, ratio.ci_low, ratio.ci_high]
            return (
                None,
                f"{UNDECIDED}: {fastest} has the highest median, {ratio.value:.3f}x that of {cid}, "
                f"but the interval of that ratio, {bounds}, includes 1",
                statistics,
            )
        statistics[fastest].setdefault("ratio_to", {})[cid] = [ratio.value, ratio.ci_low, ratio.ci_high]
        apart.append(f"{ratio.value:.3f}x {cid}, interval {bounds}")
    return (
        by_id[fastest],
        f"{fastest} wins: highest median tokens/s/GPU {best['median']:.1f} over {best['n']} run(s), "
        f"and its speed ratio to every other finalist lies above 1 ({'; '.join(apart)})",
        statistics,
    )


def write_summary(directory: Path, spec: TuneSpec, outcome: Outcome, extra: dict[str, Any]) -> Path:
    """Everything the tune found, as JSON (``summary.json`` in the tune directory)."""
    data = {
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "definition": spec.to_json(),
        "winner": outcome.winner.as_dict() if outcome.winner else None,
        "winner_id": outcome.winner.id if outcome.winner else None,
        "decision": outcome.decision,
        "undecided": outcome.undecided,
        "budget_spent": outcome.budget_spent,
        "trial_seconds": outcome.seconds,
        "rounds": [list(r) for r in outcome.rounds],
        "candidates": {
            c.id: {"settings": c.as_dict(), "status": outcome.status.get(c.id, "not run")} for c in spec.candidates
        },
        "statistics": outcome.statistics,
        "trials": [attrs.asdict(t) for t in outcome.trials],
        **extra,
    }
    return atomic_write_text(directory / SUMMARY_FILE, json.dumps(data, indent=2, default=str) + "\n")
