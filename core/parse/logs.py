"""Log analysis: turn training logs into a result, on any machine, without torch.

``tprimat parse`` and anything else that reads finished logs go through
:func:`parse_logs`: it finds the log files (a file, a directory, or Primus's
per-rank tree), streams them line by line into the backend's
``parse_metrics`` hook, collects the events by iteration, checks what the log
says against the workload it is told (config file or command-line values),
reads hardware and software from a run manifest (never from this machine),
and hands the records to :func:`tprimat.result.builder.assemble_result`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import itertools
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.contract.backend import STATED_LINES
from tprimat.contract.logfile import LogFile, count_lines
from tprimat.contract.records import RankPeak
from tprimat.parse.detect import detect_backend, hard_wrapped_files
from tprimat.parse.errors import ParseError
from tprimat.parse.logkind import unwrap_lines
from tprimat.parse.parallel import PARALLEL_MIN_BYTES, LogReadError, read_events
from tprimat.parse.saved_hardware import SavedHardware
from tprimat.result import builder
from tprimat.result.builder import assemble_result
from tprimat.result.collect import EventCollector, TimedRecords, timed_records
from tprimat.result.convergence import RUN_CLOCK_FACTS
from tprimat.result.framework import framework_record, read_stated
from tprimat.result.memory import log_rank_peaks
from tprimat.result.metrics import follows, nothing_measured
from tprimat.result.schema import (
    Caveats,
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    RunStatus,
    Software,
)
from tprimat.result.spill import RecordSequence, record_field_blocks, record_fields
from tprimat.result.workload import SIZE_LIMITS, Workload, as_int, as_size, check_workload_declared
from tprimat.running.manifest import Manifest, find_manifest, load_manifest
from tprimat.settings.config import BenchmarkConfig, default_config_dict
from tprimat.workers import ForkedCall, fork_call

#: File names read from a directory that is not a Primus tree.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")

#: Lines read to check a --backend against the platform the log shows.
DETECT_SAMPLE_LINES = 2000

#: Lines read to tell whether a file is hard-wrapped at a fixed column.
WRAP_SAMPLE_LINES = 5000

#: Iteration records held in memory while reading; beyond them, the older ones wait in a
#: temporary file (see :mod:`tprimat.result.spill`), so that a long run's log is parsed in
#: bounded memory.  About 1 KiB each: a log of fewer iterations is read as before.
SPILL_AFTER_RECORDS = 16384


@attrs.frozen(kw_only=True)
class ParseOutcome:
    result: Result
    backend: str
    detected: str | None  # why the backend was chosen, when it was detected
    files: list[Path]
    collector: EventCollector
    warnings: list[str] = attrs.Factory(list)  # shown to the user, also in provenance.notes


# -- finding files -------------------------------------------------------------------------


def find_log_files(paths: Sequence[str | Path], registry: Any = None) -> tuple[list[Path], list[str]]:
    """The files to read for ``paths``, and notes on how they were chosen.

    A directory is first offered to every backend that knows a directory layout of its
    own (``BackendSpec.find_logs``, e.g. a per-rank tree); otherwise every log file below it
    (``LOG_SUFFIXES``) is read.
    """
    files: list[Path] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            files.append(path)
            continue
        if not path.is_dir():
            raise ParseError(f"{path}: no such file or directory")
        laid_out = _backend_layout(path, registry)
        if laid_out is not None:
            chosen, note = laid_out
            notes.append(f"{path}: {note}")
            files.extend(chosen)
            continue
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES)
        if not found:
            kinds = ", *".join(LOG_SUFFIXES)
            raise ParseError(f"{path}: no log files (*{kinds}) in this directory")
        files.extend(found)
    unique: list[Path] = []
    seen: set[Path] = set()
    for file in files:
        resolved = file.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(file)
    return unique, notes


def _backend_layout(directory: Path, registry: Any) -> tuple[list[Path], str] | None:
    """The files of the first backend that recognises ``directory``'s layout, and its note."""
    if registry is None:
        return None
    for entry in registry.backends().values():
        finder = entry.spec.find_logs
        if finder is None or entry.conflict:
            continue
        found = finder(directory)
        if found is not None and found[0]:
            return list(found[0]), found[1]
    return None


# -- reading -------------------------------------------------------------------------------


