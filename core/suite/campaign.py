"""Benchmark suites: a matrix of runs × repeats that survives being killed at any moment.

A suite file (TOML) describes the campaign once::

    [suite]
    name = "mi300x-vs-h100"
    backends = ["amd_primus", "nvd_nemo"]
    models = ["llama3.1-8b", "qwen2.5-7b"]
    precisions = ["bf16", "fp8"]
    methodologies = ["iso"]
    repeats = 3
    iterations = 50              # optional: overrides benchmark.iterations
    config = "bench.toml"        # optional: base config, relative to the suite file
    max_attempts = 3             # a failed or interrupted run is retried up to this many times
    set = ["training.seq_length=8192"]   # optional: overrides for every run

Each cell × repeat gets a stable id (the same cell and repeat always get the
same id; changing what a cell runs changes its id, so an old result is never
mistaken for a new one).  Runs execute one at a time through ``tprimat run``
in a child process that dies with the suite.  What is on disk is the truth: a run is done when its
``result.json`` loads and says ``completed``; ``state.json`` (written
atomically after every change) only adds attempt counts.  A killed suite
loses at most the run in flight; resuming re-runs unfinished runs, keeps the
files of failed attempts under ``runs/.attempts/``, and never touches a
completed result.  One command at a time works in a suite directory
(:mod:`tprimat.suite.lock`); a second one is refused before it changes anything.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.result.schema import ResultError, load_result
from tprimat.running.orphans import kill_marked
from tprimat.running.supervise import die_with_parent_hook
from tprimat.suite.lock import SUITE_TOKEN_ENV, SuiteLock, acquire

SUITE_FILE = "suite.toml"
STATE_FILE = "state.json"
RUNS_DIR = "runs"
ATTEMPTS_DIR = ".attempts"

_SUITE_KEYS = {
    "name",
    "backends",
    "models",
    "precisions",
    "methodologies",
    "repeats",
    "iterations",
    "config",
    "max_attempts",
    "set",
}


class SuiteError(TprimatError):
    """A suite file or directory that cannot be used."""


@attrs.frozen(kw_only=True)
class SuiteSpec:
    name: str
    backends: tuple[str, ...]
    models: tuple[str, ...]
    precisions: tuple[str, ...] = ("bf16",)
    methodologies: tuple[str, ...] = ("iso",)
    repeats: int = 1
    iterations: int | None = None
    config: str | None = None  # absolute path once loaded
    max_attempts: int = 2
    overrides: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SuiteRun:
    """One run of the matrix: a cell and a repeat number."""

    id: str
    backend: str
    model: str
    precision: str
    methodology: str
    repeat: int

    def overrides(self, spec: SuiteSpec) -> list[str]:
        values = [
            *spec.overrides,
            f"benchmark.model={self.model}",
            f"precision.dtype={self.precision}",
            f"benchmark.methodology={self.methodology}",
        ]
        if spec.iterations is not None:
            values.append(f"benchmark.iterations={spec.iterations}")
        return values


def _string_list(table: dict[str, Any], key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    value = table.get(key, default)
    if value is None:
        raise SuiteError(f"suite file: [suite] needs {key} = [...]")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) for v in value):
        raise SuiteError(f"suite file: suite.{key} must be a non-empty list of strings")
    return tuple(value)


def load_suite(path: str | Path) -> SuiteSpec:
    """Read and check a suite file; errors name the key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"cannot read suite {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: invalid TOML: {exc}") from None
    if set(data) != {"suite"} or not isinstance(data["suite"], dict):
        raise SuiteError(f"{path}: a suite file has exactly one table, [suite]")
    table = data["suite"]
    unknown = sorted(set(table) - _SUITE_KEYS)
    if unknown:
        raise SuiteError(f"{path}: unknown key suite.{unknown[0]}; known: {', '.join(sorted(_SUITE_KEYS))}")
    for key in ("repeats", "max_attempts", "iterations"):
        if key in table and (not isinstance(table[key], int) or isinstance(table[key], bool) or table[key] < 1):
            raise SuiteError(f"{path}: suite.{key} must be a positive integer")
    config = table.get("config")
    if config is not None:
        config_path = (path.parent / config).resolve()
        if not config_path.is_file():
            raise SuiteError(f"{path}: suite.config {config} does not exist")
        config = str(config_path)
    return SuiteSpec(
        name=str(table.get("name", path.stem)),
        backends=_string_list(table, "backends"),
        models=_string_list(table, "models"),
        precisions=_string_list(table, "precisions", ("bf16",)),
        methodologies=_string_list(table, "methodologies", ("iso",)),
        repeats=table.get("repeats", 1),
        iterations=table.get("iterations"),
        config=config,
        max_attempts=table.get("max_attempts", 2),
        overrides=_string_list(table, "set", ()) if "set" in table else (),
    )


