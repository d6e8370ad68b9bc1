"""NeMo 1's printed experiment configuration, and the workload values a NeMo model config states.

NeMo 1's training scripts (``megatron_gpt_pretraining.py`` and copies of it) log their whole
Hydra config before training::

    [NeMo I 2025-06-12 00:00:12 nemo_logging:393]
        ************** Experiment configuration ***********
    [NeMo I 2025-06-12 00:00:12 nemo_logging:393]
        run:
          name: llama3_8b_8GPU_TP1_PP1_CP1_VP1_GBS128_MBS2
        trainer:
          devices: 8
        ...

:class:`ConfigBlock` gathers that YAML line by line (a streaming parser needs
``exp_manager.step_timing_kwargs`` before the first step) and reads it with the YAML
library, keeping each key's line.  Interpolations (``${model.tensor_model_parallel_size}``)
are left as text and never read as values.  The same log also prints exp_manager's
*schema* (``{'step_timing_kwargs': {'buffer_size': 1}, ...}``): those are defaults, not
the run's values, and are not read.

:func:`model_facts` maps a model config (this YAML's ``model`` section, or DLLogger's
``cfg/...`` record) to tprimat's fact keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: The line that opens the block (the scripts print it; the YAML follows under a new log header).
MARK = "************** Experiment configuration ***********"
#: NeMo indents the lines of a multi-line log message by this much.
INDENT = "    "

#: Model-config keys (dotted) -> fact keys; for seq_length the first stated wins.
MODEL_KEYS = (
    ("global_batch_size", "global_batch_size"),
    ("micro_batch_size", "micro_batch_size"),
    ("encoder_seq_length", "seq_length"),
    ("data.seq_length", "seq_length"),
    ("tensor_model_parallel_size", "tensor_parallel"),
    ("pipeline_model_parallel_size", "pipeline_parallel"),
    ("virtual_pipeline_model_parallel_size", "virtual_pipeline_parallel"),
    ("context_parallel_size", "context_parallel"),
    ("expert_model_parallel_size", "expert_parallel"),
    ("fp8", "fp8"),
)


def whole(value: Any) -> int | None:
    """``value`` if it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def precision_facts(value: Any) -> dict[str, Any]:
    """Lightning's precision setting (``bf16``, ``bf16-mixed``, ``16-mixed``, ``16``) as the bf16/fp16 facts."""
    text = str(value).lower()
    if text.startswith("bf16"):
        return {"bf16": True}
    if text in ("16", "16-mixed", "fp16", "16-true"):
        return {"fp16": True}
    return {}


def model_facts(config: Mapping[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(fact key, value, config key) for the workload values a NeMo model config states."""
    seen: set[str] = set()
    for key, fact in MODEL_KEYS:
        value = config.get(key)
        if fact in seen or value is None:
            continue
        if fact == "fp8":
            if isinstance(value, bool):
                seen.add(fact)
                yield fact, value, key
        elif whole(value) is not None and value > 0:
            seen.add(fact)
            yield fact, value, key
    if "precision" in config:
        for fact, value in precision_facts(config["precision"]).items():
            yield fact, value, "precision"


class ConfigBlock:
    """The YAML of one "Experiment configuration" block, gathered line by line.

    Feed the lines after the :data:`MARK` line; :meth:`feed` returns False at the first
    line that is not part of the block (which the caller then reads as usual).
    """

    def __init__(self, mark_line: int) -> None:
        self.mark_line = mark_line
        self._prefix: str | None = None  # what precedes the log header: "", or srun's "0: "
        self._first: int | None = None  # line number of the first YAML line
        self._lines: list[str] = []

    def feed(self, line: str, lineno: int) -> bool:
        text = line.rstrip("\r\n")
        if self._prefix is None:
            if not text.strip():
                return True
            header = text.find("[NeMo ")
            if header < 0:
                return False
            self._prefix = text[:header]
            return True
        if not text.strip():
            return True
        if not text.startswith(self._prefix + INDENT):
            return False
        if self._first is None:
            self._first = lineno
        self._lines.append(text[len(self._prefix) + len(INDENT) :])
        return True

    def values(self) -> dict[str, tuple[Any, int]]:
        """Dotted key -> (value, line number) for every scalar in the block; {} if it is not YAML."""
        if not self._lines or self._first is None:
            return {}
        import yaml

        loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        loader = loader_class("\n".join(self._lines) + "\n")
        try:
            root = loader.get_single_node()
            found: dict[str, tuple[Any, int]] = {}
            _flatten(loader, root, "", self._first, found)
            return found
        except yaml.YAMLError:
            return {}
        finally:
            loader.dispose()


def _flatten(loader: Any, node: Any, path: str, first: int, found: dict[str, tuple[Any, int]]) -> None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        key = f"{path}.{key_node.value}" if path else str(key_node.value)
        if isinstance(value_node, yaml.MappingNode):
            _flatten(loader, value_node, key, first, found)
        elif isinstance(value_node, yaml.ScalarNode):
            value = loader.construct_object(value_node)
            if isinstance(value, str) and "${" in value:
                continue  # an interpolation, not a value
            found.setdefault(key, (value, first + key_node.start_mark.line))


def experiment_facts(values: Mapping[str, tuple[Any, int]]) -> Iterator[tuple[str, Any, str, int]]:
    """(fact key, value, what states it, line) from a block's values."""
    devices, nodes = values.get("trainer.devices"), values.get("trainer.num_nodes")
    if devices and nodes and (whole(devices[0]) or 0) > 0 and (whole(nodes[0]) or 0) > 0:
        yield (
            "world_size",
            devices[0] * nodes[0],
            f"trainer.devices {devices[0]} × trainer.num_nodes {nodes[0]}",
            devices[1],
        )
    steps = values.get("trainer.max_steps")
    if steps and (whole(steps[0]) or 0) > 0:
        yield "train_iters", steps[0], "trainer.max_steps", steps[1]
    model = {key[6:]: value for key, (value, _) in values.items() if key.startswith("model.")}
    for fact, value, key in model_facts({k: v for k, v in model.items() if k != "precision"}):
        yield fact, value, f"model.{key}", values[f"model.{key}"][1]
    precision = values.get("trainer.precision")
    if precision is not None:
        for fact, value in precision_facts(precision[0]).items():
            yield fact, value, f"trainer.precision {precision[0]}", precision[1]