@contextlib.contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Pause the cycle collector's automatic runs for a block or a decorated call; processes
    forked during it (the log readers) inherit the pause.

    Reading logs and summarising them makes records, their dicts and lists, but no
    reference cycles: counting references frees all of it.  The cycle collector would
    only walk the growing heap of kept records again and again.  Nested uses leave it
    to the outermost.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _ends_mid_line(path: Path) -> bool:
    """Whether the file's last line has no newline (the writer stopped in the middle of it)."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return False
        handle.seek(-1, 2)
        return handle.read(1) not in (b"\n", b"\r")


def _cut_files(files: Sequence[Path], sources: Sequence[str], truncated: list[str]) -> list[bool]:
    """Which files end mid-line; each such file's last line is noted in ``truncated``."""
    cuts = []
    for path, source in zip(files, sources, strict=True):
        try:
            cuts.append(_ends_mid_line(path))
            if cuts[-1]:
                truncated.append(f"{source}:{_last_line_number(path)}")
        except OSError as exc:
            raise _open_error(path, exc) from None
    return cuts


def _last_line_number(path: Path) -> int:
    """The number of a file's last line, as the readers count lines."""
    return count_lines(path, path.stat().st_size) + 1


def _open_error(path: Path, exc: OSError) -> ParseError:
    return ParseError(f"{path}: cannot read: {exc.strerror or exc}")


def unreadable_message(files: Sequence[Path], registry: Any = None) -> str:
    """No training iteration lines in ``files``: what each most likely is and why it is not read."""
    from tprimat.parse.logkind import describe_unreadable, read_head

    parts = []
    for path in files[:3]:
        try:
            kind = describe_unreadable(path, read_head(path), registry)
        except OSError as exc:
            raise _open_error(path, exc) from None
        parts.append(f"{path}: no training iteration lines found: this looks like {kind}")
    more = f" (and {len(files) - 3} more files)" if len(files) > 3 else ""
    return "; ".join(parts) + more


def no_timing_message(
    shown: str, backend: str, records: Collection[IterationRecord], stopped_by: str | None = None
) -> str:
    """Why a log whose iterations carry no step time gives no result, and what to do."""
    if stopped_by is not None:  # e.g. out of memory after the first step: not a log without timing
        from tprimat.parse.stopreason import OUT_OF_MEMORY

        fix = (
            "lower the memory per GPU (micro batch size, activation recomputation, more model parallelism)"
            if stopped_by.startswith(OUT_OF_MEMORY)
            else "fix what stopped it"
        )
        return (
            f"{shown}: no step timing found: the run was stopped by {stopped_by} after {len(records)} "
            f"iteration line(s) ({backend} format), before any step time was logged; {fix} and run again"
        )
    what = sorted(
        {
            name
            for r in records
            for name, value in (("loss", r.loss), ("learning rate", r.lr), ("grad norm", r.grad_norm))
            if value is not None
        }
    )
    stated = f"state {', '.join(what)} but" if what else "have"
    return (
        f"{shown}: no step timing found: {len(records)} iterations ({backend} format) {stated} "
        "no step time, so there is nothing to measure (a fine-tuning "
        "log that prints only loss?). Log the step time (NeMo: train_step_timing; Megatron: "
        "elapsed time per iteration) and parse again"
    )


# -- the workload ----------------------------------------------------------------------------


def _precision_from_facts(facts: dict[str, Any]) -> str | None:
    fp8 = facts.get("fp8")
    if fp8 not in (None, False, "None", ""):
        return "fp8"
    if facts.get("bf16") is True:
        return "bf16"
    if facts.get("fp16") is True:
        return "fp16"
    return None


def _result_config(
    config: BenchmarkConfig | None, workload: Workload, facts: dict[str, Any], config_label: str = "the config"
) -> ResultConfig:
    if config is not None:
        return builder.result_config(config, layers=[f"config file {config_label}"])
    return ResultConfig(
        model=workload.model or "unknown",
        seq_length=workload.seq_length or as_size("seq_length", facts.get("seq_length")),
        global_batch_size=workload.global_batch_size or as_size("global_batch_size", facts.get("global_batch_size")),
        micro_batch_size=as_size("micro_batch_size", facts.get("micro_batch_size")),
        world_size=workload.world_size or as_size("world_size", facts.get("world_size")),
        precision=workload.precision or _precision_from_facts(facts),
        methodology="unknown",
    )


def _unusable_sizes(facts: dict[str, Any]) -> list[str]:
    """Notes on the sizes the log states that no run can have (``seq_length -1``, a world of 10**30)."""
    return [
        f"the log states {key}={facts[key]!r}, not a size from 1 to {limit}: not used"
        for key, limit in SIZE_LIMITS.items()
        if as_int(facts.get(key)) is not None and as_size(key, facts[key]) is None
    ]


