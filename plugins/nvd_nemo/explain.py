"""What a NeMo log with no step record most likely is (``BackendSpec.explain``).

``tprimat parse`` asks every installed backend when none finds a training iteration.
NeMo's forms without one: a NeMo 1 log that shows only Lightning's progress bar (its
values rounded to 3 significant digits; the exact ones are in DLLogger's records, which
that run did not print), a NeMo DLLogger stream that ends before its first step record,
and a DLLogger stream that is not NeMo's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

# Lightning's bar: "Epoch 0: :   5%|▌   | 1/20 [00:22<07:11, ..." (NeMo >= 1.21 adds ": ").
_BAR_RE = re.compile(r"Epoch \d+:(?: :)?\s+\d+%\|.*\d+/\d+ \[")
_NEMO_BAR_KEYS = ("reduced_train_loss=", "train_step_timing in s=", "consumed_samples=")
_ENABLE = (
    "NeMo writes the exact values with DLLogger: exp_manager.create_dllogger_logger=true with "
    "dllogger_logger_kwargs.stdout=true (DLL lines in the console log) or json_file (parse that file)"
)


def _numbered(head: Sequence[str], tail: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(where, line): the head's lines by number, then the tail's as "near the end"."""
    for number, line in enumerate(head, 1):
        yield f"line {number}", line
    for line in tail:
        yield "near the end", line


def explain_nemo(head: Sequence[str], tail: Sequence[str]) -> str | None:
    """A NeMo 1 progress bar without DLLogger records, or a DLLogger stream NeMo's reader cannot use."""
    for where, line in _numbered(head, tail):
        if line.startswith("DLLL {"):
            return _dllogger(where, [*head, *tail])
        if "%|" in line and _BAR_RE.search(line) and any(key in line for key in _NEMO_BAR_KEYS):
            return (
                f"a NeMo 1.x log with only its PyTorch Lightning progress bar ({where}): the bar rounds every "
                "value to 3 significant digits and is not a per-step record, so it is not read; " + _ENABLE
            )
    return None


def _dllogger(where: str, lines: Sequence[str]) -> str:
    stream = f"a DLLogger JSON stream ({where} starts with 'DLLL {{')"
    if any('"cfg/' in line for line in lines if line.startswith("DLLL {")):
        return (
            f"{stream} from NeMo, with its parameters (cfg/...) but no training step record: "
            "the run stopped before its first step was logged"
        )
    return (
        f"{stream} that is not NeMo's: no record has NeMo's model config (cfg/...) or step metrics "
        "(reduced_train_loss, train_step_timing in s), so no step time is read from it; tprimat reads "
        "DLLogger files written by NeMo"
    )
