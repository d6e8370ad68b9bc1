"""Every argument a Megatron-family framework printed at start-up: what it says it ran with.

:func:`read_arguments` reads the start of one log file and returns the arguments as
printed, ``{destination: text}``, with where they start and in which form.  The forms,
most trusted first:

* **Megatron-LM's argument dump** (:data:`MEGATRON_DUMP`), printed on rank 0 at the end of
  ``validate_args``, so after Megatron's own adjustments: the values it trains with::

      ------------------------ arguments ------------------------
        micro_batch_size ................................ 2
        inference_dynamic_batching_prefix_caching_eviction_policy  ref_zero
      -------------------- end of arguments ---------------------

  (no dots after a name of 48 characters or more).  Every Megatron-LM release prints it
  this way, and so does ROCm's fork; under Primus each line goes through Primus's logger
  (``[20260507 13:46:59][rank-0/8][DEBUG]    [-----arguments.py:1576] :   seq_length ... 128``),
  at DEBUG level, with Primus's own keys merged into the namespace.
* **Primus's final backend args** (:data:`PRIMUS_ARGS`): ``Final backend args (after
  patches): (673 parameters)``, lines ``  name<padding> : value (type)``, a line of dashes,
  then its ``Primus-specific parameters: (143 parameters)`` section.  This is what Primus
  hands Megatron-LM, before ``validate_args``; it is read when the lines hold no complete
  Megatron dump (a Primus log at INFO level has none).
* **Dump lines without their header** (:data:`PRIMUS_LINES`): Megatron's dump lines that
  Primus's logger marks as coming from ``arguments.py``, in a log filtered down to a few
  lines.  A last resort: it states only the lines that were kept.

Launcher prefixes are not parsed, only skipped: an argument line is found wherever its
two-space indent, name and dots are (``0: `` from ``srun -l``, ``[rank-7/8]``,
``[default0]:``, timestamps), after terminal colour codes are removed.  The prefix decides
which process a line belongs to, so copies printed by several processes, at once or one
after another, are read apart; the first complete block is kept, and a copy that
disagrees with it is noted.

Reading stops once the first block has ended, no other copy is open and as many lines
again as the first block took have gone by without a copy starting (each process printing
its copy after the previous one), or after ``limit`` lines (the core shows
:data:`~tprimat.contract.backend.STATED_LINES` lines of each file), so a multi-gigabyte log
costs no more than its head.  Values are text, as printed, without trailing whitespace;
:mod:`tprimat.plugins.megatron.argcheck` compares them with the plan.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping

import attrs

from tprimat.contract.backend import STATED_LINES
from tprimat.plugins.megatron_core.colour import strip_ansi

MEGATRON_DUMP = "Megatron-LM argument dump"
PRIMUS_ARGS = "Primus final backend args"
PRIMUS_LINES = "Megatron-LM argument lines logged by Primus, without the dump's header"

_HEADER_RE = re.compile(r"-{4,} arguments -{4,}")
_END_RE = re.compile(r"-{4,} end of arguments -{4,}")
#: ``  name ..... value``; the value may be empty (``config_logger_dir ....... ``).
_DOTTED_RE = re.compile(r"\s\s([A-Za-z_][A-Za-z0-9_]*) \.+(?: (.*))?$")
#: ``  name  value`` for a name of 48 characters or more (Megatron pads to 48 with dots).
_WIDE_RE = re.compile(r"\s\s([A-Za-z_][A-Za-z0-9_]{47,})  (.*)$")
_PRIMUS_TITLE_RE = re.compile(
    r"(Final backend args \(after patches\)|Primus-specific parameters): \((\d+) parameters\)"
)
_PRIMUS_KEY_RE = re.compile(r"\s\s([A-Za-z_][A-Za-z0-9_.]*) +: (.*) \(([A-Za-z_][A-Za-z0-9_.]*)\)$")
_DASHES_RE = re.compile(r"-{40,}\s*$")
#: What names the process a line came from, in its prefix.
_STREAM_RE = re.compile(r"rank-\d+(?=/\d+)|\[(?:rank|default)\d+\]|^\s*\d+(?=: )")
#: Primus's logger names the file that logged the line: ``[-----arguments.py:1576] :``.
_FROM_ARGUMENTS_PY = "arguments.py:"


@attrs.frozen(kw_only=True)
class StatedArguments(Mapping[str, str]):
    """The arguments one log file states, ``{destination: text as printed}``.

    ``file`` is the log's name and ``start`` the line the block starts on (None: the lines
    hold no arguments, and the mapping is empty); ``lines`` gives the line of each argument.
    ``complete`` is False for a block cut off before its end; ``notes`` say what a reader
    should know (copies that disagree, a cut-off block, a fallback form).
    """

    arguments: dict[str, str] = attrs.Factory(dict)
    lines: dict[str, int] = attrs.Factory(dict)
    file: str
    start: int | None = None
    form: str = ""
    complete: bool = False
    notes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """``file:line`` where the block starts (the file alone when there is none)."""
        return self.file if self.start is None else f"{self.file}:{self.start}"

    def where(self, name: str) -> str:
        """``file:line`` of one argument's line."""
        line = self.lines.get(name)
        return self.source if line is None else f"{self.file}:{line}"

    def __getitem__(self, name: str) -> str:
        return self.arguments[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arguments)

    def __len__(self) -> int:
        return len(self.arguments)