def _declared_sources(config: BenchmarkConfig | None, config_label: str, workload: Workload) -> dict[str, str]:
    keys = ("global_batch_size", "seq_length", "world_size")
    if config is not None:
        return dict.fromkeys(keys, config_label)
    return {
        key: ("the command line" if getattr(workload, key) is not None else "the log (first value it states)")
        for key in keys
    }


# -- status ----------------------------------------------------------------------------------


def _missing_iterations(records: Iterable[IterationRecord], train_iters: int | None) -> list[str]:
    """Notes on the iterations the log leaves out, and on a log that ends before the run's last iteration.

    Counted over the records with a step time or a loss (a memory line alone has neither).  The
    gaps are kept as spans, never as lists of numbers: a gap may be a billion iterations long.
    """
    missing: list[tuple[int, int]] = []  # first and last iteration of each gap
    covered: int | None = None  # the last iteration covered so far
    names = ("iteration", "covers_iterations", "step_time_s", "loss")
    for iterations, all_covers, steps, losses in record_field_blocks(records, *names):
        if None in steps:  # a record with neither a step time nor a loss is left out
            kept = [step is not None or loss is not None for step, loss in zip(steps, losses, strict=True)]
            iterations, all_covers = (
                list(itertools.compress(iterations, kept)),
                list(itertools.compress(all_covers, kept)),
            )
        if covered is not None and follows(iterations, all_covers, covered):  # no gap, whole columns checked
            covered = iterations[-1]
            continue
        for iteration, covers in zip(iterations, all_covers, strict=True):
            if covered is None:
                covered = iteration
                continue
            start = iteration - covers + 1
            if start > covered + 1:
                missing.append((covered + 1, start - 1))
            if iteration > covered:
                covered = iteration
    if covered is None:
        return []
    notes = []
    if missing:
        spans = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in missing)
        notes.append(f"iterations missing from the log: {spans}")
    if train_iters is not None and covered < train_iters:
        notes.append(f"the log ends at iteration {covered} of {train_iters}")
    return notes


# -- the whole thing -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _LogRead:
    """What reading the files gave: the collected events, and what the reading noticed."""

    collector: EventCollector
    common: Path | None  # the folder the files' display names are relative to
    continues: list[bool]  # per file: it goes on from the file before it (a rotated log)
    truncated: list[str]  # "source:line" of each last line left out for want of a newline


@cycle_collection_paused()
def parse_logs(
    paths: Sequence[str | Path],
    *,
    registry: Any,
    backend: str | None = None,
    config: BenchmarkConfig | None = None,
    config_label: str = "the config",
    workload: Workload | None = None,
    manifest_path: str | Path | None = None,
    allow_mismatch: bool = False,
    workers: int | None = None,
    saved_hardware: SavedHardware | None = None,
    written: bool = False,
) -> ParseOutcome:
    """Parse ``paths`` into a :class:`~tprimat.result.schema.Result` (see the module docstring).

    ``saved_hardware``: the device as a saved nvidia-smi/rocm-smi output states it (``--hardware``),
    recorded with that file as its source, in place of the manifest's.

    ``workers``: processes reading the files (default: every CPU this process may use; 1 reads
    in this process); the result is the same for any number.  ``written``: the caller will
    write the result (:func:`~tprimat.result.resultjson.write_result`), which a long run's
    records then start to be written for while they are summarised.

    The steps: choose the backend, read the files, refuse a log without a timed iteration, add
    what each file's start states, check the workload, take the machine from the manifest, note
    what was read and how the run ended, and build the result (:func:`assemble_result`).
    """
    workload = workload or Workload()
    files, notes = find_log_files(paths, registry)
    backend, detected, wraps = _choose_backend(files, registry, backend, notes)
    entry = registry.backend(backend)
    warnings = [] if detected else _platform_warnings(files, backend, entry.spec.platform)
    notes.extend(warnings)

    read = _read_files(files, registry, backend, entry.spec.log_stream, wraps, workers)
    collector = read.collector
    records = collector.records
    timed = _timed_or_refuse(collector, files, read.common, backend)
    facts = {key: fact.value for key, fact in collector.facts.items()}
    starts = [path for path, goes_on in zip(files, read.continues, strict=True) if not goes_on]
    facts, stated_notes, stated_records = _with_stated_facts(
        starts, read.common, facts, records, entry.spec.stated_facts
    )
    if stated_records is not records:  # profiled iterations marked: new records
        records = stated_records
        timed = timed_records(records)

    result_config = _checked_config(
        _result_config(config, workload, facts, config_label),
        stated=read_stated(starts, entry.spec.readback),
        entry=entry,
        timed=timed,
        facts=facts,
        declared=_declared_sources(config, config_label, workload),
        allow_mismatch=allow_mismatch,
        notes=notes,
    )
    manifest, hardware, software = _machine(manifest_path, files, saved_hardware, facts, notes)
    missing = _missing_iterations(records, as_int(facts.get("train_iters")))
    notes.extend(_log_notes(collector, read.truncated, missing, stated_notes))
    if config is None:
        notes.extend(_unusable_sizes(facts))
    stopped_by = _stopped_after_last_iteration(files, read.common, timed)
    status = _run_status(partial=bool(missing or read.truncated), stopped_by=stopped_by, notes=notes)
    run = _run_info(backend, files, entry.spec.framework, result_config.model, config, status, manifest, saved_hardware)
    with _rank_peaks(collector, entry.spec.memory_peaks, files) as rank_memory:  # a scan meanwhile
        result = assemble_result(
            run=run,
            config=result_config,
            records=records,
            hardware=hardware,
            software=software,
            provenance=Provenance(
                inputs=[str(p) for p in files],
                parser=f"{backend} log parser ({entry.plugin_name})",
                parser_version=entry.version or __version__,
                notes=notes,
            ),
            warmup_iterations=_warmup_iterations(workload, config),
            warmup_rule=entry.spec.warmup,
            trainer=entry.spec.trainer,
            exclude_profiled=config.benchmark.exclude_profiled if config is not None else True,
            tensor_parallel=_tensor_parallel(config, facts),
            ceiling=manifest.extra.get("microbench") if manifest else None,
            rank_memory=rank_memory,
            evaluations=collector.eval_records,
            target_log_perplexity=(
                config.convergence.target_log_perplexity if config is not None and config.convergence.enabled else None
            ),
            run_clock={key: collector.fact(key) for key in RUN_CLOCK_FACTS},
            records_owned=True,  # made by this read (or received from its workers); nothing reads them after
            written=written,
        )
    result = _finished(result, stopped_by=stopped_by, facts=facts, warnings=warnings)
    return ParseOutcome(
        result=result, backend=backend, detected=detected, files=files, collector=collector, warnings=warnings
    )


