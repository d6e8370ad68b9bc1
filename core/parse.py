"""Log analysis: turn training logs into a result, on any machine, without torch.

``tprimat parse`` and anything else that reads finished logs go through
:func:`parse_logs`: it finds the log files (a file, a directory, or Primus's
per-rank tree), streams them line by line into the backend's
``parse_metrics`` hook, collects the events by iteration, checks what the log
says against the workload it is told (config file or command-line values),
reads hardware and software from a run manifest (never from this machine),
and hands the records to :func:`tprimat.assemble.assemble_result`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from tprimat import __version__
from tprimat.assemble import assemble_result
from tprimat.collect import EventCollector, is_memory_only
from tprimat.config import BenchmarkConfig, default_config_dict
from tprimat.errors import TprimatError
from tprimat.manifest import Manifest, find_manifest, load_manifest
from tprimat.metrics import _ranges
from tprimat.parse_parallel import LogReadError, read_events
from tprimat.schema import (
    Hardware,
    IterationRecord,
    Provenance,
    Result,
    ResultConfig,
    RunInfo,
    Software,
)


class ParseError(TprimatError):
    """Logs that cannot be turned into a result (none found, no iterations, a mismatch)."""


#: Backends whose logs are Megatron-LM training logs (iteration 1 includes start-up).
MEGATRON_FAMILY = frozenset({"amd_primus", "amd_megatron", "nvd_megatron"})

#: File names read from a directory that is not a Primus tree.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")

#: How far format detection reads into a file before giving up (lines).
DETECT_MAX_LINES = 200_000

_PRIMUS_LEVELS = ("debug", "info", "warning", "error")
_ROTATED_NUMBER_RE = re.compile(r"^(?P<level>[a-z]+)\.log\.(?P<n>\d+)$")
_ROTATED_STAMP_RE = re.compile(r"^(?P<level>[a-z]+)\.(?P<stamp>.+)\.log$")
_MEGATRON_LINE_RE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*elapsed time per iteration")
_NEMO_LINE_RE = re.compile(r"Training epoch \d+, iteration \d+/\d+\s*\|.*global_step")
_PRIMUS_HINT_RE = re.compile(r"\[rank-\d+/\d+\]|hip mem usage|rocm mem usage|primus", re.I)
_ROCM_HINT_RE = re.compile(r"\bmem usages:|ROCm version|HIP version|RCCL|MI[23]\d\dX?|rocm", re.I)


@attrs.frozen(kw_only=True)
class Workload:
    """What the user says the run was, from the command line (each may be unknown)."""

    model: str | None = None
    seq_length: int | None = None
    global_batch_size: int | None = None
    world_size: int | None = None
    precision: str | None = None
    warmup_iterations: int | None = None


@attrs.frozen(kw_only=True)
class ParseOutcome:
    result: Result
    backend: str
    detected: str | None  # why the backend was chosen, when it was detected
    files: list[Path]
    collector: EventCollector


# -- finding files -------------------------------------------------------------------------


def _rotation_key(path: Path) -> tuple[int, Any, str]:
    """Oldest first: ``debug.log.3``, ``debug.log.1``, ``debug.<stamp>.log``, then ``debug.log``."""
    name = path.name
    numbered = _ROTATED_NUMBER_RE.match(name)
    if numbered:
        return (0, -int(numbered.group("n")), name)
    if name.count(".") >= 2 and _ROTATED_STAMP_RE.match(name):
        return (1, name, name)
    return (2, name, name)


def _primus_rank_files(rank_dir: Path) -> list[Path]:
    """The lowest-level log family of one ``rank-N`` directory, rotated files oldest first.

    Primus writes each level and above into its own file, so ``debug.log``
    holds everything ``info.log`` does: reading one family is enough.
    """
    for level in _PRIMUS_LEVELS:
        family = [p for p in rank_dir.iterdir() if p.is_file() and (
            p.name == f"{level}.log" or p.name.startswith(f"{level}.")
            and (p.name.endswith(".log") or _ROTATED_NUMBER_RE.match(p.name)))]
        if family:
            return sorted(family, key=_rotation_key)
    return []


def _rank_number(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return 1 << 30


def find_log_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[str]]:
    """The files to read for ``paths``, and notes on how they were chosen."""
    files: list[Path] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            files.append(path)
            continue
        if not path.is_dir():
            raise ParseError(f"{path}: no such file or directory")
        rank_dirs = sorted(
            (p for p in path.rglob("rank-*") if p.is_dir() and p.name[5:].isdigit()),
            key=lambda p: (str(p.parent), _rank_number(p)),
        )
        chosen: list[Path] = []
        for rank_dir in rank_dirs:
            chosen.extend(_primus_rank_files(rank_dir))
        if chosen:
            families = sorted({p.name.split(".")[0] for p in chosen})
            notes.append(
                f"{path}: Primus per-rank logs, {len(rank_dirs)} rank directories, "
                f"{len(chosen)} files ({'/'.join(families)}.log and rotations)"
            )
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


# -- reading -------------------------------------------------------------------------------


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
                truncated.append(f"{source}:{_count_lines(path)}")
        except OSError as exc:
            raise _open_error(path, exc) from None
    return cuts


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b"")) + 1


def _open_error(path: Path, exc: OSError) -> ParseError:
    return ParseError(f"{path}: cannot read: {exc.strerror or exc}")


def detect_backend(files: Sequence[Path], available: Iterable[str]) -> tuple[str, str]:
    """The built-in backend whose log format ``files`` are in, and what gave it away."""
    names = set(available)
    rocm_hint: str | None = None
    primus_hint: str | None = None
    for path in files:
        try:
            handle = open(path, encoding="utf-8", errors="replace")
        except OSError as exc:
            raise _open_error(path, exc) from None
        with handle:
            for lineno, line in enumerate(handle, 1):
                if lineno > DETECT_MAX_LINES:
                    break
                if primus_hint is None and _PRIMUS_HINT_RE.search(line):
                    primus_hint = f"{path.name}:{lineno}"
                if rocm_hint is None and _ROCM_HINT_RE.search(line):
                    rocm_hint = f"{path.name}:{lineno}"
                if "Training epoch" in line and _NEMO_LINE_RE.search(line):
                    return _pick("nvd_nemo", names, f"NeMo 2 step line at {path.name}:{lineno}")
                if "train_step_timing in s: [" in line:
                    return _pick("nvd_nemo", names,
                                 f"NeMo step-time list at {path.name}:{lineno}")
                if "Step Time" in line and "MODEL_TFLOP" in line:
                    return _pick("nvd_megatron", names,
                                 f"Megatron-Bridge step-time line at {path.name}:{lineno}")
                if "iteration" in line and _MEGATRON_LINE_RE.search(line):
                    where = f"{path.name}:{lineno}"
                    if primus_hint is not None:
                        return _pick("amd_primus", names,
                                     f"Megatron iteration line at {where}, Primus log format "
                                     f"at {primus_hint}")
                    if rocm_hint is not None:
                        return _pick("amd_megatron", names,
                                     f"Megatron iteration line at {where}, ROCm at {rocm_hint}")
                    return _pick("nvd_megatron", names,
                                 f"Megatron iteration line at {where}, no ROCm or Primus sign")
    shown = ", ".join(str(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
    raise ParseError(
        f"{shown}: no training iteration lines found (not a Primus, Megatron-LM, "
        "Megatron-Bridge or NeMo log?)"
    )


def _pick(backend: str, names: set[str], reason: str) -> tuple[str, str]:
    if backend not in names:
        raise ParseError(f"log looks like {backend} ({reason}) but that backend is not installed")
    return backend, reason


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
    config: BenchmarkConfig | None, workload: Workload, facts: dict[str, Any]
) -> ResultConfig:
    if config is not None:
        return ResultConfig(
            model=config.benchmark.model,
            seq_length=config.training.seq_length,
            global_batch_size=config.training.global_batch_size,
            micro_batch_size=config.training.micro_batch_size,
            world_size=config.world_size,
            precision=config.precision.dtype,
            methodology=config.benchmark.methodology,
            config_fingerprint=config.fingerprint(),
            settings=config.to_dict(),
        )
    return ResultConfig(
        model=workload.model or "unknown",
        seq_length=workload.seq_length or _int(facts.get("seq_length")),
        global_batch_size=workload.global_batch_size or _int(facts.get("global_batch_size")),
        micro_batch_size=_int(facts.get("micro_batch_size")),
        world_size=workload.world_size or _int(facts.get("world_size")),
        precision=workload.precision or _precision_from_facts(facts),
        methodology="unknown",
    )


def _declared_sources(
    config: BenchmarkConfig | None, config_label: str, workload: Workload
) -> dict[str, str]:
    keys = ("global_batch_size", "seq_length", "world_size")
    if config is not None:
        return dict.fromkeys(keys, config_label)
    return {key: ("the command line" if getattr(workload, key) is not None
                  else "the log (first value it states)") for key in keys}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_workload(
    result_config: ResultConfig, records: list[IterationRecord], facts: dict[str, Any],
    declared: dict[str, str],
) -> list[str]:
    """Disagreements between the workload and the log, each naming both values and their source.

    ``declared`` names where each workload value came from ("config run.toml",
    "the command line", "the log"); values read from the log are
    still checked against the log's own iteration lines.
    """
    problems: list[str] = []
    gbs = result_config.global_batch_size
    if gbs is not None:
        by = declared.get("global_batch_size", "the log")
        logged = sorted({r.global_batch_size for r in records if r.global_batch_size is not None})
        fact = _int(facts.get("global_batch_size"))
        if fact is not None and not logged:
            logged = [fact]
        if any(v != gbs for v in logged):
            problems.append(f"global batch size: {by} says {gbs}, the log's iteration lines say "
                            f"{', '.join(str(v) for v in logged)}")
        counted = [r for r in records if r.consumed_samples is not None]
        for before, after in zip(counted, counted[1:], strict=False):
            steps = after.iteration - before.iteration
            expected = steps * gbs
            got = after.consumed_samples - before.consumed_samples  # type: ignore[operator]
            if steps > 0 and got != expected:
                problems.append(
                    f"consumed samples: global batch {gbs} ({by}) gives {expected} samples over "
                    f"iterations {before.iteration}-{after.iteration}, the log counts {got} "
                    f"({before.source} -> {after.source})"
                )
                break
    for key, value in (("seq_length", result_config.seq_length),
                       ("world_size", result_config.world_size)):
        fact = _int(facts.get(key))
        if value is not None and fact is not None and fact != value:
            label = key.replace("_", " ")
            problems.append(f"{label}: {declared.get(key, 'the log')} says {value}, "
                            f"the log says {fact}")
    return problems


def check_workload(
    workload: ResultConfig, records: list[IterationRecord], facts: dict[str, Any], declared_by: str
) -> list[str]:
    """Where a log disagrees with ``workload`` (global batch, sequence length, world size).

    ``declared_by`` names where the workload comes from (e.g. "the config");
    ``tprimat run`` checks a live job's output with this, as ``tprimat parse`` does.
    """
    declared = dict.fromkeys(("global_batch_size", "seq_length", "world_size"), declared_by)
    return _check_workload(workload, records, facts, declared)


# -- status ----------------------------------------------------------------------------------


def _missing_iterations(records: list[IterationRecord], train_iters: int | None) -> list[str]:
    timed = [r for r in records if r.step_time_s is not None or r.loss is not None]
    if not timed:
        return []
    missing: list[int] = []
    covered = timed[0].iteration
    for record in timed[1:]:
        start = record.iteration - record.covers_iterations + 1
        if start > covered + 1:
            missing.extend(range(covered + 1, start))
        covered = max(covered, record.iteration)
    notes = []
    if missing:
        notes.append(f"iterations missing from the log: {_ranges(missing)}")
    if train_iters is not None and covered < train_iters:
        notes.append(f"the log ends at iteration {covered} of {train_iters}")
    return notes


# -- the whole thing -------------------------------------------------------------------------


def parse_logs(
    paths: Sequence[str | Path],
    *,
    registry: Any,
    backend: str | None = None,
    config: BenchmarkConfig | None = None,
    config_label: str = "the config",
    workload: Workload = Workload(),
    manifest_path: str | Path | None = None,
    allow_mismatch: bool = False,
    workers: int | None = None,
) -> ParseOutcome:
    """Parse ``paths`` into a :class:`~tprimat.schema.Result` (see the module docstring).

    ``workers``: processes reading the files (default: every CPU this process may use; 1 reads
    in this process); the result is the same for any number.
    """
    files, notes = find_log_files(paths)
    detected = None
    if backend is None:
        backend, detected = detect_backend(files, registry.backends())
        notes.append(f"format detected: {backend} ({detected})")
    entry = registry.backend(backend)

    collector = EventCollector()
    truncated: list[str] = []
    common = _common_parent(files)
    sources = [_display_name(path, common) for path in files]
    cuts = _cut_files(files, sources, truncated)
    # Text: any line ending, undecodable bytes replaced (junk is skipped, never raised); files
    # and ranges of large files on every core, with the events of a serial read.
    try:
        for events in read_events(registry, backend, files, sources, cuts, workers=workers):
            collector.consume(events)
    except LogReadError as exc:
        raise _open_error(exc.path, exc) from None
    records = collector.records
    timed = [r for r in records if not is_memory_only(r)]
    if not timed:
        shown = ", ".join(str(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
        raise ParseError(f"{shown}: no training iterations found in the log for backend "
                         f"{backend}")
    facts = {key: fact.value for key, fact in collector.facts.items()}

    result_config = _result_config(config, workload, facts)
    declared = _declared_sources(config, config_label, workload)
    problems = _check_workload(result_config, timed, facts, declared)
    if problems and not allow_mismatch:
        raise ParseError("the log does not match the workload: " + "; ".join(problems)
                         + " (check the inputs, or pass --allow-mismatch to keep the declared "
                         "values; the override is recorded)")
    notes.extend(f"mismatch overridden with --allow-mismatch: {p}" for p in problems)

    manifest, manifest_note = _manifest(manifest_path, files)
    if manifest_note:
        notes.append(manifest_note)
    hardware = manifest.hardware if manifest else Hardware()
    software = manifest.software if manifest else Software()
    software, software_note = _software_from_facts(software, facts)
    if software_note:
        notes.append(software_note)

    warmup = workload.warmup_iterations
    if warmup is None:
        warmup = (config.benchmark.warmup_iterations if config is not None
                  else default_config_dict()["benchmark"]["warmup_iterations"])
    if backend in MEGATRON_FAMILY and timed[0].iteration == 1 and warmup < 1:
        warmup = 1
        notes.append("warm-up raised to 1: Megatron's iteration 1 includes start-up "
                     "(since Megatron-LM 0.16 its timers are not reset after it)")

    missing = _missing_iterations(timed, _int(facts.get("train_iters")))
    for line in truncated:
        notes.append(f"skipped {line}: last line of the file has no newline (cut off)")
    notes.extend(missing)
    for key, fact in sorted(collector.facts.items()):
        if key.startswith("note."):
            notes.append(str(fact.value))
    notes.extend(collector.notes())
    facts_shown = {k: v for k, v in facts.items() if not k.startswith("note.")}
    if facts_shown:
        notes.append("log states: " + ", ".join(f"{k}={v}" for k, v in sorted(facts_shown.items())))

    tensor_parallel = (config.parallel.tensor if config is not None
                       else _int(facts.get("tensor_parallel")) or 1)
    status = "partial" if missing or truncated else "completed"
    run = RunInfo(
        id=_run_id(backend, files),
        backend=backend,
        platform=manifest.platform if manifest else None,
        framework=entry.spec.framework,
        model=result_config.model,
        dataset=config.data.dataset if config is not None else "unknown",
        status=status,
        started_at=None,
        finished_at=None,
        tprimat_version=__version__,
    )
    provenance = Provenance(
        inputs=[str(p) for p in files],
        parser=f"{backend} log parser ({entry.plugin_name})",
        parser_version=entry.version or __version__,
        notes=notes,
    )
    result = assemble_result(
        run=run,
        config=result_config,
        records=records,
        hardware=hardware,
        software=software,
        provenance=provenance,
        warmup_iterations=warmup,
        exclude_profiled=config.benchmark.exclude_profiled if config is not None else True,
        tensor_parallel=tensor_parallel,
        ceiling=manifest.extra.get("microbench") if manifest else None,
    )
    return ParseOutcome(result=result, backend=backend, detected=detected, files=files,
                        collector=collector)


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
