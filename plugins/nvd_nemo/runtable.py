"""NeMo-Run's "Resolved Arguments" table: the config a NeMo 2 task ran with, as NeMo-Run prints it.

The NeMo-Run CLI (``nemo llm pretrain --factory ...``, any ``run.cli.entrypoint`` script) and
``dryrun`` print the task's arguments before running it (``nemo_run/run/task.py``,
``dryrun_fn``) as a rich table, one row per argument, its value pretty-printed over
several rows::

    ┃ Argument Name        ┃ Resolved Value                                               ┃
    │ data                 │ MockDataModule(                                              │
    │                      │   seq_length=8192,                                           │
    │                      │   global_batch_size=512,                                     │
    │ trainer              │ Trainer(                                                     │
    │                      │   devices=8,                                                 │
    │                      │   strategy=MegatronStrategy(                                 │
    │                      │     tensor_model_parallel_size=2,                            │

:func:`resolved_arguments` reads the first table into dotted keys
(``trainer.strategy.tensor_model_parallel_size``) by the indentation of each
``name=value``.  Only arguments set on the config are printed (fiddle's repr), values
wider than the column are cut with ``…`` and are not read, and every rank under
torchrun prints its own copy (the first is read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tprimat.contract.values import typed_value
from tprimat.plugins.nvd_nemo.expconfig import precision_facts, whole

TITLE = "Resolved Arguments"
_ASSIGN_RE = re.compile(r"^( *)([A-Za-z_]\w*)=(.*?)[,)]*$")

#: Table keys -> fact keys.
TABLE_KEYS = (
    ("data.seq_length", "seq_length"),
    ("data.micro_batch_size", "micro_batch_size"),
    ("data.global_batch_size", "global_batch_size"),
    ("trainer.max_steps", "train_iters"),
    ("trainer.strategy.tensor_model_parallel_size", "tensor_parallel"),
    ("trainer.strategy.pipeline_model_parallel_size", "pipeline_parallel"),
    ("trainer.strategy.virtual_pipeline_model_parallel_size", "virtual_pipeline_parallel"),
    ("trainer.strategy.context_parallel_size", "context_parallel"),
    ("trainer.strategy.expert_model_parallel_size", "expert_parallel"),
)


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, str, str]]:
    """(line number, argument name or "", value text) for the rows of the first table."""
    titled = in_table = False
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not titled:
            titled = TITLE in line
            continue
        cells = line.split("│")
        if len(cells) >= 4:
            in_table = True
            yield lineno, cells[1].strip(), cells[2][1:].rstrip()
        elif in_table and "└" in line:
            return


def resolved_arguments(lines: Iterable[str]) -> dict[str, tuple[Any, int]]:
    """Dotted key -> (value, line number) for every whole ``name=value`` in the first table."""
    found: dict[str, tuple[Any, int]] = {}
    argument = ""
    stack: list[tuple[int, str]] = []  # (indent, name) of the objects open at this row
    for lineno, name, text in _rows(lines):
        if name:
            argument, stack = name, []
            continue
        match = _ASSIGN_RE.match(text)
        if match is None or not argument:
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([argument, *(n for _, n in stack), key])
        if text.rstrip().endswith("("):
            stack.append((indent, key))
        elif "…" not in text and "(" not in value:
            # fiddle's repr: Python's spellings; floats kept as text (only sizes and switches are read).
            found.setdefault(path, (typed_value(value, nulls=True, floats=False), lineno))
    return found


def table_facts(values: Mapping[str, tuple[Any, int]]) -> Iterator[tuple[str, Any, str, int]]:
    """(fact key, value, what states it, line) from the table's values."""
    devices, nodes = values.get("trainer.devices"), values.get("trainer.num_nodes")
    if devices and nodes and (whole(devices[0]) or 0) > 0 and (whole(nodes[0]) or 0) > 0:
        yield (
            "world_size",
            devices[0] * nodes[0],
            f"trainer devices={devices[0]} × num_nodes={nodes[0]}",
            devices[1],
        )
    for key, fact in TABLE_KEYS:
        found = values.get(key)
        if found is not None and (whole(found[0]) or 0) > 0:
            yield fact, found[0], key, found[1]
    for flag in ("bf16", "fp16"):
        found = values.get(f"optim.config.{flag}")
        if found is not None and found[0] is True:
            for fact, value in precision_facts(flag).items():
                yield fact, value, f"optim.config.{flag}=True", found[1]