# -- the steps of parse_logs, in the order it takes them -------------------------------------


def _choose_backend(
    files: Sequence[Path], registry: Any, backend: str | None, notes: list[str]
) -> tuple[str, str | None, dict[Path, int]]:
    """The backend that reads ``files``, why it was detected (None when it was given), and the
    files hard-wrapped at a fixed column (path -> width; read with the wraps joined).

    A log no backend recognises is tried again with its wrapped lines joined, when it is wrapped.
    What was found is added to ``notes``.
    """
    wraps: dict[Path, int] = {}
    detected = None
    if backend is None:
        try:
            backend, detected = detect_backend(files, registry)
        except ParseError:
            wraps = _hard_wrapped(files)  # lines split at a fixed column: try them joined
            if not wraps:
                raise ParseError(unreadable_message(files, registry)) from None
            try:
                backend, detected = detect_backend(files, registry, wraps)
            except ParseError:
                raise ParseError(unreadable_message(files, registry)) from None
        notes.append(f"format detected: {backend} ({detected})")
    wraps = wraps or hard_wrapped_files(files, registry, backend)  # iteration lines split mid-line
    notes.extend(
        f"{p.name}: hard-wrapped at {w} columns; read with the wraps joined (line numbers count joined lines)"
        for p, w in wraps.items()
    )
    return backend, detected, wraps


def _read_files(
    files: Sequence[Path],
    registry: Any,
    backend: str,
    log_stream: Any,
    wraps: dict[Path, int],
    workers: int | None,
) -> _LogRead:
    """Every file through the backend's ``parse_metrics`` hook, its events collected by iteration.

    Files hard-wrapped at a fixed column are read joined, in this process; the others (text: any
    line ending, undecodable bytes replaced, junk skipped and never raised) on every core, files
    and ranges of large files, with the events of a serial read.  The files of a rotated log
    (consecutive, of one stream) are read as one.
    """
    collector = EventCollector(spill_after=SPILL_AFTER_RECORDS)
    truncated: list[str] = []
    common = _common_parent(files)
    sources = [_display_name(path, common) for path in files]
    continues = [False] * len(files) if wraps else _continues_stream(files, log_stream)
    if wraps:
        for path, source in zip(files, sources, strict=True):
            try:
                cut = _ends_mid_line(path)
                lines: Iterable[str] = LogFile(path, drop_last_line=cut)
                if path in wraps:
                    lines = unwrap_lines(lines, wraps[path])
                collector.consume(registry.parse_metrics(backend, lines=lines, source=source))
                if cut:
                    truncated.append(f"{source}:{_last_line_number(path)}")
            except OSError as exc:
                raise _open_error(path, exc) from None
    else:
        cuts = _cut_files(files, sources, truncated)
        try:
            for events in read_events(registry, backend, files, sources, cuts, workers=workers, continues=continues):
                collector.consume(events)
        except LogReadError as exc:
            raise _open_error(exc.path, exc) from None
    return _LogRead(collector=collector, common=common, continues=continues, truncated=truncated)


