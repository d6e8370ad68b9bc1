"""The core runner: one benchmark run, the same way for every backend.

``tprimat run`` resolves the backend and the config, captures the machine
(``manifest.json``), asks the backend's plugin for a :class:`LaunchPlan`, and
executes it:

* the process gets its own process group (and dies with the runner);
* its output is teed line by line into ``logs/`` in the run directory and fed,
  as it arrives, to the backend's ``parse_metrics`` hook;
* every new iteration updates the live view and, at most every few
  seconds, an intermediate ``result.json`` (status ``partial``), written
  atomically, so a killed runner loses nothing that was finished;
* Ctrl-C (SIGINT) or SIGTERM is forwarded to the whole group, the workers
  get a grace period, and the result is marked ``interrupted`` with the
  iterations measured so far; a second Ctrl-C kills at once;
* a job still running after ``launch.timeout_s`` is killed (``failed``);
  a non-zero exit is ``failed`` with the tail of the log in provenance.

Throughput, statistics and energy per token are computed by
:func:`tprimat.assemble.assemble_result`, never by the backend.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.assemble import assemble_result
from tprimat.collect import EventCollector
from tprimat.config import BenchmarkConfig, default_config_dict, dump_toml, load_config
from tprimat.convergence.summary import RUN_CLOCK_FACTS
from tprimat.errors import TprimatError
from tprimat.manifest import Manifest, capture_manifest, write_manifest
from tprimat.models import ModelSpec, UnknownModelError, get_model
from tprimat.plans import LaunchContext, LaunchPlan, PreparedDataset, ProfilePlan
from tprimat.platform import PlatformInfo
from tprimat.schema import IterationRecord, Provenance, Result, ResultConfig, RunInfo, RunStatus
from tprimat.schema import write_result as _write_result
from tprimat.secrets import redact_env, redact_text

#: The backend `tprimat run` picks on each platform when it is available (else ``torch``).
PLATFORM_DEFAULT_BACKENDS = {"amd": "amd_primus", "nvidia": "nvd_nemo"}
FALLBACK_BACKEND = "torch"
RESULT_NAME = "result.json"
#: Seconds between intermediate result writes while a run goes.
PARTIAL_WRITE_INTERVAL_S = 2.0
#: Seconds the workers get after SIGINT/SIGTERM/timeout before the group is killed.
GRACE_S = 40.0
LOG_TAIL_LINES = 30
#: Set in the job's environment: the runner's process id, so that a worker started after
#: its launcher was killed can tell it has been orphaned.
RUNNER_PID_ENV = "TPRIMAT_RUNNER_PID"


class RunError(TprimatError):
    """A run that cannot start: unknown model, unusable backend, bad dataset."""


@attrs.frozen(kw_only=True)
class RunRequest:
    """What the user asked for (``tprimat run``'s options)."""

    backend: str | None = None
    model: str | None = None
    config_file: str | None = None
    overrides: tuple[str, ...] = ()
    iterations: int | None = None
    output: Path = Path("runs")
    run_id: str | None = None
    nproc_per_node: int | None = None
    nnodes: int | None = None
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    profile: bool = False
    options: dict[str, Any] = attrs.Factory(dict)
    #: The per-node run of a submitted SLURM job: its run directory exists (it holds the job).
    in_slurm_job: bool = False
    system_profiler: str | None = None  # "nsys" | "rocprofv3": every worker runs under it

    def flag_overrides(self) -> list[str]:
        """The dedicated flags as ``section.key=value`` overrides (they win over ``--set``)."""
        pairs: list[tuple[str, Any]] = [
            ("benchmark.model", self.model),
            ("benchmark.iterations", self.iterations),
            ("launch.nproc_per_node", self.nproc_per_node),
            ("launch.nnodes", self.nnodes),
            ("launch.master_addr", self.master_addr),
            ("launch.master_port", self.master_port),
            ("profile.enabled", True if self.profile else None),
        ]
        return [f"{key}={json.dumps(value)}" for key, value in pairs if value is not None]


@attrs.frozen(kw_only=True)
class PreparedRun:
    """Everything decided before anything starts: what ``--dry-run`` prints."""

    request: RunRequest
    backend: str
    backend_reason: str
    config: BenchmarkConfig
    model: ModelSpec
    platform: PlatformInfo
    context: LaunchContext
    plan: LaunchPlan
    profile: ProfilePlan | None
    dataset: PreparedDataset | None
    notes: tuple[str, ...] = ()
    #: ``None``: the backend can run here; else one line saying what is missing and how to get it.
    unavailable: str | None = None

    @property
    def run_dir(self) -> Path:
        return self.context.run_dir


def launch_plan_notes(plan: LaunchPlan) -> list[str]:
    """The plan's methodology, every tuned deviation and its notes, for the result's provenance."""
    from tprimat.methodology import provenance_notes

    notes = provenance_notes(plan)
    notes += [f"launch plan: {note}" for note in plan.notes if note not in notes]
    return notes


@attrs.frozen(kw_only=True)
class RunOutcome:
    run_dir: Path
    result: Result | None  # None on a node other than node rank 0
    result_path: Path | None
    return_code: int | None  # None: the job could not be started


# -- preparing ------------------------------------------------------------------------------


def cpu_preset() -> dict[str, Any]:
    """The shipped CPU preset (``cpu.toml``)."""
    return tomllib.loads(resources.files("tprimat").joinpath("cpu.toml").read_text("utf-8"))


def latest_microbench(platform: PlatformInfo) -> dict[str, Any] | None:
    """The latest ``tprimat microbench`` summary of this run's device (this host's first).

    Recorded in the manifest under ``extra["microbench"]``; its measured matmul
    ceiling gives the result's MAMF utilisation.  None without a device name or
    a matching microbench.
    """
    if not platform.device_name:
        return None
    from tprimat.microbench.store import latest_for_device

    return latest_for_device(platform.device_name, host=platform.hostname)


def resolve_backend(
    registry: Any, requested: str | None, platform: PlatformInfo
) -> tuple[str, str]:
    """The backend to use and why: the requested one, the platform's default, else torch."""
    if requested:
        registry.backend(requested)  # unknown or conflicting names are errors
        return requested, "requested with --backend"
    default = PLATFORM_DEFAULT_BACKENDS.get(platform.platform)
    backends = registry.backends()
    if default and default in backends:
        availability = backends[default].availability()
        if availability.state == "available":
            return default, f"default backend on {platform.platform}"
        registry.backend(FALLBACK_BACKEND)
        return FALLBACK_BACKEND, (
            f"{default} (default on {platform.platform}) is not usable here ({availability}); "
            f"fell back to {FALLBACK_BACKEND}"
        )
    registry.backend(FALLBACK_BACKEND)
    return FALLBACK_BACKEND, f"default backend on {platform.platform}"


def effective_config(
    request: RunRequest, platform: PlatformInfo
) -> tuple[BenchmarkConfig, list[str]]:
    """Defaults (+ the CPU preset without a GPU), the config file, ``--set``, then the flags."""
    notes = []
    base = default_config_dict()
    if platform.platform == "cpu":
        for section, values in cpu_preset().items():
            base[section].update(values)
        notes.append("no GPU found: the CPU preset (cpu.toml) is layered under the config")
    overrides = [*request.overrides, *request.flag_overrides()]
    return load_config(request.config_file, overrides, base=base), notes


def new_run_id(backend: str, model: str, output: Path) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{backend}-{model}"
    candidate, n = base, 1
    while (output / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _load_dataset(config: BenchmarkConfig) -> PreparedDataset | None:
    if config.data.dataset == "mock":
        return None
    try:
        from tprimat.data import load_prepared
    except ImportError:
        raise RunError(
            f"data.dataset = {config.data.dataset!r}: reading prepared datasets needs "
            "tprimat.data, which this installation lacks"
        ) from None
    return load_prepared(config.data.dataset)


def prepare(request: RunRequest, registry: Any) -> PreparedRun:
    """Decide everything and build the launch plan; starts nothing, writes nothing."""
    platform = registry.detect_platform()
    config, notes = effective_config(request, platform)
    try:
        model = get_model(config.benchmark.model)
    except UnknownModelError as exc:
        raise RunError(str(exc)) from None
    backend, reason = resolve_backend(registry, request.backend, platform)
    output = Path(request.output)
    run_id = request.run_id or new_run_id(backend, model.name, output)
    run_dir = (output / run_id).absolute()
    if run_dir.exists() and not request.in_slurm_job:
        raise RunError(f"run directory {run_dir} already exists; choose another --run-id")
    dataset = _load_dataset(config)
    if config.convergence.enabled and dataset is None:
        raise RunError("convergence.enabled needs real tokens with a held-out split: set "
                       "data.dataset to a directory made by `tprimat prepare-data`")
    data = None
    if dataset is not None:
        if dataset.vocab_size > model.vocab_size:
            raise RunError(
                f"dataset {config.data.dataset} has token ids up to {dataset.vocab_size - 1}, "
                f"beyond the vocabulary of {model.name} ({model.vocab_size})"
            )
        data = registry.prepare_data(backend, dataset=dataset, config=config)
    context = LaunchContext(
        run_id=run_id, run_dir=run_dir, config=config, model=model, platform=platform,
        data=data, node_rank=request.node_rank, options=dict(request.options),
    )
    profile = None
    if request.system_profiler:
        context = attrs.evolve(context, system_profiler=request.system_profiler)
    if config.profile.enabled:
        profile = registry.profile(backend, context=context)
    elif request.system_profiler == "nsys":
        from tprimat.config import ConfigError

        try:  # a backend that can open a CUDA profiler range over the window answers with it
            candidate = registry.profile(backend, context=context)
        except ConfigError as exc:
            candidate = None
            notes.append(f"no capture range: the profile window does not fit this run ({exc})")
        profile = candidate if candidate is not None and candidate.capture_range else None
    if profile is not None:
        context = attrs.evolve(context, profile=profile)
    plan = registry.launch(backend, context=context)
    if request.system_profiler:
        capture = profile is not None and profile.capture_range
        plan, note = with_system_profiler(plan, request.system_profiler, run_dir,
                                          capture_range=capture)
        notes.append(note)
    return PreparedRun(
        request=request, backend=backend, backend_reason=reason, config=config, model=model,
        platform=platform, context=context, plan=plan, profile=profile, dataset=dataset,
        notes=tuple(notes), unavailable=unavailable_reason(registry, backend, context.options),
    )


#: Backend options that stand for an environment variable a backend requires.
OPTION_ENV = {"megatron_path": "MEGATRON_PATH", "primus_path": "PRIMUS_PATH"}


def requirement_environ(options: dict[str, Any]) -> dict[str, str]:
    """The environment the availability check sees: ``--megatron-path`` counts as the variable."""
    environ = dict(os.environ)
    for option, variable in OPTION_ENV.items():
        if options.get(option):
            environ[variable] = str(options[option])
    return environ


def require_backend(registry: Any, backend: str, options: dict[str, Any]) -> None:
    """Raise a one-line error (exit code 2) when ``backend`` cannot run on this machine."""
    from tprimat import backend as backends

    registered = registry.backend(backend)
    if registered.conflict:
        raise RunError(f"backend {backend} cannot run here: {registered.conflict}")
    backends.require_available(registered.spec, requirement_environ(options))


def unavailable_reason(registry: Any, backend: str, options: dict[str, Any]) -> str | None:
    """What :func:`require_backend` would say, or ``None`` when the backend can run here."""
    try:
        require_backend(registry, backend, options)
    except TprimatError as exc:
        return str(exc)
    return None
#: Where a system profiler's per-worker reports go, relative to the run directory.
SYSPROF_DIR = "sysprof"


def with_system_profiler(plan: LaunchPlan, tool: str, run_dir: Path, *,
                         capture_range: bool = False) -> tuple[LaunchPlan, str]:
    """The plan with every torchrun worker wrapped by ``tool`` (:mod:`tprimat.sysprof`), and a note.

    ``capture_range``: the backend opens a CUDA profiler range over the profile window
    (``ProfilePlan.capture_range``), so Nsight Systems records only that range.
    """
    from tprimat.sysprof import SystemProfiler, apply_system_profiler

    profiler = SystemProfiler(tool=tool, output_dir=run_dir / SYSPROF_DIR,
                              capture_range=capture_range)
    wrapped = apply_system_profiler(plan, profiler)
    scope = ("only the profile window (the backend's cudaProfilerStart/Stop range)"
             if capture_range else "the whole worker")
    return wrapped, (f"every training worker runs under {tool} (torchrun --no-python), "
                     f"recording {scope}; one report per rank in {run_dir / SYSPROF_DIR}")


def describe_plan(prepared: PreparedRun) -> str:
    """What ``--dry-run`` prints: the exact command, environment, files and effective config."""
    plan = prepared.plan
    lines = [
        f"# backend: {prepared.backend} ({prepared.backend_reason})",
        f"# platform: {prepared.platform.platform} ({prepared.platform.device_name or 'unknown'})",
        f"# run directory: {prepared.run_dir}",
    ]
    if plan.description:
        lines.append(f"# plan: {plan.description}")
    if prepared.unavailable:
        lines.append(f"# NOT RUNNABLE HERE: {prepared.unavailable}")
    for note in prepared.notes:
        lines.append(f"# note: {note}")
    lines.append(f"# methodology: {plan.methodology}")
    for deviation in plan.deviations:
        lines.append(f"# tuned deviation: {deviation}")
    for note in plan.notes:
        lines.append(f"# plan note: {note}")
    lines += ["", "## command", redact_text(shlex.join(plan.argv))]
    if plan.cwd is not None:
        lines.append(f"(in {plan.cwd})")
    lines += ["", "## environment (added to the inherited one)"]
    env = sorted(redact_env(plan.env).items())
    lines += [f"{k}={shlex.quote(v)}" for k, v in env] or ["(none)"]
    lines += ["", "## files written into the run directory"]
    files = {"config.toml": "(the effective config below)", "manifest.json": "(captured at launch)"}
    files.update(plan.files)
    for name, text in files.items():
        lines.append(f"--- {name}")
        lines.append(redact_text(text).rstrip("\n"))
    if prepared.profile is not None:
        traces = ", ".join(prepared.profile.trace_globs) or "(backend default)"
        if prepared.profile.trace_globs:
            traces += ", moved after the run into traces/rank-<N>.pt.trace.json[.gz]"
        if prepared.profile.capture_range:
            traces = "none (a CUDA profiler range over the window, for the system profiler)"
        lines += ["", "## profiling", f"traces: {traces}",
                  "profiled iterations (left out of statistics): "
                  + (", ".join(map(str, prepared.profile.profiled_iterations)) or "none")]
    lines += ["", "## effective config",
              f"# config_fingerprint = {prepared.config.fingerprint()}",
              dump_toml(prepared.config).rstrip("\n")]
    return "\n".join(lines) + "\n"


# -- executing ------------------------------------------------------------------------------


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A pre-exec function asking Linux to kill the child when the runner dies.

    libc is resolved here, in the parent: the child between fork and exec must
    not import anything (another thread may hold the import lock).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    parent = os.getpid()

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the runner died before the request took effect
            os._exit(137)

    return hook


def kill_leftovers() -> list[int]:
    """Kill what the job left behind outside its process group (launchers such as torchrun
    start workers in sessions of their own); they carry this runner's pid in their environment."""
    from tprimat.orphans import kill_marked

    return kill_marked(RUNNER_PID_ENV, str(os.getpid()))


class ProcessExecution:
    """One launch plan's process: started, teed, its lines handed out, stopped on request."""

    def __init__(self, plan: LaunchPlan, log_path: Path, *, timeout_s: float = 0,
                 grace_s: float = GRACE_S) -> None:
        self.plan = plan
        self.log_path = log_path
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.lines_queue: queue.Queue[tuple[str, float] | None] = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        self.last_arrival = 0.0
        self.interrupted = False
        self.timed_out = False
        self.closed = False  # the process closed its output
        self.proc: subprocess.Popen[str] | None = None
        self._kill_at: float | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        env = os.environ.copy()
        env.update(self.plan.env)
        env[RUNNER_PID_ENV] = str(os.getpid())  # workers check they still descend from it
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            list(self.plan.argv), cwd=self.plan.cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            bufsize=1, start_new_session=True, preexec_fn=_die_with_parent_hook(),
        )
        self.started = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="tprimat-log-tee", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log_path.open("w", encoding="utf-8") as log:
            for line in self.proc.stdout:
                line = redact_text(line)
                log.write(line)
                log.flush()
                self.tail.append(line.rstrip("\n"))
                self.lines_queue.put((line, time.time()))
        self.lines_queue.put(None)

    def signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def interrupt(self) -> None:
        """Forward an interruption to the whole group; a second one kills at once."""
        if self.interrupted:
            self.signal_group(signal.SIGKILL)
            return
        self.interrupted = True
        self.signal_group(signal.SIGINT)
        self._kill_at = time.monotonic() + self.grace_s

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        if self.timeout_s and not self.timed_out and now - self.started > self.timeout_s:
            self.timed_out = True
            self.signal_group(signal.SIGTERM)
            self._kill_at = now + min(self.grace_s, 10.0)
        if self._kill_at is not None and now > self._kill_at:
            self.signal_group(signal.SIGKILL)
            self._kill_at = None

    def lines(self) -> Iterator[str]:
        """The process's output lines as they arrive, until it closes its output."""
        while not self.closed:
            try:
                item = self.lines_queue.get(timeout=0.2)
            except queue.Empty:
                self._check_deadlines()
                continue
            if item is None:
                self.closed = True
                return
            line, self.last_arrival = item
            self._check_deadlines()
            yield line

    def drain(self) -> None:
        for _ in self.lines():
            pass

    def wait(self) -> int:
        assert self.proc is not None
        while True:
            try:
                code = self.proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                self._check_deadlines()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.signal_group(signal.SIGKILL)  # nothing of the group outlives the run
        kill_leftovers()
        return code


@attrs.define
class _SignalForwarding:
    """Route SIGINT/SIGTERM to the execution while it runs (main thread only)."""

    execution: ProcessExecution
    previous: dict[int, Any] = attrs.Factory(dict)

    def __enter__(self) -> _SignalForwarding:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, lambda *_: self.execution.interrupt())
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _software(manifest: Manifest, collector: EventCollector) -> Any:
    software = manifest.software
    facts = {
        "torch": collector.fact("torch_version"),
        "collectives": collector.fact("collectives"),
        "framework_version": collector.fact("framework_version"),
    }
    update = {k: str(v) for k, v in facts.items() if v is not None}
    return attrs.evolve(software, **update) if update else software