@attrs.define
class _Block:
    """One block being read: its form, first line, process, and arguments so far."""

    form: str
    start: int
    stream: str
    values: dict[str, str] = attrs.Factory(dict)
    lines: dict[str, int] = attrs.Factory(dict)
    repeated: list[str] = attrs.Factory(list)
    announced: int = 0  # Primus: the parameter counts its titles give
    ended_at: int | None = None

    def add(self, name: str, value: str, lineno: int) -> None:
        if name not in self.values:
            self.values[name] = value
            self.lines[name] = lineno
        elif self.values[name] != value:
            self.repeated.append(
                f"{name} is printed twice in the block at line {self.start} "
                f"({self.values[name]!r} at line {self.lines[name]}, {value!r} at line {lineno}): kept the first"
            )


def _argument(line: str) -> tuple[str, str, int] | None:
    """(name, value, where the indent starts) of a dump line, or None."""
    if " ." in line:
        match = _DOTTED_RE.search(line)
        if match is not None:
            return match.group(1), (match.group(2) or "").rstrip(), match.start()
    match = _WIDE_RE.search(line)
    if match is not None:
        return match.group(1), match.group(2).rstrip(), match.start()
    return None


def _stream(prefix: str) -> str:
    match = _STREAM_RE.search(prefix)
    return match.group(0).strip() if match else ""


