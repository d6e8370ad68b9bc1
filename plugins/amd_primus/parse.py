"""Primus training logs: the three generations of its per-iteration line.

(A) the legacy trainer line (``trainer.py``), with ``hip mem usage`` before
``throughput per GPU (TFLOP/s/GPU): X/Y | tokens per GPU (tokens/s/GPU): X/Y``;
(B) upstream Megatron logging with Primus patches, at DEBUG level, Megatron's
own timestamp inside, memory segments (``hip mem usage``, ``rocm mem
usage``, ``rank-N rocm max mem usage``) at the end, and the first
iterations printed without the ``/avg`` half and without tokens;
(C) ``compute per GPU (TFLOP/s/GPU): X (avg Y)`` and ``tokens/s/GPU
inst/harmonic mean: X/Y``.  All three are Megatron ``key: value |`` lines, so
the shared parser reads them (a run of them at once, as ``titanlane.py`` reads
TorchTitan's step lines); this module adds Primus's own lines (its argument
listing, the throughput extension's settings, the GPU its launcher detected), the
step lines of Primus's TorchTitan engine (``torchtitan.py``), and the end lines of
its MLPerf mode: ``[EarlyStop] ... eval_loss: X (target: T) | consumed_train_samples: N
| duration: S sec`` as an evaluation timed by Primus's own clock, ``[TimeToTrain] status: ...``
as facts.

Primus prints memory computed as ``bytes / 1024**3`` with a "GB" label; the
values are recorded as GiB and a fact notes the label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from tprimat.contract.records import EvalRecord, IterationRecord
from tprimat.contract.values import typed_value
from tprimat.plugins.amd_primus.titanlane import PrimusLanes, TitanLane
from tprimat.plugins.amd_primus.torchtitan import TorchTitanSteps
from tprimat.plugins.megatron.logparse import FACT_ARGUMENTS, MegatronLogParser
from tprimat.plugins.megatron_core.colour import strip_ansi
from tprimat.plugins.megatron_core.lines import Event, LineError, parse_float
from tprimat.plugins.megatron_core.stream import iter_events

_PRIMUS_ARG_RE = re.compile(r":\s+([A-Za-z_][A-Za-z0-9_]*)\s+: (.*?) \((?:int|bool|str|float|list|dict|NoneType)\)\s*$")
_EXTENSION_RE = re.compile(r"initialized with seq_len: (\d+) world_size: (\d+)")
_GPU_MODEL_RE = re.compile(r"Detected GPU model: (\S+)")
_EARLY_STOP_RE = re.compile(
    r"\[EarlyStop\].*?eval_loss:\s*(\S+).*?consumed_train_samples:\s*(\d+)\s*\|\s*duration:\s*(\S+) sec"
)
_TIME_TO_TRAIN_RE = re.compile(r"\[TimeToTrain\] status:\s*(\w+).*?duration:\s*(\S+) sec")


class PrimusLogParser(MegatronLogParser):
    name = "primus"
    # Kept short: every start-up line is tested against each of these.  Primus's typed
    # argument listing is read for integers only; the boolean precision flags also appear in
    # Megatron's own argument dump (" ...."), which Primus prints at DEBUG level.
    triggers = (
        *MegatronLogParser.triggers,
        "(int)",
        "initialized with seq_len",
        "Detected GPU model",
        "tps:",
        "[EarlyStop]",
        "[TimeToTrain]",
    )
    running_triggers = MegatronLogParser.running_triggers
    #: Looked for during training once the log shows a sign of them (each costs a scan of the log):
    #: TorchTitan step lines once one was read, MLPerf end lines once an evaluation was read.
    _TITAN_TRIGGERS = ("tps:",)
    _MLPERF_TRIGGERS = ("[EarlyStop]", "[TimeToTrain]")

    def __init__(self, source: str) -> None:
        super().__init__(source)
        self._titan = TorchTitanSteps(self.where)  # the engine's step lines, if the log has any
        # Runs of iteration lines, and of TorchTitan step lines, read at once (see titanlane.py).
        self.fast_lane = PrimusLanes(self.fast_lane, TitanLane(self))

    def feed(self, line: str, lineno: int) -> list[Event] | None:
        events = super().feed(line, lineno)
        # An iteration line gives one record: told apart before looking for an evaluation.
        if (
            events
            and (len(events) > 1 or type(events[0]) is not IterationRecord)
            and "[EarlyStop]" not in self.running_triggers
            and any(isinstance(e, EvalRecord) for e in events)
        ):
            self.running_triggers = (*self.running_triggers, *self._MLPERF_TRIGGERS)
        return events

    def copy_of(self, line: bytes) -> tuple[list[Event] | None, bytes | None]:
        """Also another rank's copy of the TorchTitan step just read: it gives nothing and
        changes nothing (see ``TorchTitanSteps.repeats``)."""
        # Only once a step line was read (its trigger is then looked for) can a line repeat one.
        if "tps:" in self.running_triggers and b"tps:" in line and self._titan.repeats(line):
            return [], None
        return super().copy_of(line)

    def state(self) -> tuple:
        return (*super().state(), self.running_triggers, self._titan.state())

    def resume(self, state: tuple) -> None:
        *base, self.running_triggers, titan = state
        super().resume(tuple(base))
        self._titan.resume(titan)

    def extra_line(self, line: str, lineno: int) -> list[Event] | None:
        if "tps:" in line:  # Primus's TorchTitan engine (see torchtitan.py)
            found = self._titan.feed(line, lineno)
            if found is not None:
                # A step line is the training loop logging, as an iteration line is: the start-up
                # lines are over, and step lines are looked for from here on.
                if "tps:" not in self.running_triggers:
                    self.running_triggers = (*self.running_triggers, *self._TITAN_TRIGGERS)
                self.started = self.started or any(isinstance(e, IterationRecord) for e in found)
                return found
        if "(int)" in line:
            match = _PRIMUS_ARG_RE.search(strip_ansi(line).rstrip())
            if match is not None:
                key = FACT_ARGUMENTS.get(match.group(1))
                if key is None or match.group(2) == "None":
                    return []
                fact = self.fact(key, typed_value(match.group(2)), lineno)
                return [fact] if fact is not None else []
        if "initialized with seq_len" in line:
            match = _EXTENSION_RE.search(line)
            if match is not None:
                facts = [
                    self.fact("seq_length", int(match.group(1)), lineno),
                    self.fact("world_size", int(match.group(2)), lineno),
                ]
                return [f for f in facts if f is not None]
        if "Detected GPU model" in line:
            # What Primus's launcher says about the machine: a fact about the log, not the
            # result's hardware (which only a run manifest provides).
            match = _GPU_MODEL_RE.search(strip_ansi(line))
            if match is not None:
                fact = self.fact("device_name_in_log", match.group(1), lineno)
                return [fact] if fact is not None else []
        if "[EarlyStop]" in line or "[TimeToTrain]" in line:
            return self._mlperf_end(strip_ansi(line), lineno)
        return super().extra_line(line, lineno)

    def _mlperf_end(self, line: str, lineno: int) -> list[Event] | None:
        """Primus's MLPerf-mode end lines: the evaluation that stopped training, and the status."""
        try:
            stop = _EARLY_STOP_RE.search(line)
            if stop is not None:
                return [
                    EvalRecord(
                        eval_loss=parse_float(stop.group(1)),
                        samples=int(stop.group(2)),
                        time_s=parse_float(stop.group(3)),
                        source=self.where(lineno),
                    )
                ]
            done = _TIME_TO_TRAIN_RE.search(line)
            if done is not None:
                facts = [
                    self.fact("convergence_status", done.group(1), lineno),
                    self.fact("run_time_s", parse_float(done.group(2)), lineno),
                ]
                return [f for f in facts if f is not None]
        except LineError as exc:
            return [self.issue(lineno, f"unreadable Primus MLPerf line ({exc}); skipped")]
        return None


def parse_primus(lines: Iterable[str], source: str) -> Iterator[Event]:
    """Events from a Primus log (a console log or one rank's ``{debug,info}.log``)."""
    return iter_events(PrimusLogParser(source), lines)
