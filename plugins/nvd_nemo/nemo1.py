"""NeMo 1 (``exp_manager`` + Lightning) logs: DLLogger step records, the step-timing window, NeMo's TFLOP/s.

NeMo 1 prints its metrics at full precision only through DLLogger (``DLL`` stdout lines,
or ``DLLL`` JSON files, see :mod:`~tprimat.plugins.nvd_nemo.dllogger`); its progress bar
rounds them to 3 significant digits and is never read.  Each training record becomes an
iteration (record iteration = ``global_step`` + 1, as for NeMo 2), the PARAMETER record's
model config becomes facts.

``train_step_timing in s`` is a mean over the last ``exp_manager.step_timing_kwargs.buffer_size``
steps (:mod:`~tprimat.plugins.nvd_nemo.steptiming`).  The window is read from the
"Experiment configuration" block the log prints before training; the records of one run
(from that block to the next, or to the end) are held until the run's last one, then:

* window 1 (or less): the values are per-step times, kept;
* window k > 1, one timer from its first step, no step missing, ``reduction: mean``,
  ``trainer.log_every_n_steps: 1``: the per-step times are recovered exactly (to the
  rounding bound noted) and checked against the clock; NeMo's printed means are kept as
  ``reported.train_step_timing_in_s``;
* otherwise, or when the log does not state the window: the printed values are kept, and a
  note says they are (or may be) k-step means and why they were not undone.

At the end of training NeMo prints ``TFLOPs per sec per GPU=X``: kept as the run-level fact
``reported.tflops_per_gpu`` (NeMo's own FLOP count at the mean of the second half of the
step times it logged), except ``-1.00``, which NeMo prints when the calculation failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from tprimat.contract import IterationRecord
from tprimat.contract.records import EvalRecord, LogFact, ParseIssue
from tprimat.plugins.megatron_core.lines import normal_key
from tprimat.plugins.nvd_nemo import dllogger
from tprimat.plugins.nvd_nemo.expconfig import ConfigBlock, model_facts, whole
from tprimat.plugins.nvd_nemo.steptiming import CLOCK_RESOLUTION_S, first_impossible, undo_window

Event = IterationRecord | LogFact | ParseIssue | EvalRecord

#: The step-time keys NeMo has logged ("train_step_timing" before NeMo 1.21).
STEP_TIME_KEYS = ("train_step_timing in s", "train_step_timing")
TFLOPS = "TFLOPs per sec per GPU"
_TFLOPS_RE = re.compile(r"TFLOPs per sec per GPU=(-?[\d.]+(?:[eE][-+]?\d+)?)")
TFLOPS_FAILED = "Failed to calculate TFLOPs per sec per GPU"
TIMER_RESET = "was not correctly stopped"
#: Per-step times are recovered from k-step means only while the rounding allows at most this
#: fraction of the median step time (the error bound grows with every step of the recurrence).
MAX_RECOVERY_ERROR = 0.001
#: Record keys read into fields (or dropped as counters).
_FIELDS = {
    "reduced_train_loss": "loss",
    "lr": "lr",
    "grad_norm": "grad_norm",
    "consumed_samples": "consumed_samples",
    "global_batch_size": "global_batch_size",
}
_COUNTERS = frozenset({"global_step", "epoch", "val_loss", *STEP_TIME_KEYS})
_REPORTED_NAMES = {"tokens_per_sec_per_gpu": "tokens_per_s_per_gpu"}


class Host(Protocol):
    def where(self, lineno: int) -> str: ...
    def issue(self, lineno: int, message: str) -> ParseIssue: ...
    def fact(self, key: str, value: Any, lineno: int) -> LogFact | None: ...


@attrs.frozen(kw_only=True)
class Timing:
    """How the run's TimingCallback was set up, as its printed configuration states it."""

    window: int | None = None  # exp_manager.step_timing_kwargs.buffer_size
    reduction: str | None = None
    log_every_n_steps: int | None = None
    where: str | None = None  # "file:line" of the window setting


@attrs.frozen(kw_only=True)
class Entry:
    """A training record held until its run ends."""

    lineno: int
    iteration: int
    fields: dict[str, Any]
    reported: dict[str, float | str | None]
    mean_s: float | None  # train_step_timing as printed
    clock_s: float | None