def _cell_digest(spec: SuiteSpec, backend: str, model: str, precision: str, methodology: str) -> str:
    base = Path(spec.config).read_bytes() if spec.config else b""
    payload = json.dumps(
        {
            "backend": backend,
            "model": model,
            "precision": precision,
            "methodology": methodology,
            "iterations": spec.iterations,
            "overrides": list(spec.overrides),
            "config": hashlib.sha256(base).hexdigest(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:8]


def expand(spec: SuiteSpec) -> list[SuiteRun]:
    """The suite's runs in execution order: repeats outermost, so a cut-short campaign has
    at least one repeat of every cell before a second of any."""
    cells = list(itertools.product(spec.backends, spec.models, spec.precisions, spec.methodologies))
    runs = []
    for repeat in range(1, spec.repeats + 1):
        for backend, model, precision, methodology in cells:
            digest = _cell_digest(spec, backend, model, precision, methodology)
            runs.append(
                SuiteRun(
                    id=f"{backend}-{model}-{precision}-{methodology}-r{repeat}-{digest}",
                    backend=backend,
                    model=model,
                    precision=precision,
                    methodology=methodology,
                    repeat=repeat,
                )
            )
    return runs


# -- state on disk ------------------------------------------------------------------------


def run_status(run_dir: Path) -> tuple[str, str | None]:
    """``(status, problem)`` of a run directory, read from its result file alone.

    ``pending`` (no result), ``invalid`` (a result that does not load), or the
    result's own status (``completed``, ``failed``, ``interrupted``, ``partial``).
    """
    result_path = run_dir / "result.json"
    if not result_path.exists():
        return "pending", None
    try:
        return load_result(result_path).run.status, None
    except ResultError as exc:
        return "invalid", str(exc)


@attrs.define
class SuiteState:
    """Attempt counts and last errors, persisted atomically in ``state.json``."""

    path: Path
    attempts: dict[str, int] = attrs.Factory(dict)
    last_error: dict[str, str] = attrs.Factory(dict)

    @classmethod
    def load(cls, path: Path) -> SuiteState:
        state = cls(path=path)
        try:
            data = json.loads(path.read_text())
            state.attempts = {str(k): int(v) for k, v in data.get("attempts", {}).items()}
            state.last_error = {str(k): str(v) for k, v in data.get("last_error", {}).items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError, TypeError):
            # state.json is advisory: a damaged one only resets attempt counts.
            pass
        return state

    def save(self) -> None:
        atomic_write_text(
            self.path,
            json.dumps(
                {
                    "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "attempts": self.attempts,
                    "last_error": self.last_error,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n",
        )


def init_suite_dir(spec_path: Path, directory: Path) -> SuiteSpec:
    """Create (or reopen) a suite directory; its ``suite.toml`` is the campaign's definition."""
    directory.mkdir(parents=True, exist_ok=True)
    stored = directory / SUITE_FILE
    if stored.exists():
        same_runs = [r.id for r in expand(load_suite(stored))] == [r.id for r in expand(load_suite(spec_path))]
        if not same_runs:
            raise SuiteError(
                f"{directory} already holds a different suite; resume it with "
                f"'tprimat suite resume {directory}' or choose another --output"
            )
    else:
        text = spec_path.read_text(encoding="utf-8")
        spec = load_suite(spec_path)
        if spec.config:  # keep the suite directory self-contained
            base = directory / "base-config.toml"
            atomic_write_text(base, Path(spec.config).read_text(encoding="utf-8"))
            data = tomllib.loads(text)
            data["suite"]["config"] = base.name
            text = _dump_suite(data["suite"])
        atomic_write_text(stored, text)
    return load_suite(stored)


def _dump_suite(table: dict[str, Any]) -> str:
    lines = ["[suite]"]
    for key, value in table.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def suite_overview(spec: SuiteSpec, directory: Path) -> list[dict[str, Any]]:
    """One row per run: id, cell, status from disk, attempts from state."""
    state = SuiteState.load(directory / STATE_FILE)
    rows = []
    for run in expand(spec):
        status, problem = run_status(directory / RUNS_DIR / run.id)
        rows.append(
            {
                "id": run.id,
                "backend": run.backend,
                "model": run.model,
                "precision": run.precision,
                "methodology": run.methodology,
                "repeat": run.repeat,
                "status": status,
                "attempts": state.attempts.get(run.id, 0),
                "problem": problem or state.last_error.get(run.id),
            }
        )
    return rows


# -- running --------------------------------------------------------------------------------


LAUNCH_FILE = "launch.json"

#: ``tprimat run --slurm`` options a suite passes through to every run (option -> value type).
SLURM_OPTIONS = {"--nodes": int, "--gpus-per-node": int, "--partition": str, "--time": str, "--account": str}


@attrs.frozen(kw_only=True)
class SuiteLaunch:
    """How each run is started: locally (default) or as a SLURM job; strict pre-flight or not.

    Not part of a run's id (where a run executes does not change what it runs).
    Kept in the suite directory (``launch.json``) so that ``tprimat suite
    resume`` starts the remaining runs the same way.
    """

    slurm: bool = False
    slurm_options: tuple[tuple[str, str], ...] = ()  # (option, value), e.g. ("--nodes", "2")
    strict: bool = False
    tags: tuple[tuple[str, str], ...] = ()  # (key, value): every run gets `--tag key=value`

    def run_args(self) -> list[str]:
        argv = ["--strict"] if self.strict else []
        for key, value in self.tags:
            argv += ["--tag", f"{key}={value}"]
        if self.slurm:
            argv.append("--slurm")
            for option, value in self.slurm_options:
                argv += [option, value]
        return argv

    def save(self, directory: Path) -> None:
        atomic_write_text(
            directory / LAUNCH_FILE,
            json.dumps(
                {
                    "slurm": self.slurm,
                    "slurm_options": [list(o) for o in self.slurm_options],
                    "strict": self.strict,
                    "tags": [list(t) for t in self.tags],
                },
                indent=2,
            )
            + "\n",
        )

    @classmethod
    def load(cls, directory: Path) -> SuiteLaunch:
        path = directory / LAUNCH_FILE
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            options = tuple((str(o), str(v)) for o, v in data.get("slurm_options", []))
            unknown = [o for o, _ in options if o not in SLURM_OPTIONS]
            if unknown:
                raise ValueError(f"unknown option {unknown[0]}")
            tags = tuple((str(k), str(v)) for k, v in data.get("tags", []))
            return cls(slurm=bool(data.get("slurm")), slurm_options=options, strict=bool(data.get("strict")), tags=tags)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise SuiteError(f"{path}: unreadable ({exc}); delete it and pass the launch options again") from None


def slurm_launch(
    options: dict[str, Any], *, strict: bool = False, tags: tuple[tuple[str, str], ...] = ()
) -> SuiteLaunch:
    """A SLURM launch from option values keyed like ``nodes`` or ``gpus_per_node``."""
    pairs = []
    for option in SLURM_OPTIONS:
        value = options.get(option[2:].replace("-", "_"))
        if value is not None:
            pairs.append((option, str(value)))
    return SuiteLaunch(slurm=True, slurm_options=tuple(pairs), strict=strict, tags=tags)


def run_command(spec: SuiteSpec, run: SuiteRun, runs_dir: Path, launch: SuiteLaunch | None = None) -> list[str]:
    """The exact ``tprimat run`` invocation for one suite run."""
    argv = [
        sys.executable,
        "-m",
        "tprimat.cli",
        "run",
        "--backend",
        run.backend,
        "--output",
        str(runs_dir),
        "--run-id",
        run.id,
    ]
    if spec.config:
        argv += ["--config", spec.config]
    for override in run.overrides(spec):
        argv += ["--set", override]
    if launch is not None:
        argv += launch.run_args()
    return argv


def _set_aside(run_dir: Path, attempt: int) -> None:
    """Move an unfinished run's files out of the way, keeping them for diagnosis."""
    if not run_dir.exists():
        return
    keep = run_dir.parent / ATTEMPTS_DIR / f"{run_dir.name}.attempt{attempt}"
    keep.parent.mkdir(parents=True, exist_ok=True)
    suffix = 0
    while keep.exists():
        suffix += 1
        keep = keep.with_name(f"{run_dir.name}.attempt{attempt}.{suffix}")
    run_dir.rename(keep)


Announce = Callable[[str, SuiteRun, dict[str, int]], None]


def run_suite(
    spec: SuiteSpec,
    directory: Path,
    *,
    announce: Announce | None = None,
    launcher: Callable[[list[str]], int] | None = None,
    launch: SuiteLaunch | None = None,
    lock: SuiteLock | None = None,
) -> dict[str, int]:
    """Run every unfinished run of the suite in order; return counts by final status.

    ``lock`` is the suite directory's lock, held by the caller; without one it is
    taken here (refused with :class:`~tprimat.suite.lock.SuiteLockedError` while
    another command holds it) and released at the end.
    """
    if lock is None:
        directory.mkdir(parents=True, exist_ok=True)
        with acquire(directory) as own:
            return run_suite(spec, directory, announce=announce, launcher=launcher, launch=launch, lock=own)
    marker = lock.holder.token
    runs_dir = directory / RUNS_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    state = SuiteState.load(directory / STATE_FILE)
    for run in expand(spec):
        run_dir = runs_dir / run.id
        status, problem = run_status(run_dir)
        if status == "completed":
            continue
        attempts = state.attempts.get(run.id, 0)
        if attempts >= spec.max_attempts:
            continue
        if status != "pending" or run_dir.exists():
            if problem:
                state.last_error[run.id] = problem
            _set_aside(run_dir, attempts)
        state.save()
        if announce:
            announce("start", run, counts(spec, directory))
        argv = run_command(spec, run, runs_dir, launch)
        code = launcher(argv) if launcher else _launch_child(argv, {SUITE_TOKEN_ENV: marker})
        kill_marked(SUITE_TOKEN_ENV, marker)  # what the run left behind, and only that
        # Counted only once the run has ended by itself: a suite killed mid-run does not
        # use up the run's attempts.
        state.attempts[run.id] = attempts + 1
        status, problem = run_status(run_dir)
        if status != "completed":
            state.last_error[run.id] = problem or f"tprimat run exited with {code}, result {status}"
        else:
            state.last_error.pop(run.id, None)
        state.save()
        if announce:
            announce(status, run, counts(spec, directory))
        if code in (130, -signal.SIGINT):
            raise KeyboardInterrupt
    return counts(spec, directory)


def _launch_child(argv: list[str], env: dict[str, str] | None = None) -> int:
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(
        argv,
        env=environment,  # noqa: PLW1509
        preexec_fn=die_with_parent_hook(),
    )
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)  # the run keeps what it measured, marks itself interrupted
        process.wait()
        raise


def counts(spec: SuiteSpec, directory: Path) -> dict[str, int]:
    """Runs per status, from disk."""
    totals: dict[str, int] = {}
    for row in suite_overview(spec, directory):
        totals[row["status"]] = totals.get(row["status"], 0) + 1
    return totals


def report_groups(spec: SuiteSpec, directory: Path) -> dict[str, list[Path]]:
    """Completed result files grouped by model, precision and methodology (one report each)."""
    groups: dict[str, list[Path]] = {}
    for run in expand(spec):
        path = directory / RUNS_DIR / run.id / "result.json"
        if run_status(path.parent)[0] == "completed":
            groups.setdefault(f"{run.model}-{run.precision}-{run.methodology}", []).append(path)
    return groups
