"""Megatron-core's own checks on a Megatron-family plan, run on the CPU before any GPU is spent.

tprimat's settings (:func:`tprimat.plugins.megatron.settings.build_settings`) are
Megatron-LM argument destinations.  At launch, Megatron-LM turns them into
megatron-core configuration objects whose ``__post_init__`` refuses what the
library cannot run, and its model sets Transformer Engine's attention switches
from ``--attention-backend``, asserting that the environment does not contradict
it.  :func:`check_with_megatron_core` builds the same objects from the settings
and the plan's environment with the installed megatron-core and reports every
refusal in megatron-core's own words, so a plan that would die at start-up on
eight GPUs is caught here.  It never reimplements a check: it calls megatron-core.

What runs, in this order (each named in :attr:`CoreCheck.checked`):

* ``TransformerConfig.__post_init__`` (with ``ModelParallelConfig``'s): heads,
  query groups and tensor parallelism, sequence parallelism, recomputation,
  fp8, activation fusion, pipeline dtype;
* ``DistributedDataParallelConfig.__post_init__`` and the optimizer config's
  (``AdamOptimizerConfig`` for ``optimizer = "adam"``, as Megatron-LM picks it);
* ``LanguageModule._set_attention_backend``: for ``flash`` it asserts that
  ``NVTE_FLASH_ATTN`` is unset or ``1`` and ``NVTE_FUSED_ATTN`` and
  ``NVTE_UNFUSED_ATTN`` are unset or ``0`` (and likewise for the other backends;
  ``auto`` wants all three unset or ``1``), then sets them; the values it leaves
  are :attr:`CoreCheck.env_after`;
* ``parallel_state.initialize_model_parallel`` on ``world_size`` ranks of torch's
  fake process group (no devices, no communication): the world size must divide
  into tensor × pipeline × context parallel groups;
* ``ConstantNumMicroBatchesCalculator``: the global batch must divide into micro
  batches × data-parallel ranks.

All of them run under a temporary ``os.environ`` equal to the plan's environment
(restored afterwards, always).  That environment is what tprimat sets; variables
the launch machine or a framework's own launcher (Primus's ``base_env.sh``) add
are not known here.

What is not checked here:

* ``apply_rope_fusion = True`` on a machine without Transformer Engine:
  ``TransformerConfig`` checks that TE's fused RoPE kernel imports (TE >= 1.4).
  The config is then checked with the fusion off, so the checks after it still
  run, and :attr:`CoreCheck.unchecked` says so (it is not a problem of the plan);
* checks megatron-core makes only when it builds Transformer Engine layers
  (e.g. ``NVTE_APPLY_QK_LAYER_SCALING`` against ``apply_query_key_layer_scaling``
  in ``TEDotProductAttention``): no model is built here;
* Megatron-LM's own ``validate_args`` (it is not part of megatron-core).

None of the checks needs CUDA.  The fake process group comes from torch's test
utilities (``torch.testing._internal.distributed.fake_pg``); where torch lacks it,
or where ``torch.distributed`` is already initialised in this process, the layout
check is recorded as unchecked and the batch check uses
``world_size // (tensor × pipeline × context)``, Megatron-LM's data-parallel size.

Without megatron-core, :func:`check_with_megatron_core` raises
:class:`MegatronCoreMissingError`: a verdict nobody computed is not a verdict.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import os
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from tprimat.errors import TprimatError
from tprimat.plugins.megatron.framework import MEGATRON_LM_DEFAULTS


class MegatronCoreMissingError(TprimatError):
    """megatron-core cannot be imported here, so nothing was checked."""


@attrs.frozen(kw_only=True)
class CoreCheck:
    """megatron-core's verdict on one plan.

    ``problems``: one line each, ``<check>: <settings>: <megatron-core's message>``.
    ``checked``: the megatron-core checks that ran.  ``unchecked``: those that could
    not run here, and why.  ``env_after``: the ``NVTE_*`` variables as
    ``_set_attention_backend`` leaves them (what Transformer Engine will see).
    ``warnings``: what megatron-core warned while checking.  ``adjusted``: settings
    a configuration object changed on its own (``field: given -> kept``).
    """

    accepted: bool
    problems: tuple[str, ...]
    megatron_core_version: str
    checked: tuple[str, ...]
    unchecked: tuple[str, ...] = ()
    env_after: dict[str, str] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()
    adjusted: tuple[str, ...] = ()


# -- from Megatron-LM arguments to megatron-core fields ------------------------------------


def _precision(bf16: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    dtype = torch.bfloat16 if bf16 else torch.float32
    return {"bf16": bool(bf16), "params_dtype": dtype, "pipeline_dtype": dtype}


def _activation(swiglu: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    import torch.nn.functional as F

    if swiglu:
        return {
            "gated_linear_unit": True,
            "activation_func": F.silu,
            "bias_activation_fusion": bool(settings.get("bias_swiglu_fusion", True)),
        }
    # GeLU's bias fusion is on unless --no-bias-gelu-fusion; validate_args turns it off without biases
    return {"bias_activation_fusion": bool(settings.get("add_bias_linear", True))}


def _attention_backend(name: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    from megatron.core.transformer.enums import AttnBackend

    try:
        return {"attention_backend": AttnBackend[name]}
    except KeyError:
        raise ValueError(
            f"attention_backend {name!r} is not one of megatron-core's {', '.join(b.name for b in AttnBackend)}"
        ) from None


#: Destinations that reach megatron-core under another name or type, as Megatron-LM's
#: ``validate_args`` and ``core_transformer_config_from_args`` translate them.  Every other
#: destination that names a field of a configuration class is copied unchanged (Megatron-LM
#: copies every argument whose name is a field); the rest (data, schedule, logging, and
#: GPTModel arguments such as ``rotary_base`` or ``untie_embeddings_and_output_weights``)
#: belong to no configuration object.
TRANSLATED: dict[str, Callable[[Any, Mapping[str, Any]], dict[str, Any]]] = {
    # --norm-epsilon
    "norm_epsilon": lambda value, settings: {"layernorm_epsilon": value},
    # --bf16 chooses params_dtype (validate_args), which is also the pipeline dtype
    "bf16": _precision,
    # --swiglu: gated SiLU, fused with its bias unless --no-bias-swiglu-fusion
    "swiglu": _activation,
    # --num-query-groups counts only with --group-query-attention
    "group_query_attention": lambda value, settings: {
        "num_query_groups": settings.get("num_query_groups") if value else None
    },
    # --attention-backend parses to the AttnBackend enum
    "attention_backend": _attention_backend,
    # validate_args: rope fusion only with rotary embeddings
    "position_embedding_type": lambda value, settings: {} if value == "rope" else {"apply_rope_fusion": False},
}

#: What Megatron-LM passes to megatron-core from arguments tprimat never renders, at their
#: defaults (core_v0.16; the rest of Megatron-LM's defaults are
#: :data:`tprimat.plugins.megatron.framework.MEGATRON_LM_DEFAULTS`, applied first).
UNRENDERED: dict[str, Any] = {
    "persist_layer_norm": True,  # not --no-persist-layer-norm
    "overlap_p2p_comm": True,  # --no-overlap-p2p-communication
    "batch_p2p_comm": False,  # not overlap_p2p_comm
    "deallocate_pipeline_outputs": True,
    "cp_comm_type": "p2p",  # --cp-comm-type p2p, a list of one
    "cuda_graph_scope": [],  # --cuda-graph-scope (core 0.15's "full" is deprecated in 0.16)
}


def megatron_arguments(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """Megatron-LM's namespace for ``settings``, and each name's origin (the destinations it comes from).

    Megatron-LM's defaults first, then the settings, then :data:`TRANSLATED`.  Raises
    ``ValueError`` for a value megatron-core cannot take (an unknown attention backend).
    """
    defaults = copy.deepcopy({**MEGATRON_LM_DEFAULTS, **UNRENDERED})
    arguments: dict[str, Any] = {**defaults, **settings}
    origin: dict[str, tuple[str, ...]] = {name: (name,) for name in arguments}
    for dest, translate in TRANSLATED.items():
        if dest in settings:
            fields = translate(settings[dest], settings)
            arguments.update(fields)
            origin.update((name, (dest, name) if name in settings and name != dest else (dest,)) for name in fields)
    return arguments, origin


def _fields_of(cls: type, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments named like a field of ``cls`` (Megatron-LM's ``dataclasses.fields`` copy)."""
    return {f.name: arguments[f.name] for f in dataclasses.fields(cls) if f.init and f.name in arguments}