@contextlib.contextmanager
def _rank_peaks(
    collector: EventCollector, reader: Callable[[Path], Sequence[RankPeak]] | None, files: Sequence[Path]
) -> Iterator[Iterable[RankPeak]]:
    """Each rank's memory peaks: those the parser read, or where it read none, those the backend's
    ``memory_peaks`` reader finds in the files (a pass over every byte).  For inputs of
    :data:`~tprimat.parse.parallel.PARALLEL_MIN_BYTES` or more that pass is made by a forked child
    while the result is assembled (the records summarised), and waited for when the peaks are
    first read; the child is ended on leaving."""
    if collector.rank_peaks or reader is None:
        yield collector.rank_peaks
        return
    large = sum(path.stat().st_size for path in files) >= PARALLEL_MIN_BYTES
    with fork_call(functools.partial(log_rank_peaks, reader, files), fork=large) as scan:
        yield _when_scanned(scan)


def _when_scanned(scan: ForkedCall[list[RankPeak]]) -> Iterator[RankPeak]:
    """The peaks ``scan`` finds, once it has found them."""
    yield from scan.result()


def _timed_or_refuse(
    collector: EventCollector, files: Sequence[Path], common: Path | None, backend: str
) -> TimedRecords:
    """The collected records that are iterations (not memory lines alone); a :class:`ParseError`
    when there is none, or none with a step time (naming what stopped the run, if the log says)."""
    timed = timed_records(collector.records)
    shown = ", ".join(str(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
    if not timed:
        refused = collector.issues[0] if collector.issues else None
        because = (
            f" ({collector.issue_count} skipped, the first at {refused.source}: {refused.message})"
            if refused is not None
            else ""
        )
        raise ParseError(f"{shown}: no training iterations found in the log for backend {backend}{because}")
    if all(step_time is None for (step_time,) in record_fields(timed, "step_time_s")):
        raise ParseError(no_timing_message(shown, backend, timed, _stopped_after_last_iteration(files, common, timed)))
    return timed


def _checked_config(
    result_config: ResultConfig,
    *,
    stated: Any,
    entry: Any,
    timed: Collection[IterationRecord],
    facts: dict[str, Any],
    declared: dict[str, str],
    allow_mismatch: bool,
    notes: list[str],
) -> ResultConfig:
    """``result_config`` with what the framework printed about its settings (``stated``, when it
    printed them; no plan here, so nothing to disagree with), checked against the log.

    A workload the log contradicts is a :class:`ParseError`, or with ``allow_mismatch`` a note.
    """
    if stated is not None:
        framework = framework_record(None, stated, entry.spec.readback, framework=entry.spec.framework)
        result_config = attrs.evolve(result_config, framework=framework)
        notes.append(f"framework settings read from the {stated.form} at {stated.source}")
    problems = check_workload_declared(result_config, timed, facts, declared)
    if problems and not allow_mismatch:
        raise ParseError(
            "the log does not match the workload: "
            + "; ".join(problems)
            + " (check the inputs, or pass --allow-mismatch to keep the declared "
            "values; the override is recorded)"
        )
    notes.extend(f"mismatch overridden with --allow-mismatch: {p}" for p in problems)
    return result_config


def _machine(
    manifest_path: str | Path | None,
    files: Sequence[Path],
    saved_hardware: SavedHardware | None,
    facts: dict[str, Any],
    notes: list[str],
) -> tuple[Manifest | None, Hardware, Software]:
    """The run's manifest, and the hardware and software it ran on: the manifest's, the device
    of a saved nvidia-smi/rocm-smi output in place of the manifest's, the software versions the
    log states added.  Where each came from is added to ``notes``."""
    manifest, manifest_note = _manifest(manifest_path, files)
    if manifest_note and (manifest is not None or saved_hardware is None):
        notes.append(manifest_note)
    hardware = manifest.hardware if manifest else Hardware()
    if saved_hardware is not None:
        if hardware.device_name and hardware.device_name != saved_hardware.hardware.device_name:
            notes.append(f"--hardware replaces the manifest's device ({hardware.device_name})")
        hardware = saved_hardware.hardware
        notes.append(saved_hardware.note)
    software = manifest.software if manifest else Software()
    software, software_note = _software_from_facts(software, facts)
    if software_note:
        notes.append(software_note)
    return manifest, hardware, software


def _warmup_iterations(workload: Workload, config: BenchmarkConfig | None) -> int:
    """The iterations left out of the statistics: the workload's, else the config's, else the default."""
    if workload.warmup_iterations is not None:
        return workload.warmup_iterations
    if config is not None:
        return config.benchmark.warmup_iterations
    warmup: int = default_config_dict()["benchmark"]["warmup_iterations"]
    return warmup


def _tensor_parallel(config: BenchmarkConfig | None, facts: dict[str, Any]) -> int:
    """The tensor-parallel size: the config's, else the one the log states, else 1."""
    if config is not None:
        return config.parallel.tensor
    return as_size("tensor_parallel", facts.get("tensor_parallel")) or 1


def _log_notes(
    collector: EventCollector, truncated: Sequence[str], missing: Sequence[str], stated_notes: Sequence[str]
) -> list[str]:
    """The notes on what was read: last lines cut off, iterations missing, the backend's notes
    (``note.*`` facts, then the collector's), the stated facts' notes, and the facts the log states."""
    notes = [f"skipped {line}: last line of the file has no newline (cut off)" for line in truncated]
    notes.extend(missing)
    for key, fact in sorted(collector.facts.items()):
        if key.startswith("note."):
            notes.append(str(fact.value))
    notes.extend(collector.notes())
    notes.extend(stated_notes)
    facts_shown = {k: getattr(v, "value", v) for k, v in collector.facts.items() if not k.startswith("note.")}
    if facts_shown:
        notes.append("log states: " + ", ".join(f"{k}={v}" for k, v in sorted(facts_shown.items())))
    return notes


def _run_status(*, partial: bool, stopped_by: str | None, notes: list[str]) -> RunStatus:
    """ "completed", or "partial" when iterations are missing or a line was cut off, and then
    "interrupted" when the log says what stopped the run (noted in ``notes``)."""
    status: RunStatus = "partial" if partial else "completed"
    if stopped_by is not None:
        notes.append(f"the run was stopped by {stopped_by}")
        if status == "partial":
            status = "interrupted"
    return status


def _run_info(
    backend: str,
    files: Sequence[Path],
    framework: str,
    model: str,
    config: BenchmarkConfig | None,
    status: RunStatus,
    manifest: Manifest | None,
    saved_hardware: SavedHardware | None,
) -> RunInfo:
    """The run as its logs, config and manifest describe it (a log holds no start or end time here);
    its platform is the saved hardware output's, else the manifest's."""
    return RunInfo(
        id=_run_id(backend, files),
        backend=backend,
        platform=saved_hardware.platform if saved_hardware else manifest.platform if manifest else None,
        framework=framework,
        model=model,
        dataset=config.data.dataset if config is not None else "unknown",
        status=status,
        started_at=None,
        finished_at=None,
        tprimat_version=__version__,
        launcher=manifest.launcher if manifest else None,
        deployment=manifest.deployment if manifest else None,
        tags=manifest.tags if manifest else {},
    )


def _finished(result: Result, *, stopped_by: str | None, facts: dict[str, Any], warnings: list[str]) -> Result:
    """``result`` with what the log says stopped the run, never "completed" when not one iteration
    could be measured (warned in ``warnings``), and the figures the framework printed for the run."""
    if stopped_by is not None:
        result = attrs.evolve(result, caveats=Caveats(stopped_by=stopped_by))
    unmeasured = nothing_measured(result.summary)
    if unmeasured is not None:
        # Never "completed": the log holds iterations, but not one that can be measured.
        status: RunStatus = "partial" if result.run.status == "completed" else result.run.status
        warnings.append(f"{unmeasured}; the result is {status}")
        run = attrs.evolve(result.run, status=status)
        provenance = attrs.evolve(result.provenance, notes=[*result.provenance.notes, unmeasured])
        result = attrs.evolve(result, run=run, provenance=provenance)
    run_reported = _run_reported(facts)
    if run_reported and result.summary is not None:
        summary = attrs.evolve(result.summary, reported={**result.summary.reported, **run_reported})
        result = attrs.evolve(result, summary=summary)
    return result


def _run_reported(facts: dict[str, Any]) -> dict[str, Any]:
    """Figures the framework printed once for the whole run (facts named ``reported.<name>``), as
    one-value columns ``<name>_run`` beside the per-iteration ``reported`` columns (secondary, never
    used for tprimat's own numbers)."""
    from tprimat.result.metrics import describe

    found = {}
    for key, value in facts.items():
        if key.startswith("reported.") and isinstance(value, int | float) and not isinstance(value, bool):
            if isinstance(value, int) and abs(value) > 2**1023:
                continue  # past the largest float: not a figure
            stats = describe([float(value)])
            if stats is not None:
                found[key.removeprefix("reported.") + "_run"] = stats
    return found


def _stopped_after_last_iteration(files: Sequence[Path], common: Path | None, timed: TimedRecords) -> str | None:
    """What stopped the run, when the log says so after its last iteration line."""
    from tprimat.parse.stopreason import find_stop_reason, line_number_at, tail_text

    last = next(reversed(timed)).source or ""
    last_file, _, last_line = last.rpartition(":")
    # Only files that hold iteration lines: another rank's signal may precede a restart.
    names = {_display_name(path, common) for path in files}
    with_iterations: set[str] = set()
    for (source,) in record_fields(timed, "source"):
        name = (source or "").rpartition(":")[0]
        if name in names and name not in with_iterations:
            with_iterations.add(name)
            if len(with_iterations) == len(names):
                break  # each file found: the other records cannot add any
    for path in files:
        source = _display_name(path, common)
        if source not in with_iterations:
            continue
        try:
            start, lines = tail_text(path)
            if find_stop_reason(lines) is None:
                continue  # numbering the lines reads the whole file: only when there is a reason
            first = line_number_at(path, start)
        except OSError:
            continue
        if source == last_file and last_line.isdigit():
            skip = max(0, int(last_line) - first + 1)
            lines, first = lines[skip:], first + skip
        found = find_stop_reason(lines, first, source)
        if found is not None:
            return found
    return None


#: Signs of the platform a log ran on, for the --backend check (platforms, not backends).
_ROCM_HINT_RE = re.compile(r"\bmem usages:|ROCm version|HIP version|RCCL|MI[23]\d\dX?|rocm", re.I)
_NVIDIA_HINT_RE = re.compile(r"CUDA version|NCCL version|\b[HAB]100\b|\bH200\b|\bGB?200\b|nvidia-smi")
#: Lower-case text each hint contains: a file head whose bytes hold none of them has no hint (the
#: patterns are slow to try at every word of thousands of lines).
_ROCM_HINT_TEXT = ("mem usages:", "rocm", "hip version", "rccl", "mi2", "mi3")
_NVIDIA_HINT_TEXT = ("cuda version", "nccl version", "h100", "a100", "b100", "h200", "g200", "nvidia-smi")


def _platform_warnings(files: Sequence[Path], backend: str, platform: str) -> list[str]:
    """A warning when ``--backend`` names one platform and the log evidently ran on the other."""
    if platform not in ("amd", "nvidia"):
        return []
    from tprimat.parse.logkind import read_head

    hint = _ROCM_HINT_RE if platform == "nvidia" else _NVIDIA_HINT_RE
    texts = tuple(t.encode() for t in (_ROCM_HINT_TEXT if platform == "nvidia" else _NVIDIA_HINT_TEXT))
    other = "ROCm/AMD" if platform == "nvidia" else "CUDA/NVIDIA"
    for path in files:
        try:
            with open(path, "rb") as handle:
                lowered = b"".join(itertools.islice(handle, DETECT_SAMPLE_LINES)).lower()
            if not any(text in lowered for text in texts):
                continue
            head = read_head(path, DETECT_SAMPLE_LINES)
        except OSError as exc:
            raise _open_error(path, exc) from None
        for lineno, line in enumerate(head, 1):
            match = hint.search(line)
            if match:
                return [
                    f"--backend {backend} is a {platform} backend but the log shows {other} "
                    f"({match.group(0)!r} at {path.name}:{lineno}); the numbers are read as "
                    f"{backend} prints them: check the backend (leave --backend out to detect it)"
                ]
    return []


def _continues_stream(files: Sequence[Path], log_stream: Any) -> list[bool]:
    """For each file, whether it continues the stream of the file before it (``BackendSpec.log_stream``)."""
    if log_stream is None:
        return [False] * len(files)
    streams = [log_stream(path) for path in files]
    return [i > 0 and streams[i] is not None and streams[i] == streams[i - 1] for i in range(len(files))]


def _with_stated_facts(
    files: Sequence[Path],
    common: Path | None,
    facts: dict[str, Any],
    records: Sequence[IterationRecord],
    reader: Any,
) -> tuple[dict[str, Any], list[str], Sequence[IterationRecord]]:
    """``facts`` completed with what the backend reads from the start of each file
    (``BackendSpec.stated_facts``; the first file that states a key wins); the profiled
    iterations it names marked.  ``files`` are those that start a log: a rotated log's
    later files begin in the middle of it."""
    if reader is None:
        return facts, [], records
    facts = dict(facts)
    notes: list[str] = []
    window: set[int] = set()
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = list(itertools.islice(handle, STATED_LINES))
        name = _display_name(path, common)
        try:
            stated, file_notes = reader(head, name, facts)
        except Exception as exc:  # a backend's reader must not lose the parse: noted, its facts left out
            shown = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            notes.append(f"{name}: what the start of the file states was not read ({shown})")
            continue
        notes.extend(note for note in file_notes if note not in notes)  # every rank says the same
        for fact in stated:
            if fact.key == "profiled_iterations":
                window.update(fact.value)
            elif fact.key not in facts:
                facts[fact.key] = fact.value
                notes.append(f"log states {fact.key}={fact.value} ({fact.source})")
    if window:
        if isinstance(records, RecordSequence):
            mark = functools.partial(_marked_profiled_columns, window=frozenset(window))
            records = records.map_columns(mark, reads=("iteration", "profiled"), changes=("profiled",))
        else:
            records = list(map(functools.partial(_marked_profiled, window=frozenset(window)), records))
    return facts, notes, records


def _marked_profiled(record: IterationRecord, *, window: frozenset[int]) -> IterationRecord:
    """``record``, marked as profiled if its iteration lies in the profiler's ``window``."""
    return attrs.evolve(record, profiled=True) if record.iteration in window and not record.profiled else record


def _marked_profiled_columns(columns: list[Sequence[Any]], *, window: frozenset[int]) -> list[Sequence[Any]]:
    """:func:`_marked_profiled` for a block of records read back from a file: its ``profiled``
    column, from its ``iteration`` and ``profiled`` columns."""
    iterations, profiled = columns
    if window.isdisjoint(iterations):
        return [profiled]
    return [
        [
            True if iteration in window and not marked else marked
            for iteration, marked in zip(iterations, profiled, strict=True)
        ]
    ]


def _hard_wrapped(files: Sequence[Path]) -> dict[Path, int]:
    from tprimat.parse.logkind import read_head, wrap_width

    found = {}
    for path in files:
        try:
            width = wrap_width(read_head(path, WRAP_SAMPLE_LINES))
        except OSError as exc:
            raise _open_error(path, exc) from None
        if width is not None:
            found[path] = width
    return found


def _manifest(path: str | Path | None, files: Sequence[Path]) -> tuple[Manifest | None, str | None]:
    if path is not None:
        return load_manifest(path), f"hardware and software from manifest {path}"
    found = find_manifest(files[0])
    if found is not None:
        note = f"hardware and software from manifest {found} (found next to the log)"
        return load_manifest(found), note
    return None, "no run manifest: hardware and platform unknown (never taken from this machine)"


_SOFTWARE_FACTS = {"rocm_version": "rocm", "collectives": "collectives"}


def _software_from_facts(software: Software, facts: dict[str, Any]) -> tuple[Software, str | None]:
    filled: dict[str, Any] = {}
    for key, field in _SOFTWARE_FACTS.items():
        if key in facts and getattr(software, field) is None:
            filled[field] = str(facts[key])
    extra = dict(software.extra)
    if "hip_version" in facts and "hip" not in extra:
        extra["hip"] = str(facts["hip_version"])
        filled["extra"] = extra
    if not filled:
        return software, None
    shown = ", ".join(f"{k}" for k in filled if k != "extra") or "hip"
    return attrs.evolve(software, **filled), f"software versions read from the log: {shown}"


def _common_parent(files: Sequence[Path]) -> Path | None:
    parents = {p.resolve().parent for p in files}
    if len(parents) == 1:
        return parents.pop()
    try:
        import os

        return Path(os.path.commonpath([str(p.resolve()) for p in files]))
    except ValueError:
        return None


def _display_name(path: Path, common: Path | None) -> str:
    if common is not None:
        try:
            return str(path.resolve().relative_to(common))
        except ValueError:
            pass
    return str(path)


def _run_id(backend: str, files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.resolve()).encode())
        try:
            digest.update(str(path.stat().st_size).encode())
        except OSError:
            pass
    return f"log-{backend}-{digest.hexdigest()[:10]}"
