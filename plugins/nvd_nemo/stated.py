"""Workload values a NeMo log states outside its step lines (``BackendSpec.stated_facts``).

Read from the start of each log file, in this order (the first form that states a key wins;
a later form that disagrees is noted):

* NeMo 1's "Experiment configuration" YAML (:mod:`~tprimat.plugins.nvd_nemo.expconfig`):
  ``trainer.devices × trainer.num_nodes`` (the world size), ``trainer.max_steps``,
  ``trainer.precision`` and the ``model`` section's batch sizes, sequence length,
  parallel sizes and ``fp8``;
* NeMo-Run's "Resolved Arguments" table (:mod:`~tprimat.plugins.nvd_nemo.runtable`);
* the start-up lines NeMo 2 prints: Lightning's ``All distributed processes registered.
  Starting with N processes`` (the world size) and Megatron's parallel-group lines
  (``Rank 0 has data parallel group : [0, 2, 4, 6]``, ``All tensor model parallel group
  ranks: [[0, 1], ...]``): a group's size is that parallel size.

The parser's own facts (DLLogger's PARAMETER record, ``MEMBER: 1/8``) keep precedence;
a log that states none of these stays silent about them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tprimat.contract.records import LogFact
from tprimat.plugins.nvd_nemo.expconfig import MARK, ConfigBlock, experiment_facts
from tprimat.plugins.nvd_nemo.runtable import TITLE, resolved_arguments, table_facts

_STARTING_RE = re.compile(r"All distributed processes registered\. Starting with (\d+) processes")
#: Megatron-init group lines -> (fact key, whether the line lists one group or all of them).
_GROUP_RES = (
    (re.compile(r"Rank \d+ has data parallel group ?: \[([\d, ]*)\]"), "data_parallel"),
    (re.compile(r"All tensor model parallel group ranks: \[\[([\d, ]*)\]"), "tensor_parallel"),
    (re.compile(r"All pipeline model parallel group ranks: \[\[([\d, ]*)\]"), "pipeline_parallel"),
    (re.compile(r"All context parallel group ranks: \[\[([\d, ]*)\]"), "context_parallel"),
)


def _config_block(lines: Sequence[str]) -> Iterator[tuple[str, Any, str, int]]:
    for index, line in enumerate(lines):
        if MARK in line:
            block = ConfigBlock(index + 1)
            for number, following in enumerate(lines[index + 1 :], index + 2):
                if not block.feed(following, number):
                    break
            yield from experiment_facts(block.values())
            return


def _startup_lines(lines: Sequence[str]) -> Iterator[tuple[str, Any, str, int]]:
    for lineno, line in enumerate(lines, 1):
        if "Starting with" in line and (match := _STARTING_RE.search(line)):
            yield "world_size", int(match.group(1)), "Lightning's 'Starting with N processes'", lineno
        elif " group" in line:
            for pattern, fact in _GROUP_RES:
                match = pattern.search(line)
                if match is not None and match.group(1).strip():
                    size = len(match.group(1).split(","))
                    yield fact, size, "Megatron's parallel-group line", lineno


def read_stated(lines: Sequence[str], source: str, parsed: Mapping[str, Any]) -> tuple[list[LogFact], list[str]]:
    """``BackendSpec.stated_facts``: what the start of one NeMo log file states, and notes."""
    forms = [("NeMo experiment configuration", _config_block(lines))]
    if any(TITLE in line for line in lines):
        forms.append(("NeMo-Run resolved arguments", table_facts(resolved_arguments(lines))))
    forms.append(("NeMo start-up line", _startup_lines(lines)))
    found: dict[str, LogFact] = {}
    notes: list[str] = []
    disagreeing: set[tuple[str, Any]] = set()
    for form, facts in forms:
        for key, value, what, lineno in facts:
            where = f"{form}, {what}, at {source}:{lineno}"
            first = found.setdefault(key, LogFact(key=key, value=value, source=where))
            if first.value != value and (key, value) not in disagreeing:
                disagreeing.add((key, value))
                notes.append(
                    f"the log states {key}={first.value} ({first.source}) and {value} ({where}): kept the first"
                )
    for key, fact in found.items():
        known = parsed.get(key)
        if known is not None and known != fact.value:
            notes.append(f"the log states {key}={fact.value} ({fact.source}) and {known} elsewhere: kept {known}")
    return list(found.values()), notes