class Nemo1Reader:
    """The NeMo 1 lines of one log stream (see the module docstring)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.started = False
        self.block: ConfigBlock | None = None
        self.timing: Timing | None = None  # None: no configuration printed before these records
        self._entries: list[Entry] = []
        self._resets: list[int] = []  # lines where NeMo reset the step timer in this run
        self._runs = 0
        self._tflops_failure: tuple[int, str] | None = None
        self.awaiting_reason = False
        self._val_loss: float | None = None  # the last val_loss read
        self._json = False  # the records come from a DLLogger JSON file

    # -- lines ------------------------------------------------------------------------------

    def config_mark(self, lineno: int) -> list[Event]:
        """A new "Experiment configuration": a new process, so a new run of records."""
        events = self.flush()
        self.block = ConfigBlock(lineno)
        return events

    def config_line(self, line: str, lineno: int) -> bool:
        """Give the block a line; False when it ended before this line."""
        assert self.block is not None
        if self.block.feed(line, lineno):
            return True
        self.close_block()
        return False

    def close_block(self) -> None:
        """The configuration block ended: read the timing settings from it."""
        if self.block is not None:
            self.timing = _timing(self.block.values(), self.host)
            self.block = None

    def dll(self, line: str, lineno: int) -> list[Event] | None:
        try:
            record = dllogger.read_json(line) if "DLLL {" in line else dllogger.read_stdout(line)
        except ValueError as exc:
            return [self.host.issue(lineno, f"unreadable DLLogger record ({exc}); skipped")]
        if record is None:
            return None
        self._json = self._json or "DLLL {" in line
        if record.step == dllogger.PARAMETER:
            return self._parameters(record, lineno)
        return self._step(record, lineno)

    def timer_reset(self, line: str, lineno: int) -> None:
        if "train_step_timing" in line:
            self._resets.append(lineno)

    def tflops(self, line: str, lineno: int) -> list[Event] | None:
        if TFLOPS_FAILED in line:
            self._tflops_failure = (lineno, "")
            self.awaiting_reason = True
            return []
        match = _TFLOPS_RE.search(line)
        if match is None:
            return None
        value = float(match.group(1))
        where = self.host.where(lineno)
        if value == -1:
            reason = ""
            if self._tflops_failure is not None:
                failed_at, text = self._tflops_failure
                reason = f" ('Failed to calculate' at {self.host.where(failed_at)}{': ' + text if text else ''})"
            note = (
                f"NeMo printed '{TFLOPS}={match.group(1)}' at {where}: -1 is what NeMo prints when its FLOPs "
                f"calculation fails{reason}, not a figure; no TFLOP/s reported by NeMo is recorded"
            )
            return _present(self.host.fact("note.nemo_tflops_failed", note, lineno))
        if not value > 0:
            return [self.host.issue(lineno, f"NeMo's {TFLOPS} is {value:g}: not a figure; skipped")]
        note = (
            f"NeMo's end-of-run '{TFLOPS}={match.group(1)}' ({where}) is kept as reported.tflops_per_gpu: "
            "NeMo's FLOP formula for the model its run.name names, at the mean of the second half of the "
            "train_step_timing values it logged; never used for tprimat's TFLOP/s or MFU"
        )
        return _present(self.host.fact("reported.tflops_per_gpu", value, lineno)) + _present(
            self.host.fact("note.nemo_tflops", note, lineno)
        )

    def reason(self, line: str) -> None:
        """The line after "Failed to calculate TFLOPs...": the exception NeMo caught."""
        self.awaiting_reason = False
        if self._tflops_failure is not None:
            self._tflops_failure = (self._tflops_failure[0], line.strip()[:200])

    def window_note(self) -> str:
        """What the configuration says of the step-time values NeMo printed (for its end-of-run list)."""
        timing = self.timing
        if timing is None or timing.window is None:
            return _unknown_window([], "configured" if timing is not None else "")
        setting = f"exp_manager.step_timing_kwargs.buffer_size {timing.window} ({timing.where})"
        if timing.window <= 1:
            return f"train_step_timing is the time of each step ({setting})"
        return (
            f"train_step_timing is NeMo's mean over the last {timing.window} steps ({setting}): "
            "these are not per-step times, and rounded they cannot be undone"
        )

    # -- records ----------------------------------------------------------------------------

    def _parameters(self, record: dllogger.Record, lineno: int) -> list[Event]:
        config = dllogger.model_config(record)
        if not config:
            return []  # not NeMo's: another program's parameters
        events: list[Event] = []
        for key, value, _ in model_facts(config):
            events.extend(_present(self.host.fact(key, value, lineno)))
        if self._json:
            note = (
                "a DLLogger file records NeMo's model config only (cfg/...), not the trainer's: "
                "the number of GPUs (trainer.devices × trainer.num_nodes) is not in it; give --world-size"
            )
            events.extend(_present(self.host.fact("note.nemo_dllogger_world_size", note, lineno)))
        return events

    def _step(self, record: dllogger.Record, lineno: int) -> list[Event] | None:
        data = record.data
        try:
            step = _whole(data.get("global_step", record.step), "global_step")
            fields, reported = _fields(data)
            mean = next((_number(data[k], k) for k in STEP_TIME_KEYS if k in data), None)
        except ValueError as exc:
            return [self.host.issue(lineno, f"unreadable DLLogger step record ({exc}); skipped")]
        events: list[Event] = []
        val_loss = data.get("val_loss")
        if isinstance(val_loss, int | float) and not isinstance(val_loss, bool) and val_loss != self._val_loss:
            # Read where it first appears or changes, in case a logger repeats it on later records.
            self._val_loss = float(val_loss)
            events.append(EvalRecord(iteration=step, eval_loss=float(val_loss), source=self.host.where(lineno)))
        if mean is None and "loss" not in fields:
            return events  # a validation record
        self.started = True
        if self._entries and step + 1 <= self._entries[-1].iteration:
            events.extend(self.flush())  # the step count went back: a restart that printed no configuration
        self._entries.append(
            Entry(
                lineno=lineno,
                iteration=step + 1,
                fields={**fields, "timestamp": record.when},
                reported=reported,
                mean_s=mean,
                clock_s=record.clock_s,
            )
        )
        return events

    # -- the end of a run ------------------------------------------------------------------

    def flush(self) -> list[Event]:
        """The held records of the run that just ended, with their step times decided."""
        entries, self._entries = self._entries, []
        resets, self._resets = self._resets, []
        if not entries:
            return []
        self._runs += 1
        timed = [e for e in entries if e.mean_s is not None]
        times: dict[int, float] = {}
        note = None
        if timed:
            times, note = _decide(timed, self.timing, resets, self.host, self._json)
        events: list[Event] = []
        if note is not None:
            first, last = entries[0].iteration, entries[-1].iteration
            text = f"iterations {first}-{last}: {note}"
            events.extend(_present(self.host.fact(f"note.nemo_step_timing_{self._runs}", text, entries[0].lineno)))
        for entry in entries:
            events.append(self._record(entry, times))
        return events

    def _record(self, entry: Entry, times: Mapping[int, float]) -> Event:
        fields, reported = dict(entry.fields), dict(entry.reported)
        if entry.mean_s is not None:
            fields["step_time_s"] = times.get(entry.iteration, entry.mean_s)
            if entry.iteration in times:
                reported["train_step_timing_in_s"] = entry.mean_s
        try:
            return IterationRecord(
                iteration=entry.iteration, source=self.host.where(entry.lineno), reported=reported, **fields
            )
        except (TypeError, ValueError) as exc:
            return self.host.issue(entry.lineno, f"DLLogger step record rejected: {exc}")


def _present(fact: LogFact | None) -> list[Event]:
    return [fact] if fact is not None else []


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is {str(value)[:40]!r}")
    return float(value)


def _whole(value: Any, key: str) -> int:
    """A count Lightning logs as a float (``45.0``); a fraction is an error."""
    number = _number(value, key)
    if number != int(number) or number < 0:
        raise ValueError(f"{key} is {value!r}, not a count")
    return int(number)


def _fields(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float | str | None]]:
    fields: dict[str, Any] = {}
    reported: dict[str, float | str | None] = {}
    for key, value in data.items():
        field = _FIELDS.get(key)
        if field in ("consumed_samples", "global_batch_size"):
            fields[field] = _whole(value, key)
        elif field is not None:
            fields[field] = _number(value, key)
        elif key not in _COUNTERS and isinstance(value, int | float) and not isinstance(value, bool):
            reported[_REPORTED_NAMES.get(key, normal_key(key))] = float(value)
    return fields, reported


def _timing(values: Mapping[str, tuple[Any, int]], host: Host) -> Timing:
    window = values.get("exp_manager.step_timing_kwargs.buffer_size")
    reduction = values.get("exp_manager.step_timing_kwargs.reduction")
    every = values.get("trainer.log_every_n_steps")
    return Timing(
        window=whole(window[0]) if window else None,
        reduction=str(reduction[0]) if reduction else None,
        log_every_n_steps=whole(every[0]) if every else None,
        where=host.where(window[1]) if window else None,
    )


def _decide(
    timed: list[Entry], timing: Timing | None, resets: list[int], host: Host, json_file: bool = False
) -> tuple[dict[int, float], str | None]:
    """The recovered step times by iteration ({} to keep the printed values) and the note saying why."""
    if timing is None or timing.window is None:
        return {}, _unknown_window(timed, "configured" if timing is not None else "json" if json_file else "")
    k = timing.window
    setting = f"exp_manager.step_timing_kwargs.buffer_size {k} ({timing.where})"
    if k <= 1:
        return {}, f"train_step_timing is the time of each step ({setting})"
    kept = (
        f"train_step_timing is NeMo's mean over the last {k} steps ({setting}): "
        "the printed values are kept as the step times and are not per-step times"
    )
    blocker = _blocker(timed, timing, resets, host)
    if blocker is not None:
        return {}, f"{kept}; not undone: {blocker}"
    undone = undo_window([e.mean_s for e in timed if e.mean_s is not None], k)
    middle = sorted(undone.times_s)[len(undone.times_s) // 2] if undone.times_s else 0.0
    if undone.error_s > MAX_RECOVERY_ERROR * middle:
        # The bound grows with every step of the recurrence: a long run's later steps are not exact.
        return {}, (
            f"{kept}; not undone: the rounding of the printed means allows ±{undone.error_s:.1e} s by the last "
            f"step, more than {MAX_RECOVERY_ERROR:.1%} of the median step"
        )
    intervals = [None] + [_interval(a, b) for a, b in zip(timed, timed[1:], strict=False)]
    impossible = first_impossible(undone.times_s, intervals, undone.error_s)
    if impossible is not None:
        index, why = impossible
        return {}, f"{kept}; not undone: iteration {timed[index].iteration} {why}"
    times = {e.iteration: t for e, t in zip(timed, undone.times_s, strict=True)}
    return times, (
        f"train_step_timing is NeMo's mean over the last {k} steps ({setting}): per-step times recovered "
        f"from consecutive means (t_n = {k}·(m_n - m_n-1) + t_n-{k}; the first {k} from the running mean), "
        f"exact to ±{undone.error_s:.1e} s (the rounding of the printed means), each no longer than the time "
        "between its record and the previous; NeMo's means kept as reported.train_step_timing_in_s"
    )


def _blocker(timed: list[Entry], timing: Timing, resets: list[int], host: Host) -> str | None:
    """Why the means of this run cannot be undone exactly, or None."""
    if timing.reduction not in (None, "mean"):
        return f"step_timing_kwargs.reduction is {timing.reduction}, not a mean"
    if timing.log_every_n_steps not in (None, 1):
        return f"trainer.log_every_n_steps is {timing.log_every_n_steps}: not every step's mean is logged"
    for before, after in zip(timed, timed[1:], strict=False):
        if after.iteration != before.iteration + 1:
            return f"no step record between iterations {before.iteration} and {after.iteration}"
    if resets:
        return f"NeMo reset its step timer at {host.where(resets[0])}"
    return None


def _interval(before: Entry, after: Entry) -> float | None:
    if before.clock_s is None or after.clock_s is None:
        return None
    return after.clock_s - before.clock_s


#: Why the step-timing window is unknown, by what the log holds.
_UNSTATED = {
    "configured": "its printed configuration has no exp_manager.step_timing_kwargs.buffer_size",
    "json": "a DLLogger file does not record it (only the model config)",
    "": "the log prints no NeMo experiment configuration before these records",
}


def _unknown_window(timed: list[Entry], why: str) -> str:
    note = (
        "train_step_timing is NeMo's mean over the last exp_manager.step_timing_kwargs.buffer_size steps, "
        f"and {_UNSTATED[why]}: whether these are per-step times is unknown; kept as printed"
    )
    for before, after in zip(timed, timed[1:], strict=False):
        interval = _interval(before, after)
        if interval is not None and after.mean_s is not None and after.mean_s > interval + CLOCK_RESOLUTION_S:
            return (
                f"{note}. They are not all per-step times: at iteration {after.iteration} the value "
                f"({after.mean_s:.6g} s) is longer than the {interval:.6g} s between its record and the previous one"
            )
    return note
