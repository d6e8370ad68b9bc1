"""The core runner: executes one prepared run, the same way for every backend.

:mod:`tprimat.running.prepare` has decided the backend, the final config and
the launch plan; the runner captures the machine (``manifest.json``) and
executes the plan under :mod:`tprimat.running.supervise`:

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
:func:`tprimat.result.builder.assemble_result`, never by the backend.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.contract.records import IterationBlock
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo, trains_on_cpu
from tprimat.result.builder import assemble_result, result_config
from tprimat.result.collect import EventCollector
from tprimat.result.convergence import RUN_CLOCK_FACTS
from tprimat.result.framework import framework_record, read_stated
from tprimat.result.metrics import nothing_measured
from tprimat.result.resultjson import write_result as _write_result
from tprimat.result.schema import IterationRecord, Provenance, Result, RunInfo, RunStatus, Software
from tprimat.running.manifest import Manifest, capture_manifest, launcher_of, write_manifest
from tprimat.running.prepare import SYSPROF_DIR, PreparedRun, require_backend
from tprimat.running.supervise import ProcessExecution, SignalForwarding, kill_leftovers
from tprimat.secrets import redact_env, redact_text
from tprimat.settings.config import dump_toml

RESULT_NAME = "result.json"
#: Seconds between intermediate result writes while a run goes.
PARTIAL_WRITE_INTERVAL_S = 2.0
#: Where a node of a scheduled job was started, for schedulers that reuse SLURM's node flag
#: (``--slurm-node``): the Kubernetes pods set it to ``k8s`` (:mod:`tprimat.running.k8s`).
DEPLOYMENT_VARIABLE = "TPRIMAT_DEPLOYMENT"


def deployment_of(in_node_job: bool, environ: Mapping[str, str] | None = None) -> str:
    """``run.deployment``: ``local``; on a node of a scheduled job ``k8s`` where its pod says so, else ``slurm``."""
    if not in_node_job:
        return "local"
    environ = os.environ if environ is None else environ
    return "k8s" if environ.get(DEPLOYMENT_VARIABLE) == "k8s" else "slurm"


@attrs.frozen(kw_only=True)
class RunOutcome:
    run_dir: Path
    result: Result | None  # None on a node other than node rank 0
    result_path: Path | None
    return_code: int | None  # None: the job could not be started


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


def _software(manifest: Manifest, collector: EventCollector) -> Software:
    """The manifest's software, with the versions the run's own log stated in place of the recorded ones."""
    software = manifest.software

    def stated(fact: str, recorded: str | None) -> str | None:
        value = collector.fact(fact)
        return recorded if value is None else str(value)

    return attrs.evolve(
        software,
        torch=stated("torch_version", software.torch),
        collectives=stated("collectives", software.collectives),
        framework_version=stated("framework_version", software.framework_version),
    )


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


def _one_by_one(events: Iterable[Any]) -> Iterator[Any]:
    """``events`` with each :class:`~tprimat.contract.records.IterationBlock` as the records it stands for."""
    for event in events:
        if isinstance(event, IterationBlock):
            yield from event.records()
        else:
            yield event


class _NotStarted(Exception):
    pass


class Runner:
    """Executes a :class:`PreparedRun` and writes its result."""

    def __init__(
        self,
        prepared: PreparedRun,
        registry: Any,
        *,
        view: Any = None,
        monitor_factory: Callable[..., Any] | None = None,
        manifest_extra: dict[str, Any] | None = None,
    ) -> None:
        self.prepared = prepared
        self.manifest_extra = dict(manifest_extra or {})  # e.g. pre-flight findings
        self.registry = registry
        self.view = view
        self.monitor_factory = monitor_factory
        self.collector = EventCollector()
        self.arrivals: dict[int, float] = {}
        self.notes: list[str] = list(prepared.notes) + [f"launch plan: {note}" for note in prepared.plan.notes]
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.manifest: Manifest | None = None
        self.monitor: Any = None
        self.traces: list[Any] = []  # tprimat.running.traces.CollectedTrace, after the run
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
        try:
            torch_version: str | None = metadata.version("torch")
        except metadata.PackageNotFoundError:
            torch_version = None
        manifest = capture_manifest(
            p.platform,
            nodes=p.config.launch.nnodes,
            torch=torch_version,
            checkouts=self._checkouts(),
            launcher=launcher_of(p.plan.argv),
            deployment=deployment_of(p.request.in_slurm_job),
            tags=p.request.tags,
        )
        manifest = attrs.evolve(
            manifest,
            extra={
                **manifest.extra,
                "backend": p.backend,
                "run_id": p.context.run_id,
                "launch_command": redact_text(shlex.join(p.plan.argv)),
                "launch_env": redact_env(p.plan.env),
                **self.manifest_extra,
            },
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

    def _checkouts(self) -> list[str]:
        """The framework checkouts the plan uses: the backend's directory options (``--primus-path``, ...)."""
        spec = self.registry.backend(self.prepared.backend).spec
        options = self.prepared.context.options
        return [str(options[o.name]) for o in spec.options if o.kind == "path" and options.get(o.name)]

    def _snapshots(self) -> list[str]:
        """The allocator snapshots the framework wrote (``LaunchPlan.snapshot_globs``), run-relative."""
        p = self.prepared
        found = {path for pattern in p.plan.snapshot_globs for path in p.run_dir.glob(pattern) if path.is_file()}
        return sorted(str(path.relative_to(p.run_dir)) for path in found)

    def _collect_traces(self) -> None:
        """Move the profiler's traces into ``traces/``, named by rank (:mod:`tprimat.running.traces`)."""
        p = self.prepared
        if p.profile is None or not p.profile.trace_globs:
            return
        from tprimat.running.traces import collect_traces

        try:
            self.traces, notes = collect_traces(p.run_dir, p.profile.trace_globs, ranks=p.config.profile.ranks)
        except OSError as exc:
            self.notes.append(f"profiler traces could not be collected: {exc}")
            return
        self.notes.extend(notes)
        if self.traces:
            self.notes.append(
                "profiler traces collected into traces/: "
                + ", ".join(f"{t.path} (from {t.source})" for t in self.traces)
            )
        else:
            self.notes.append("profiling was on but no trace matched " + ", ".join(p.profile.trace_globs))

    def _start_monitor(self) -> None:
        p = self.prepared
        if not p.config.monitor.enabled:
            self.notes.append("GPU monitor disabled (monitor.enabled = false): no energy figures")
            return
        from tprimat.running.monitor import GpuMonitor, find_sampler

        if self.monitor_factory is not None:
            self.monitor = self.monitor_factory(p)
        else:
            sampler, tried = find_sampler(p.platform.platform)
            if sampler is None:
                if not trains_on_cpu(p.platform):
                    self.notes.append("no GPU monitor could sample here (" + "; ".join(tried) + "): no energy figures")
                return
            self.monitor = GpuMonitor(
                sampler,
                interval_s=p.config.monitor.interval_s,
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

    def _framework(self, spec: Any, final: bool) -> Any:
        """The plan's framework settings, and, once the run is over, what the framework said it ran with."""
        stated = None
        if final:
            run_dir = self.prepared.run_dir
            files = [run_dir / self.log_rel, *sorted((run_dir / "logs" / "ranks").glob("*"))]
            stated = read_stated(files, spec.readback)
        p = self.prepared
        return framework_record(
            p.plan.framework, stated, spec.readback, framework=spec.framework, plan_digest=p.plan_digest
        )

    def build_result(self, status: RunStatus, *, final: bool, extra_notes: tuple[str, ...] | list[str] = ()) -> Result:
        p = self.prepared
        c = p.config
        assert self.manifest is not None
        fingerprint = p.dataset.fingerprint if p.dataset is not None else None
        dataset_name = "mock" if p.dataset is None else Path(c.data.dataset).name
        registered = self.registry.backend(p.backend)
        run = RunInfo(
            id=p.context.run_id,
            backend=p.backend,
            platform=self.manifest.platform,
            framework=registered.spec.framework,
            model=p.model.name,
            dataset=dataset_name,
            status=status,
            started_at=self.started_at,
            finished_at=datetime.now(UTC).isoformat(timespec="seconds") if final else None,
            tprimat_version=__version__,
            launcher=self.manifest.launcher,
            deployment=self.manifest.deployment,
            tags=self.manifest.tags,
        )
        config = result_config(
            c,
            dataset_fingerprint=fingerprint,
            methodology=p.methodology,
            layers=p.layers,
            framework=self._framework(registered.spec, final),
        )
        inputs = [self.log_rel]
        if (p.run_dir / "logs" / "ranks").exists():
            inputs.append("logs/ranks/")
        if self.monitor is not None and (p.run_dir / "monitor.jsonl").exists():
            inputs.append("monitor.jsonl")
        if p.profile is not None:
            inputs.extend(trace.path for trace in self.traces)
            for pattern in p.profile.trace_globs:
                inputs.extend(sorted(str(path.relative_to(p.run_dir)) for path in p.run_dir.glob(pattern)))
        notes = [*self.notes, *self.collector.notes(), *extra_notes]
        if final and p.request.memory_snapshot:
            snapshots = self._snapshots()
            inputs.extend(snapshots)
            notes.append(
                "allocator snapshots: " + ", ".join(snapshots) + " (`tprimat memory summarize FILE`; "
                "open them at https://pytorch.org/memory_viz)"
                if snapshots
                else "--memory-snapshot: the framework wrote no snapshot ("
                + (", ".join(p.plan.snapshot_globs) or f"backend {p.backend} has no snapshot mechanism")
                + "; a run without CUDA records none)"
            )
        if final and self.monitor is not None:
            if c.launch.nnodes > 1:
                notes.append("multi-node run: energy left out (only this node's GPUs are sampled)")
            else:
                notes.append(
                    f"energy from {self.monitor.source} sampled every {c.monitor.interval_s} s (the GPUs' energy "
                    "counters where the library has them, else their power), summed over the run's local GPUs"
                )
        logged_world = self.collector.fact("world_size")
        if logged_world is not None and logged_world != c.world_size:
            notes.append(f"the job reports world size {logged_world}, the config says {c.world_size}")
        provenance = Provenance(
            inputs=inputs,
            parser=f"{registered.plugin_name}.parse_metrics",
            parser_version=registered.version,
            notes=notes,
        )
        result = assemble_result(
            run=run,
            config=config,
            records=self._records(final),
            hardware=self.manifest.hardware,
            software=_software(self.manifest, self.collector),
            provenance=provenance,
            warmup_iterations=c.benchmark.warmup_iterations,
            warmup_rule=registered.spec.warmup,
            trainer=registered.spec.trainer,
            exclude_profiled=c.benchmark.exclude_profiled,
            tensor_parallel=c.parallel.tensor,
            ceiling=self.manifest.extra.get("microbench"),
            rank_memory=self._rank_memory() if final else (),
            evaluations=self.collector.eval_records,
            target_log_perplexity=(c.convergence.target_log_perplexity if c.convergence.enabled else None),
            run_clock={key: self.collector.fact(key) for key in RUN_CLOCK_FACTS},
        )
        if result.summary.energy_per_token_j is None or self.monitor is None:
            return result
        return attrs.evolve(result, summary=attrs.evolve(result.summary, energy_source=self.monitor.energy_source))

    def _rank_memory(self) -> list[Any]:
        """Per-rank peaks of this run: its log's memory lines (read by the parser, or else by the backend's
        reader) and the monitor's samples."""
        from tprimat.result.memory import log_rank_peaks, monitor_rank_peaks

        reader = self.registry.backend(self.prepared.backend).spec.memory_peaks
        samples = list(self.monitor.samples) if self.monitor is not None else []
        from_log = self.collector.rank_peaks or log_rank_peaks(reader, [self.prepared.run_dir / self.log_rel])
        return [*from_log, *monitor_rank_peaks(samples)]

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
        execution = ProcessExecution(p.plan, p.run_dir / self.log_rel, timeout_s=p.config.launch.timeout_s)
        parser_error: str | None = None
        start_error: str | None = None
        code: int | None = None
        last_write = 0.0
        try:
            self._start_monitor()
            if self.writes_result:
                self._write(self.build_result("partial", final=False))
            with SignalForwarding(execution):
                try:
                    execution.start()
                except OSError as exc:
                    start_error = f"{p.plan.argv[0]}: {exc.strerror or exc}"
                    raise _NotStarted from None
                if self.view is not None:
                    self.view.started(p)
                try:
                    events = self.registry.parse_metrics(p.backend, lines=execution.lines(), source=self.log_rel)
                    # A block of iteration lines is taken a record at a time: each is shown as it is taken.
                    for event in _one_by_one(events):
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
        unmeasured = nothing_measured(result.summary) if status == "completed" and self.writes_result else None
        if unmeasured is not None:  # iterations read, but none left after warm-up: not completed
            result = self.build_result("failed", final=True, extra_notes=[*extra, unmeasured])
        path = self._write(result)
        if self.view is not None:
            self.view.finished(result, path, p)
        return RunOutcome(
            run_dir=p.run_dir, result=result if self.writes_result else None, result_path=path, return_code=code
        )

    def _status(self, execution: ProcessExecution, code: int, parser_error: str | None) -> tuple[RunStatus, list[str]]:
        notes: list[str] = []
        if parser_error:
            notes.append(f"the log parser failed ({parser_error}); iterations after it are missing")
        done = len(self.collector.iterations)
        wanted = self.prepared.config.benchmark.iterations
        tail = [f"log: {line}" for line in execution.tail]
        if execution.interrupted:
            notes.append(f"interrupted by the user after {done} of {wanted} iterations (exit code {code})")
            return "interrupted", notes
        if execution.timed_out:
            limit = self.prepared.config.launch.timeout_s
            notes.append(
                f"killed after launch.timeout_s = {limit} s with {done} of {wanted} iterations; last log lines follow"
            )
            return "failed", notes + tail
        if code != 0:
            notes.append(f"the job exited with code {code} after {done} of {wanted} iterations; last log lines follow")
            return "failed", notes + tail
        if done == 0 and self.writes_result:
            notes.append("the job exited 0 but no iteration was read from its output; last log lines follow")
            return "failed", notes + tail
        problems = self.workload_problems()
        if problems:
            notes.append(
                "the job's log does not match the config, so the throughput computed "
                "from the config is not the job's: " + "; ".join(problems)
            )
            return "failed", notes
        if done < wanted and self.writes_result and not self.prepared.config.convergence.enabled:
            notes.append(f"only {done} of {wanted} iterations were read from the output")
        return "completed", notes

    def workload_problems(self) -> list[str]:
        """Global batch and sequence length the log states that differ from the config's."""
        from tprimat.result.collect import timed_records
        from tprimat.result.workload import Workload, check_workload

        c = self.prepared.config
        # World size has its own note (build_result); a log may state it per node.
        facts = {k: f.value for k, f in self.collector.facts.items() if k != "world_size"}
        timed = timed_records(self.collector.records)
        workload = Workload(seq_length=c.training.seq_length, global_batch_size=c.training.global_batch_size)
        return check_workload(workload, timed, facts, "the config")


def run(
    prepared: PreparedRun,
    registry: Registry,
    *,
    view: Any = None,
    monitor_factory: Callable[..., Any] | None = None,
    manifest_extra: dict[str, Any] | None = None,
) -> RunOutcome:
    """Execute a prepared run (see :func:`tprimat.running.prepare.prepare`)."""
    require_backend(registry, prepared.backend, prepared.context.options)
    return Runner(prepared, registry, view=view, monitor_factory=monitor_factory, manifest_extra=manifest_extra).run()