def _visible_devices(count: int) -> list[int]:
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value and all(part.strip().isdigit() for part in value.split(",")):
            return [int(part) for part in value.split(",")][:count]
    return list(range(count))


def _end_time(record: IterationRecord, arrival: float | None) -> float | None:
    if record.timestamp:
        try:
            stamp = datetime.fromisoformat(record.timestamp)
            if stamp.tzinfo is not None:
                return stamp.timestamp()
        except ValueError:
            pass
    return arrival


class _NotStarted(Exception):
    pass


class Runner:
    """Executes a :class:`PreparedRun` and writes its result."""

    def __init__(self, prepared: PreparedRun, registry: Any, *,
                 view: Any = None, monitor_factory: Callable[..., Any] | None = None,
                 manifest_extra: dict[str, Any] | None = None) -> None:
        self.prepared = prepared
        self.manifest_extra = dict(manifest_extra or {})  # e.g. pre-flight findings
        self.registry = registry
        self.view = view
        self.monitor_factory = monitor_factory
        self.collector = EventCollector()
        self.arrivals: dict[int, float] = {}
        self.notes: list[str] = list(prepared.notes) + launch_plan_notes(prepared.plan)
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest: Manifest | None = None
        self.monitor: Any = None
        self.traces: list[Any] = []  # tprimat.trace.collect.CollectedTrace, after the run
        node = prepared.context.node_rank
        single = prepared.config.launch.nnodes == 1
        self.log_rel = "logs/launcher.log" if single else f"logs/node{node}.log"

    # -- files --------------------------------------------------------------------------

    def _write_inputs(self) -> None:
        p = self.prepared
        run_dir = p.run_dir
        run_dir.mkdir(parents=True, exist_ok=p.request.in_slurm_job)
        from tprimat.atomic import atomic_write_text

        atomic_write_text(run_dir / "config.toml", dump_toml(p.config))
        versions = {}
        for package in ("torch", "transformers"):
            try:
                versions[package] = metadata.version(package)
            except metadata.PackageNotFoundError:
                pass
        manifest = capture_manifest(p.platform, nodes=p.config.launch.nnodes,
                                    torch=versions.get("torch"))
        extra = {k: v for k, v in versions.items() if k != "torch"}
        manifest = attrs.evolve(
            manifest,
            software=attrs.evolve(manifest.software, extra={**manifest.software.extra, **extra}),
            extra={**manifest.extra, "backend": p.backend, "run_id": p.context.run_id,
                   "launch_command": redact_text(shlex.join(p.plan.argv)),
                   "launch_env": redact_env(p.plan.env), **self.manifest_extra},
        )
        microbench = latest_microbench(p.platform)
        if microbench is not None:
            manifest = attrs.evolve(manifest, extra={**manifest.extra, "microbench": microbench})
        node = p.context.node_rank
        # Every node of a SLURM job writes into the one shared run directory: node 0's
        # manifest is the run's, the others' go beside it.
        shared = p.request.in_slurm_job and node != 0
        write_manifest(manifest, run_dir / "nodes" / f"node{node}" if shared else run_dir)
        self.manifest = manifest
        for name, text in p.plan.files.items():
            atomic_write_text(run_dir / name, text)
        if p.request.system_profiler:
            (run_dir / SYSPROF_DIR).mkdir(exist_ok=True)

    def _collect_traces(self) -> None:
        """Move the profiler's traces into ``traces/``, named by rank (:mod:`tprimat.trace.collect`)."""
        p = self.prepared
        if p.profile is None or not p.profile.trace_globs:
            return
        from tprimat.trace.collect import collect_traces

        try:
            self.traces, notes = collect_traces(p.run_dir, p.profile.trace_globs,
                                                ranks=p.config.profile.ranks)
        except OSError as exc:
            self.notes.append(f"profiler traces could not be collected: {exc}")
            return
        self.notes.extend(notes)
        if self.traces:
            self.notes.append("profiler traces collected into traces/: " + ", ".join(
                f"{t.path} (from {t.source})" for t in self.traces))
        else:
            self.notes.append("profiling was on but no trace matched "
                              + ", ".join(p.profile.trace_globs))

    def _start_monitor(self) -> None:
        p = self.prepared
        if not p.config.monitor.enabled:
            self.notes.append("GPU monitor disabled (monitor.enabled = false): no energy figures")
            return
        from tprimat.monitor import GpuMonitor, find_sampler

        if self.monitor_factory is not None:
            self.monitor = self.monitor_factory(p)
        else:
            sampler, tried = find_sampler(p.platform.platform)
            if sampler is None:
                if p.platform.platform != "cpu":
                    self.notes.append("no GPU monitor could sample here (" + "; ".join(tried)
                                      + "): no energy figures")
                return
            self.monitor = GpuMonitor(
                sampler, interval_s=p.config.monitor.interval_s,
                devices=_visible_devices(p.config.launch.nproc_per_node),
                log_path=p.run_dir / "monitor.jsonl",
            )
        self.monitor.start()

    # -- result ---------------------------------------------------------------------------

    def _records(self, final: bool) -> list[IterationRecord]:
        p = self.prepared
        profiled = set(p.profile.profiled_iterations) if p.profile is not None else set()
        records = []
        for record in self.collector.records:
            if record.iteration in profiled and not record.profiled:
                record = attrs.evolve(record, profiled=True)
            if final and self.monitor is not None and p.config.launch.nnodes == 1:
                record = self._with_monitor(record)
            records.append(record)
        return records

    def _with_monitor(self, record: IterationRecord) -> IterationRecord:
        end = _end_time(record, self.arrivals.get(record.iteration))
        if end is None or record.step_time_s is None:
            return record
        start = end - record.step_time_s * record.covers_iterations
        changes: dict[str, Any] = {}
        if record.energy_j is None:
            energy = self.monitor.energy_j(start, end)
            if energy is not None:
                changes["energy_j"] = energy / record.covers_iterations
        if record.mem_device_used_gib is None:
            used = self.monitor.peak_memory_gib(start, end)
            if used is not None:
                changes["mem_device_used_gib"] = used
        return attrs.evolve(record, **changes) if changes else record

    def build_result(
        self, status: RunStatus, *, final: bool, extra_notes: tuple[str, ...] | list[str] = ()
    ) -> Result:
        p = self.prepared
        c = p.config
        assert self.manifest is not None
        fingerprint = p.dataset.fingerprint if p.dataset is not None else None
        dataset_name = "mock" if p.dataset is None else Path(c.data.dataset).name
        registered = self.registry.backend(p.backend)
        run = RunInfo(
            id=p.context.run_id, backend=p.backend, platform=self.manifest.platform,
            framework=registered.spec.framework, model=p.model.name, dataset=dataset_name,
            status=status, started_at=self.started_at,
            finished_at=datetime.now(UTC).isoformat(timespec="seconds") if final else None,
            tprimat_version=__version__,
        )
        config = ResultConfig(
            model=p.model.name, seq_length=c.training.seq_length,
            global_batch_size=c.training.global_batch_size,
            micro_batch_size=c.training.micro_batch_size, world_size=c.world_size,
            precision=c.precision.dtype, methodology=c.benchmark.methodology,
            dataset_fingerprint=fingerprint, config_fingerprint=c.fingerprint(fingerprint),
            settings=c.to_dict(),
        )
        inputs = [self.log_rel]
        if (p.run_dir / "logs" / "ranks").exists():
            inputs.append("logs/ranks/")
        if self.monitor is not None and (p.run_dir / "monitor.jsonl").exists():
            inputs.append("monitor.jsonl")
        if p.profile is not None:
            inputs.extend(trace.path for trace in self.traces)
            for pattern in p.profile.trace_globs:
                inputs.extend(sorted(str(path.relative_to(p.run_dir))
                                     for path in p.run_dir.glob(pattern)))
        notes = [*self.notes, *self.collector.notes(), *extra_notes]
        if final and self.monitor is not None:
            if c.launch.nnodes > 1:
                notes.append("multi-node run: energy left out (only this node's GPUs are sampled)")
            else:
                notes.append(f"energy from {self.monitor.source} samples every "
                             f"{c.monitor.interval_s} s, summed over the run's local GPUs")
        logged_world = self.collector.fact("world_size")
        if logged_world is not None and logged_world != c.world_size:
            notes.append(
                f"the job reports world size {logged_world}, the config says {c.world_size}"
            )
        provenance = Provenance(
            inputs=inputs, parser=f"{registered.plugin_name}.parse_metrics",
            parser_version=registered.version, notes=notes,
        )
        return assemble_result(
            run=run, config=config, records=self._records(final),
            hardware=self.manifest.hardware, software=_software(self.manifest, self.collector),
            provenance=provenance, warmup_iterations=c.benchmark.warmup_iterations,
            exclude_profiled=c.benchmark.exclude_profiled, tensor_parallel=c.parallel.tensor,
            ceiling=self.manifest.extra.get("microbench"),
            evaluations=self.collector.eval_records,
            target_log_perplexity=(c.convergence.target_log_perplexity
                                   if c.convergence.enabled else None),
            run_clock={key: self.collector.fact(key) for key in RUN_CLOCK_FACTS},
        )

    @property
    def writes_result(self) -> bool:
        return self.prepared.context.node_rank == 0

    def _write(self, result: Result) -> Path | None:
        if not self.writes_result:
            return None
        return _write_result(result, self.prepared.run_dir / RESULT_NAME)

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        p = self.prepared
        self._write_inputs()
        execution = ProcessExecution(p.plan, p.run_dir / self.log_rel,
                                     timeout_s=p.config.launch.timeout_s)
        parser_error: str | None = None
        start_error: str | None = None
        code: int | None = None
        last_write = 0.0
        try:
            self._start_monitor()
            if self.writes_result:
                self._write(self.build_result("partial", final=False))
            with _SignalForwarding(execution):
                try:
                    execution.start()
                except OSError as exc:
                    start_error = f"{p.plan.argv[0]}: {exc.strerror or exc}"
                    raise _NotStarted from None
                if self.view is not None:
                    self.view.started(p)
                try:
                    events = self.registry.parse_metrics(
                        p.backend, lines=execution.lines(), source=self.log_rel)
                    for event in events:
                        record = self.collector.add(event)
                        if record is None:
                            continue
                        self.arrivals[record.iteration] = execution.last_arrival
                        if self.view is not None:
                            self.view.iteration(record, p.config)
                        now = time.monotonic()
                        if now - last_write >= PARTIAL_WRITE_INTERVAL_S:
                            self._write(self.build_result("partial", final=False))
                            last_write = now
                except Exception as exc:  # a parser bug must not lose the run
                    parser_error = f"{type(exc).__name__}: {exc}"
                execution.drain()
                code = execution.wait()
        except _NotStarted:
            pass
        finally:
            if execution.proc is not None and execution.proc.poll() is None:
                execution.signal_group(signal.SIGKILL)
                execution.proc.wait()
                kill_leftovers()
            if self.monitor is not None:
                self.monitor.stop()
        self._collect_traces()
        if start_error is not None:
            status: RunStatus = "failed"
            extra = [f"the job could not be started: {start_error}"]
        else:
            assert code is not None
            status, extra = self._status(execution, code, parser_error)
        result = self.build_result(status, final=True, extra_notes=extra)
        path = self._write(result)
        if self.view is not None:
            self.view.finished(result, path, p)
        return RunOutcome(run_dir=p.run_dir, result=result if self.writes_result else None,
                          result_path=path, return_code=code)

    def _status(self, execution: ProcessExecution, code: int,
                parser_error: str | None) -> tuple[RunStatus, list[str]]:
        notes: list[str] = []
        if parser_error:
            notes.append(f"the log parser failed ({parser_error}); iterations after it are missing")
        done = len(self.collector.iterations)
        wanted = self.prepared.config.benchmark.iterations
        tail = [f"log: {line}" for line in execution.tail]
        if execution.interrupted:
            notes.append(f"interrupted by the user after {done} of {wanted} iterations "
                         f"(exit code {code})")
            return "interrupted", notes
        if execution.timed_out:
            limit = self.prepared.config.launch.timeout_s
            notes.append(f"killed after launch.timeout_s = {limit} s "
                         f"with {done} of {wanted} iterations; last log lines follow")
            return "failed", notes + tail
        if code != 0:
            notes.append(f"the job exited with code {code} after {done} of {wanted} iterations; "
                         "last log lines follow")
            return "failed", notes + tail
        if done == 0 and self.writes_result:
            notes.append("the job exited 0 but no iteration was read from its output; "
                         "last log lines follow")
            return "failed", notes + tail
        problems = self.workload_problems()
        if problems:
            notes.append("the job's log does not match the config, so the throughput computed "
                         "from the config is not the job's: " + "; ".join(problems))
            return "failed", notes
        if done < wanted and self.writes_result and not self.prepared.config.convergence.enabled:
            notes.append(f"only {done} of {wanted} iterations were read from the output")
        return "completed", notes

    def workload_problems(self) -> list[str]:
        """Global batch and sequence length the log states that differ from the config's."""
        from tprimat.collect import is_memory_only
        from tprimat.parse import check_workload

        c = self.prepared.config
        # World size has its own note (build_result); a log may state it per node.
        facts = {k: f.value for k, f in self.collector.facts.items() if k != "world_size"}
        timed = [r for r in self.collector.records if not is_memory_only(r)]
        workload = ResultConfig(
            model=self.prepared.model.name, seq_length=c.training.seq_length,
            global_batch_size=c.training.global_batch_size, micro_batch_size=None,
            world_size=None, precision=None, methodology=c.benchmark.methodology)
        return check_workload(workload, timed, facts, "the config")


def run(prepared: PreparedRun, registry: Any, *, view: Any = None,
        monitor_factory: Callable[..., Any] | None = None,
        manifest_extra: dict[str, Any] | None = None) -> RunOutcome:
    """Execute a prepared run (see :func:`prepare`)."""
    require_backend(registry, prepared.backend, prepared.context.options)
    return Runner(prepared, registry, view=view, monitor_factory=monitor_factory,
                  manifest_extra=manifest_extra).run()
