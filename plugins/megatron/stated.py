"""Workload values a Megatron-family log states outside its iteration lines, and the profiler window it ran.

Launchers echo their command line (``--seq_length 128 --global_batch_size 16``), Primus
prints its arguments as a Python dict (``'profile_step_start': 6``), Megatron-LM dumps its
arguments (``seq_length ........ 4096``) and Primus prefixes every line with
``[rank-N/WORLD]``.  :func:`scan_lines` reads these forms from the start of each file, so a
log that states its sequence length, world size or global batch is not reported as silent
about them.  The backend's parser keeps precedence: these only fill what it did not read.
:func:`read_stated` is the family's ``BackendSpec.stated_facts``: the core shows it the
start of each log file and keeps what no earlier file stated.

Megatron-Bridge prints its whole ``ConfigContainer`` as YAML, often several times (recipe
defaults, then the overridden config, once per process).  :func:`bridge_config_facts` takes
the dumps whose ``train.train_iters`` and ``train.global_batch_size`` the iteration lines
confirm and reads the sequence length and the profiler settings from them, when they agree.

A log that states a profiler window (``--profile True --profile_step_start S
--profile_step_end E``) had those iterations disturbed by the profiler:
:func:`profiled_iterations` gives them, with the same rule a live run uses
(:class:`tprimat.contract.window.ProfileWindow`: warm-up ``S-1``, recorded ``S`` … ``E-1``, and
``E``, whose time includes writing the trace).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from tprimat.contract.records import LogFact
from tprimat.contract.values import typed_value

#: Argument names (underscores) -> fact keys.
KEYS = {
    "seq_length": "seq_length",
    "global_batch_size": "global_batch_size",
    "world_size": "world_size",
    "profile": "profile",
    "use_pytorch_profiler": "use_pytorch_profiler",
    "profile_step_start": "profile_step_start",
    "profile_step_end": "profile_step_end",
}
_NAMES = "|".join(name.replace("_", "[_-]") for name in sorted(KEYS, key=len, reverse=True))
_VALUE = r"(True|False|true|false|None|null|-?\d+)"
_CLI_RE = re.compile(rf"(?:^|\s)--({_NAMES})(?:[ =]{_VALUE})?(?=\s|$)")
_DICT_RE = re.compile(rf"'({_NAMES})': {_VALUE}\b")
_DUMP_RE = re.compile(rf"^\s*({_NAMES}) \.{{2,}} {_VALUE}\s*$")
_RANK_RE = re.compile(r"rank-\d+/(\d+)\b")  # may follow a colour code (\x1b[36m)


@attrs.frozen(kw_only=True)
class StatedFact:
    value: Any
    source: str  # "file:line"
    form: str  # "command line", "argument dict", "argument dump", "rank prefix"


def _value(text: str | None) -> Any:
    """A value :data:`_VALUE` matched, typed; a bare flag (``--profile``, no value) is True."""
    return True if text is None else _scalar(text)


def _key(name: str) -> str:
    return KEYS[name.replace("-", "_")]


def _stated(line: str, world_known: bool = False) -> Iterator[tuple[str, Any, str]]:
    """(key, value, form) for every known key ``line`` states (``world_known``: skip the rank prefix)."""
    if " --" in line or "\t--" in line or line.startswith("--"):
        for match in _CLI_RE.finditer(line):
            yield _key(match.group(1)), _value(match.group(2)), "command line"
    if "': " in line:
        for match in _DICT_RE.finditer(line):
            yield _key(match.group(1)), _value(match.group(2)), "argument dict"
    if " .." in line and (dump := _DUMP_RE.search(line.rstrip())):
        yield _key(dump.group(1)), _value(dump.group(2)), "argument dump"
    if not world_known and "rank-" in line and (rank := _RANK_RE.search(line)):
        yield "world_size", int(rank.group(1)), "rank prefix"


def scan_lines(lines: Iterable[str], source: str) -> dict[str, StatedFact]:
    """The first value each known key is stated with in ``lines`` (``source`` names the file)."""
    found: dict[str, StatedFact] = {}
    for lineno, line in enumerate(lines, 1):
        # Most lines state nothing: test them with substring checks before any pattern.
        if (
            " --" not in line
            and "\t--" not in line
            and not line.startswith("--")
            and "': " not in line
            and (" .." not in line or ".. " not in line)
            and ("world_size" in found or "rank-" not in line)
        ):
            continue
        for key, value, form in _stated(line, "world_size" in found):
            if key not in found and value is not None:
                found[key] = StatedFact(value=value, source=f"{source}:{lineno}", form=form)
        if len(found) == len(KEYS):
            break  # every key stated: the first value of each is kept, later lines change nothing
    return found


_BRIDGE_START = "_target_: megatron.bridge.training.config.ConfigContainer"
_TOP_RE = re.compile(r"^([A-Za-z_]\w*):\s*(.*?)\s*$")
_CHILD_RE = re.compile(r"^  ([A-Za-z_]\w*):\s*(\S.*?)\s*$")

#: (dump key, fact key) read from a matching Megatron-Bridge config dump.
BRIDGE_KEYS = (
    ("model.seq_length", "seq_length"),
    ("profiling.profile_step_start", "profile_step_start"),
    ("profiling.profile_step_end", "profile_step_end"),
    ("profiling.use_pytorch_profiler", "use_pytorch_profiler"),
)


def _scalar(text: str) -> Any:
    """A command-line, argument-dict or YAML value: Python's and YAML's spellings of booleans and
    None, ints; floats kept as text (only sizes and switches are read)."""
    return typed_value(text, nulls=True, lower_case=True, floats=False)


def bridge_config_dumps(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    """Each Megatron-Bridge ``ConfigContainer`` YAML dump in ``lines``: (first line, section.key -> value)."""
    if isinstance(lines, Sequence) and _BRIDGE_START not in "".join(lines):
        return []  # the common case, found at C speed
    dumps: list[tuple[int, dict[str, Any]]] = []
    current: dict[str, Any] | None = None
    section = None
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if line.startswith(_BRIDGE_START):
            current, section = {}, None
            dumps.append((lineno, current))
        elif current is not None and line.strip():
            top = None if line.startswith(" ") else _TOP_RE.match(line)
            if top is not None:
                section = top.group(1)
                current[section] = _scalar(top.group(2)) if top.group(2) else {}
            elif not line.startswith(" "):
                current = None  # the dump ended
            elif section is not None and (child := _CHILD_RE.match(line)):
                current[f"{section}.{child.group(1)}"] = _scalar(child.group(2))
    return dumps


def bridge_config_facts(
    lines: Sequence[str], source: str, facts: dict[str, Any]
) -> tuple[dict[str, StatedFact], str | None]:
    """Facts from the Megatron-Bridge config dumps that match the run's iteration lines."""
    dumps = bridge_config_dumps(lines)
    iters, gbs = facts.get("train_iters"), facts.get("global_batch_size")
    if not dumps or iters is None or gbs is None:
        return {}, None
    matching = [
        (n, d) for n, d in dumps if d.get("train.train_iters") == iters and d.get("train.global_batch_size") == gbs
    ]
    if not matching:
        return {}, (
            f"{len(dumps)} Megatron-Bridge config dumps, none with train_iters {iters} and "
            f"global_batch_size {gbs} as the iteration lines say: not used"
        )
    found: dict[str, StatedFact] = {}
    for key, fact in (*BRIDGE_KEYS, ("profiling", "profile")):
        values = {repr(_bridge_value(d, key)) for _, d in matching}
        if len(values) != 1:
            return {}, f"the Megatron-Bridge config dumps that match the run disagree on {key}: not used"
        value = _bridge_value(matching[0][1], key)
        if value is not None:
            found[fact] = StatedFact(
                value=value, source=f"{source}:{matching[0][0]}", form="Megatron-Bridge config dump"
            )
    return found, None


