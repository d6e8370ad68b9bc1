"""NeMo's DLLogger records, as its two DLLogger backends write them.

NeMo 1's ``exp_manager.create_dllogger_logger`` hands Lightning's metrics to NVIDIA's
DLLogger (``nemo/utils/loggers/dllogger.py``), which writes each record

* to a JSON file (``dllogger_logger_kwargs.json_file``), one per line::

      DLLL {"timestamp": "1727486904.618568", "datetime": "2024-09-28 01:28:24.618568",
            "elapsedtime": "444.3", "type": "LOG", "step": 0, "data": {"reduced_train_loss": ...}}

* and/or to stdout (``dllogger_logger_kwargs.stdout``), ``key : value`` pairs separated by
  two spaces, often glued to the end of the progress bar's line::

      DLL 2025-06-12 00:02:13.549782 - 0 reduced_train_loss : 11.026606559753418  lr : 0.0  ...

The first record has ``step`` ``PARAMETER`` and the model's config as ``cfg/...`` keys
(``cfg/global_batch_size``, ``cfg/data/seq_length``); every later one is a training (or
validation) step at full precision, where the progress bar rounds to 3 significant digits.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from tprimat.contract.values import typed_value

_STDOUT_RE = re.compile(r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) - (\S+) (.*)$")
_INT_RE = re.compile(r"[-+]?\d+")
_DECODER = json.JSONDecoder()

#: The record that holds the model config.
PARAMETER = "PARAMETER"


@attrs.frozen(kw_only=True)
class Record:
    """One DLLogger record: its step (an int, or "PARAMETER"), values, and when it was written."""

    step: int | str
    data: Mapping[str, Any]
    clock_s: float | None  # seconds on the writer's clock (epoch, or local time for stdout)
    when: str | None  # ISO 8601 as written (no time zone unless the writer gave one)


def _pairs(text: str) -> dict[str, Any]:
    """``k : v  k : v `` -> {k: v}; a piece without `` : `` belongs to the value before it."""
    data: dict[str, Any] = {}
    last = None
    for piece in text.rstrip().split("  "):
        key, sep, value = piece.partition(" : ")
        if sep and key.strip():
            last = key.strip()
            data[last] = value.strip()
        elif last is not None:
            data[last] += "  " + piece
    # DLLogger prints each value as str(value): Python's spellings, None included.
    return {key: typed_value(value, nulls=True) for key, value in data.items()}


def _step(value: Any) -> int | str | None:
    if value == PARAMETER:
        return PARAMETER
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT_RE.fullmatch(value):
        return int(value)
    return None  # DeepLearningExamples' [epoch, iteration] lists, NeMo's () for no step


def read_stdout(line: str) -> Record | None:
    """The ``DLL <time> - <step> k : v  ...`` record in ``line`` (anywhere in it), or None."""
    match = _STDOUT_RE.search(line.rstrip("\r\n"))
    if match is None:
        return None
    step = _step(match.group(2))
    if step is None:
        return None
    when = match.group(1)
    clock = datetime.fromisoformat(when)
    # Local time without a zone: only differences are used, so read it as if it were UTC.
    seconds = (clock - datetime(1970, 1, 1)).total_seconds()
    return Record(step=step, data=_pairs(match.group(3)), clock_s=seconds, when=when.replace(" ", "T"))


def read_json(line: str) -> Record | None:
    """The ``DLLL {...}`` record in ``line``, or None (METADATA records and other steps)."""
    start = line.find("DLLL {")
    if start < 0:
        return None
    try:
        record, _ = _DECODER.raw_decode(line, start + 5)
    except ValueError:
        raise ValueError("not a complete DLLogger JSON record") from None
    if not isinstance(record, dict) or record.get("type") != "LOG" or not isinstance(record.get("data"), dict):
        return None
    step = _step(record.get("step"))
    if step is None:
        return None
    try:
        clock = float(record["timestamp"])
    except (KeyError, TypeError, ValueError):
        clock = None
    if clock is not None and not math.isfinite(clock):
        clock = None
    when = record.get("datetime")
    return Record(
        step=step,
        data=record["data"],
        clock_s=clock,
        when=when.replace(" ", "T") if isinstance(when, str) else None,
    )


def model_config(record: Record) -> dict[str, Any]:
    """The ``cfg/...`` values of a PARAMETER record, keyed as in NeMo's YAML (``data.seq_length``)."""
    return {key[4:].replace("/", "."): value for key, value in record.data.items() if key.startswith("cfg/")}