class _Reader:
    """The scan of one file: blocks open per process, the first complete one, the rest."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.open: dict[str, _Block] = {}  # Megatron dumps being read, by process
        self.dumps: list[_Block] = []  # complete dumps, in the order they ended
        self.cut: list[_Block] = []  # dumps that stopped before their end
        self.primus: _Block | None = None
        self.primus_open = False
        self.loose: _Block | None = None

    def done(self, lineno: int) -> bool:
        """The first dump has ended, no copy is open, and the window for a copy after it is past."""
        if not self.dumps or self.open:
            return False
        first = self.dumps[0]
        if first.ended_at is None:
            return False
        return lineno >= first.ended_at + (first.ended_at - first.start + 1)

    def feed(self, raw: str, lineno: int) -> None:
        if not self.open and not self.primus_open:
            # Outside a block most lines state nothing: decide with substring tests first.
            if " arguments -" not in raw and "parameters)" not in raw and _FROM_ARGUMENTS_PY not in raw:
                return
        line = strip_ansi(raw.rstrip("\r\n"))
        if " arguments -" in line and self._marker(line, lineno):
            return
        if self.primus_open or "parameters)" in line:
            self._primus(line, lineno)
            return
        argument = _argument(line)
        if argument is None:
            return  # another process's output between the lines of a block
        name, value, at = argument
        block = self.open.get(_stream(line[:at]))
        if block is None and len(self.open) == 1:
            block = next(iter(self.open.values()))  # a prefix the header did not have
        if block is not None:
            block.add(name, value, lineno)
        elif _FROM_ARGUMENTS_PY in line[:at]:
            if self.loose is None:
                self.loose = _Block(form=PRIMUS_LINES, start=lineno, stream="")
            self.loose.add(name, value, lineno)

    def _marker(self, line: str, lineno: int) -> bool:
        end = _END_RE.search(line)
        if end is not None:
            stream = _stream(line[: end.start()])
            block = self.open.pop(stream, None)
            if block is None and len(self.open) == 1:
                block = self.open.pop(next(iter(self.open)))
            if block is not None:
                block.ended_at = lineno
                self.dumps.append(block)
            return True
        header = _HEADER_RE.search(line)
        if header is None:
            return False
        stream = _stream(line[: header.start()])
        restarted = self.open.pop(stream, None)
        if restarted is not None:
            self.cut.append(restarted)
        self.open[stream] = _Block(form=MEGATRON_DUMP, start=lineno, stream=stream)
        return True

    def _primus(self, line: str, lineno: int) -> None:
        title = _PRIMUS_TITLE_RE.search(line)
        if title is not None:
            count = int(title.group(2))
            if title.group(1).startswith("Final"):
                if self.primus is None:
                    self.primus = _Block(form=PRIMUS_ARGS, start=lineno, stream=_stream(line[: title.start()]))
                    self.primus.announced = count
                    self.primus_open = True
            elif self.primus is not None and self.primus.ended_at is not None and lineno - self.primus.ended_at <= 3:
                self.primus.announced += count  # its second section follows at once
                self.primus.ended_at = None
                self.primus_open = True
            return
        if not self.primus_open or self.primus is None:
            return
        key = _PRIMUS_KEY_RE.search(line)
        if key is not None:
            self.primus.add(key.group(1), key.group(2).rstrip(), lineno)
        elif _DASHES_RE.search(line) and self.primus.values:
            self.primus.ended_at = lineno
            self.primus_open = False

    def result(self, limit: int, read: int) -> StatedArguments:
        notes: list[str] = []
        if self.dumps:
            chosen = self.dumps[0]
            notes += self._copies(chosen)
            complete = True
        elif self.primus is not None and self.primus.ended_at is not None:
            chosen, complete = self.primus, True
            cut = sorted([*self.cut, *self.open.values()], key=lambda b: b.start)
            missing = f"cut off at {self.file}:{cut[0].start}" if cut else "(Primus logs it at DEBUG level)"
            notes.append(
                f"no complete Megatron-LM argument dump in the first {read} lines {missing}: read Primus's "
                f"final backend args at {self.file}:{chosen.start}, the values it gives Megatron-LM before "
                "Megatron's own checks (validate_args)"
            )
        else:
            pending = sorted([*self.cut, *self.open.values()], key=lambda b: b.start)
            if self.primus is not None:
                pending.append(self.primus)
            if self.loose is not None:
                pending.append(self.loose)
            if not pending:
                return StatedArguments(file=self.file)
            chosen, complete = pending[0], False
            if chosen is self.loose:
                notes.append(
                    f"no argument block in the first {read} lines, only {len(chosen.values)} argument lines "
                    f"logged by Megatron-LM's arguments.py (a filtered log?): read those"
                )
            else:
                stop = "another block starts" if chosen in self.cut else f"the first {read} lines end"
                notes.append(
                    f"the {chosen.form} at {self.file}:{chosen.start} is cut off ({stop}): "
                    f"read its {len(chosen.values)} arguments"
                )
        if chosen.form == PRIMUS_ARGS and complete and len(chosen.values) != chosen.announced:
            notes.append(
                f"Primus announces {chosen.announced} parameters at {self.file}:{chosen.start}; "
                f"{len(chosen.values)} were read"
            )
        if read >= limit and not complete:
            notes.append(f"read the first {limit} lines only")
        notes += chosen.repeated
        return StatedArguments(
            arguments=dict(chosen.values),
            lines=dict(chosen.lines),
            file=self.file,
            start=chosen.start,
            form=chosen.form,
            complete=complete,
            notes=tuple(notes),
        )

    def _copies(self, chosen: _Block) -> list[str]:
        """Notes on the other complete copies of the dump that disagree with the first."""
        notes = []
        for copy in self.dumps[1:]:
            differ = sorted(
                name
                for name in chosen.values.keys() | copy.values.keys()
                if chosen.values.get(name) != copy.values.get(name)
            )
            if not differ:
                continue
            shown = ", ".join(
                f"{name}={copy.values.get(name, '(not printed)')} (first: {chosen.values.get(name, '(not printed)')})"
                for name in differ[:5]
            )
            more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
            notes.append(
                f"the argument dump is printed again at {self.file}:{copy.start} with other values: "
                f"{shown}{more}; kept the first, at {self.file}:{chosen.start}"
            )
        return notes


def read_arguments(lines: Iterable[str], source: str, *, limit: int = STATED_LINES) -> StatedArguments:
    """Every argument the framework printed in the first ``limit`` of ``lines`` (``source`` names the file).

    Empty (``start`` None) when the lines hold no argument block.
    """
    reader = _Reader(source)
    read = 0
    for read, line in enumerate(itertools.islice(lines, limit), 1):
        reader.feed(line, read)
        if reader.done(read):
            break
    return reader.result(limit, read)
