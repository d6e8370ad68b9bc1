"""What a Megatron-family log with no training iteration most likely is (``BackendSpec.explain``).

``tprimat parse`` asks every installed backend when no backend finds an iteration
line; these say what the family's own formats look like without one: a start-up
log cut before iteration 1, Primus's end-of-run summary lines on their own, and
a TorchTitan log that shows no sign of Primus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tprimat.plugins.megatron.sniff import TORCHTITAN_STEP_RE

_START_RE = re.compile(
    r"\[before the start of training step\]|^-+ arguments -+$|building GPT model|> building .* tokenizer"
)


def explain_megatron(head: Sequence[str], tail: Sequence[str]) -> str | None:
    """A Megatron-LM start-up log (argument dump, model building) with no iteration line."""
    if any(_START_RE.search(line) for line in head):
        return (
            "a Megatron-LM start-up log that ends before the first iteration line (the run stopped or the log was cut)"
        )
    return None


def explain_primus(head: Sequence[str], tail: Sequence[str]) -> str | None:
    """Primus's end-of-run lines alone, or a TorchTitan log without Primus's signs; else as Megatron-LM."""
    if any("[EarlyStop]" in line or "[TimeToTrain]" in line for line in tail):
        return (
            "Primus's end-of-run summary lines ([EarlyStop]/[TimeToTrain]) without the "
            "iteration lines: an excerpt of a log, not the log; parse the full console log"
        )
    for number, line in enumerate(head, 1):
        if TORCHTITAN_STEP_RE.search(line):
            return (
                f"a TorchTitan log (line {number}: 'step: ... loss: ... tps: ...') with no sign of Primus "
                "or ROCm: amd_primus reads TorchTitan only as Primus's engine; if it is one, pass "
                "--backend amd_primus"
            )
    return None