def _bridge_value(dump: dict[str, Any], key: str) -> Any:
    if key == "profiling":  # "profiling: null" is off; a section is on with one of the profilers
        if dump.get("profiling") is None:
            return False
        return bool(dump.get("profiling.use_pytorch_profiler") or dump.get("profiling.use_nsys_profiler"))
    return dump.get(key)


#: The longest stated profiler window taken as one (a trace of more steps is impractical to
#: write; a larger stated window would only cost memory to mark).
MAX_PROFILED_ITERATIONS = 10_000


def profiled_iterations(facts: dict[str, Any]) -> tuple[tuple[int, ...], str | None]:
    """The iterations a stated profiler window disturbed, and a note on what was read."""
    start, end = facts.get("profile_step_start"), facts.get("profile_step_end")
    if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool):
        return (), None
    if facts.get("profile") is not True:
        return (), (
            f"the log states a profiler window (profile_step_start {start}, "
            f"profile_step_end {end}) with profiling off: no iteration left out for it"
        )
    if end <= start:
        return (), f"the log states an empty profiler window ({start}-{end}): nothing left out"
    if end - start > MAX_PROFILED_ITERATIONS:
        return (), (
            f"the log states a profiler window of {end - start} iterations ({start}-{end}), more than the "
            f"{MAX_PROFILED_ITERATIONS} any profiler trace holds: taken as not a window, nothing left out"
        )
    from tprimat.contract.window import ProfileWindow

    window = ProfileWindow(first_recorded=start, last_recorded=end - 1, warmup=1, ranks=())
    tool = "torch profiler" if facts.get("use_pytorch_profiler") is True else "CUDA profiler range"
    return window.excluded, (
        f"the log states a {tool} window profile_step_start {start}, "
        f"profile_step_end {end}: iterations {start - 1}-{end} marked "
        "profiled (warm-up, recorded, trace export), as in a live run"
    )


def read_stated(lines: Sequence[str], source: str, parsed: Mapping[str, Any]) -> tuple[list[LogFact], list[str]]:
    """``BackendSpec.stated_facts``: what the start of one log file states, and notes.

    ``parsed`` are the facts the parser read (and earlier files stated); a stated
    profiler window becomes the fact ``profiled_iterations`` (the iterations it disturbed).
    """
    found = scan_lines(lines, source)
    bridge, note = bridge_config_facts(lines, source, dict(parsed))
    for key, fact in bridge.items():
        found.setdefault(key, fact)
    notes = [note] if note else []
    facts = [LogFact(key=key, value=fact.value, source=f"{fact.form} at {fact.source}") for key, fact in found.items()]
    known = {**{f.key: f.value for f in facts}, **parsed}
    window, window_note = profiled_iterations(known)
    if window_note:
        notes.append(window_note)
    if window:
        facts.append(LogFact(key="profiled_iterations", value=window, source=source))
    return facts, notes