# -- running the checks --------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or f"{type(exc).__name__} (no message)"


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` is exactly ``env`` inside, and what it was afterwards."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _Findings:
    """What the checks found, collected as they run."""

    def __init__(self, origin: Mapping[str, tuple[str, ...]]) -> None:
        self.origin = origin
        self.problems: list[str] = []
        self.checked: list[str] = []
        self.unchecked: list[str] = []
        self.warnings: list[str] = []
        self.adjusted: list[str] = []

    def settings_in(self, message: str, given: Iterable[str]) -> list[str]:
        """The settings behind the ``given`` names that a message mentions, as destinations.

        A name counts as written (``recompute_method``) or in words at the start of a word
        (``sequence_parallel`` in "sequence parallelism").
        """
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
        text = message.lower()

        def mentioned(name: str) -> bool:
            return name in words or re.search(r"(?<![a-z0-9])" + re.escape(name.replace("_", " ")), text) is not None

        return sorted({dest for name in given if mentioned(name) for dest in self.origin.get(name, (name,))})

    def refuse(self, check: str, message: str, named: list[str]) -> None:
        self.problems.append(f"{check}: {', '.join(named)}: {message}" if named else f"{check}: {message}")

    def run(self, check: str, call: Callable[[], Any], given: Iterable[str], named: list[str] | None = None) -> Any:
        """Call one megatron-core check; its refusal becomes a problem, its warnings are kept.

        A problem names the settings in ``named``, or else those behind the ``given`` argument
        names that megatron-core's message mentions.
        """
        self.checked.append(check)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return call()
            except Exception as exc:  # megatron-core refuses with ValueError, AssertionError, RuntimeError
                message = _one_line(exc)
                self.refuse(check, message, self.settings_in(message, given) if named is None else named)
                return None
            finally:
                for warning in caught:
                    line = f"{check}: {' '.join(str(warning.message).split())}"
                    if line not in self.warnings:
                        self.warnings.append(line)

    def compare(self, name: str, given: Mapping[str, Any], built: Any) -> None:
        """Note each value a configuration object kept differently from how it was given."""
        for field, value in given.items():
            kept = getattr(built, field, value)
            if value is not None and not callable(value) and kept != value:
                self.adjusted.append(
                    f"{name}.{field} ({', '.join(self.origin.get(field, (field,)))}): {value!r} -> {kept!r}"
                )


def _core() -> types.SimpleNamespace:
    """The megatron-core names the checks call (its import warns about TE and Apex: silenced)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("megatron.core")
            from megatron.core import parallel_state
            from megatron.core.distributed import DistributedDataParallelConfig
            from megatron.core.models.common.embeddings import rope_utils
            from megatron.core.models.common.language_module.language_module import LanguageModule
            from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
            from megatron.core.optimizer import optimizer_config
            from megatron.core.package_info import __version__
            from megatron.core.transformer.transformer_config import TransformerConfig
    except ImportError as exc:
        raise MegatronCoreMissingError(
            f"megatron-core cannot be imported here ({exc}); install the megatron-core release the plan "
            "targets (pip install megatron-core) to check a Megatron-family plan before launching it"
        ) from exc
    return types.SimpleNamespace(
        version=__version__,
        TransformerConfig=TransformerConfig,
        DistributedDataParallelConfig=DistributedDataParallelConfig,
        optimizer_config=optimizer_config,
        LanguageModule=LanguageModule,
        parallel_state=parallel_state,
        ConstantNumMicroBatchesCalculator=ConstantNumMicroBatchesCalculator,
        rope_utils=rope_utils,
    )


def _without_transformer_engine(core: types.SimpleNamespace, fields: dict[str, Any], found: _Findings) -> None:
    """Turn off, and record, what ``TransformerConfig`` can only accept with Transformer Engine installed."""
    rope = core.rope_utils
    if fields.get("apply_rope_fusion") and rope.fused_apply_rotary_pos_emb is None:
        if rope.fused_apply_rotary_pos_emb_thd is None:
            fields["apply_rope_fusion"] = False
            found.unchecked.append(
                "TransformerConfig.__post_init__: apply_rope_fusion needs Transformer Engine's fused RoPE "
                "(TE >= 1.4), which is not installed here; the rest was checked with the fusion off"
            )


def _transformer_config(core: types.SimpleNamespace, arguments: Mapping[str, Any], found: _Findings) -> Any:
    fields = _fields_of(core.TransformerConfig, arguments)
    _without_transformer_engine(core, fields, found)
    config = found.run("TransformerConfig.__post_init__", lambda: core.TransformerConfig(**fields), fields)
    if config is not None:
        found.compare("TransformerConfig", fields, config)
    return config


def _optimizer_config(core: types.SimpleNamespace, arguments: Mapping[str, Any], found: _Findings) -> None:
    module = core.optimizer_config
    classes = {"adam": "AdamOptimizerConfig", "sgd": "SGDOptimizerConfig"}
    cls = getattr(module, classes.get(arguments.get("optimizer", "adam"), "OptimizerConfig"), module.OptimizerConfig)
    fields = _fields_of(cls, arguments)
    built = found.run(f"{cls.__name__}.__post_init__", lambda: cls(**fields), fields)
    if built is not None:
        found.compare(cls.__name__, fields, built)


def _attention_environment(
    core: types.SimpleNamespace, config: Any, arguments: Mapping[str, Any], found: _Findings
) -> None:
    """``LanguageModule._set_attention_backend`` on the config (or, if it was refused, its backend alone)."""
    check = "LanguageModule._set_attention_backend"
    if config is None:
        if "attention_backend" not in arguments:
            found.unchecked.append(f"{check}: no TransformerConfig and no attention_backend to run it with")
            return
        config = types.SimpleNamespace(attention_backend=arguments["attention_backend"])
    model = types.SimpleNamespace(config=config)  # the method reads only self.config.attention_backend
    before = dict(os.environ)
    found.checked.append(check)
    try:
        core.LanguageModule._set_attention_backend(model)
    except AssertionError as exc:
        message = _one_line(exc)
        variables = sorted(set(re.findall(r"NVTE_[A-Z_]+", message)) & set(before))
        environment = [f"{name}={before[name]}" for name in variables]
        backend = getattr(config.attention_backend, "name", config.attention_backend)
        found.refuse(check, message, [f"attention_backend={backend}", *environment])


def _layout(core: types.SimpleNamespace, settings: Mapping[str, Any], world_size: int, found: _Findings) -> int | None:
    """Megatron-core's process-group layout on ``world_size`` fake ranks; the data-parallel size."""
    check = "parallel_state.initialize_model_parallel"
    import torch.distributed as dist

    sizes = {
        "tensor_model_parallel_size": int(settings.get("tensor_model_parallel_size") or 1),
        "pipeline_model_parallel_size": int(settings.get("pipeline_model_parallel_size") or 1),
        "context_parallel_size": int(settings.get("context_parallel_size") or 1),
    }
    model_size = sizes["tensor_model_parallel_size"] * sizes["pipeline_model_parallel_size"]
    model_size *= sizes["context_parallel_size"]
    fallback = world_size // model_size if world_size % model_size == 0 else None
    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except ImportError:
        found.unchecked.append(f"{check}: this torch has no fake process group to lay {world_size} ranks out on")
        return fallback
    if not dist.is_available() or dist.is_initialized():
        found.unchecked.append(f"{check}: torch.distributed is unavailable or already in use in this process")
        return fallback

    def lay_out() -> int:
        hook = sys.excepthook  # init_process_group installs a rank-prefixing one and never removes it
        dist.init_process_group(backend="fake", rank=0, world_size=world_size, store=FakeStore())
        try:
            core.parallel_state.initialize_model_parallel(**sizes, create_gloo_process_groups=False)
            return int(core.parallel_state.get_data_parallel_world_size())
        finally:
            core.parallel_state.destroy_model_parallel()
            dist.destroy_process_group()
            sys.excepthook = hook

    named = [f"{name}={size}" for name, size in sizes.items()]
    return found.run(check, lay_out, sizes, [*named, f"world_size={world_size}"])


def _batches(
    core: types.SimpleNamespace, settings: Mapping[str, Any], data_parallel: int | None, found: _Findings
) -> None:
    check = "ConstantNumMicroBatchesCalculator"
    micro, global_ = settings.get("micro_batch_size"), settings.get("global_batch_size")
    if data_parallel is None or micro is None or global_ is None:
        found.unchecked.append(f"{check}: no data-parallel size, micro batch or global batch to check")
        return
    # Megatron-LM: decrease_batch_size_if_needed is off by default; rank 1 logs nothing
    calculator = core.ConstantNumMicroBatchesCalculator
    named = [f"global_batch_size={global_}", f"micro_batch_size={micro}", f"data-parallel size {data_parallel}"]
    found.run(check, lambda: calculator(int(global_), int(micro), data_parallel, False, 1), (), named)


def check_with_megatron_core(settings: Mapping[str, Any], env: Mapping[str, str], *, world_size: int) -> CoreCheck:
    """Run megatron-core's own checks on ``settings`` (Megatron-LM destinations) under ``env``.

    ``world_size``: the plan's ranks (``launch.nnodes`` × ``launch.nproc_per_node``).
    Raises :class:`MegatronCoreMissingError` when megatron-core cannot be imported.
    """
    core = _core()
    try:
        arguments, origin = megatron_arguments(settings)
    except ValueError as exc:
        return CoreCheck(
            accepted=False,
            problems=(f"megatron_arguments: {_one_line(exc)}",),
            megatron_core_version=core.version,
            checked=(),
        )
    found = _Findings(origin)
    with _environment(env):
        config = _transformer_config(core, arguments, found)
        ddp = _fields_of(core.DistributedDataParallelConfig, arguments)
        found.run("DistributedDataParallelConfig.__post_init__", lambda: core.DistributedDataParallelConfig(**ddp), ddp)
        _optimizer_config(core, arguments, found)
        _attention_environment(core, config, arguments, found)
        env_after = {name: value for name, value in sorted(os.environ.items()) if name.startswith("NVTE_")}
        data_parallel = _layout(core, settings, world_size, found)
        _batches(core, settings, data_parallel, found)
    return CoreCheck(
        accepted=not found.problems,
        problems=tuple(found.problems),
        megatron_core_version=core.version,
        checked=tuple(found.checked),
        unchecked=tuple(found.unchecked),
        env_after=env_after,
        warnings=tuple(found.warnings),
        adjusted=tuple(found.adjusted),
    )
