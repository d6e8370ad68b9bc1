"""Per-GPU training memory of a model under a benchmark config, term by term, before anything runs.

Five terms, each with the formula that produced it (so a user can check it):

* **parameters, gradients, optimizer states** follow Megatron-LM's own
  theoretical footprint (``megatron/training/theoretical_memory_usage.py``):
  the most loaded model shard holds its share of the transformer layers plus
  the embedding (and, without pipeline parallelism, an untied output layer),
  divided by tensor parallelism; mixed precision keeps 2-byte weights, 4-byte
  gradients, a 4-byte master copy and two 4-byte Adam moments (18 bytes per
  parameter), and the distributed optimizer shards the last 12 bytes over the
  data-parallel ranks.  The torch backend keeps fp32 weights under autocast;
  FSDP2 shards all 16 bytes over every rank.
* **activations** use the per-layer terms of Korthikanti et al. 2022
  ("Reducing Activation Recomputation in Large Transformer Models", Table 2),
  written out for the Llama/Qwen layer (RMSNorm, grouped-query attention,
  SwiGLU, no dropout): each saved tensor is named in the formula.  Flash and
  fused attention kernels keep no s×s score matrix, so selective recompute
  (which recomputes exactly that) changes nothing for them.
* **overhead** is what the allocator and runtime need beyond live tensors.

Everything is in GiB (2**30 bytes) per GPU, for the GPU that holds the most.
"""

from __future__ import annotations

import math

import attrs

from tprimat.errors import TprimatError
from tprimat.hardware.partitions import mig_profile_in_name
from tprimat.memory.capacity import CAPACITY_VERSION, GIB, find_capacity, unknown_device_message
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.models import ModelSpec
from tprimat.settings.trainers import Trainer

#: Terms in print order; MemoryEstimate has a ``<term>_gib`` field for each.
TERMS = ("parameters", "gradients", "optimizer_states", "activations", "overhead")

#: Allocator workspaces that live beside the tensors (cuBLAS/hipBLASLt and
#: Transformer Engine workspaces, RoPE tables): counted in "allocated".
WORKSPACE_GIB = 0.5
#: Reserved-but-unallocated slack of PyTorch's caching allocator, as a share of
#: peak allocated memory; the real logs in tests/fixtures show 0.8 to 1.5 %.
CACHING_SLACK = 0.03
#: Memory the process uses outside PyTorch's allocator (GPU context, kernels,
#: communication-library buffers).
RUNTIME_GIB = 1.0


class MemoryEstimateError(TprimatError, ValueError):
    """A device or capacity that cannot be used; the message says which and what to do."""


@attrs.frozen(kw_only=True)
class OptimizerLayout:
    """Bytes per parameter and how each part is sharded across ranks."""

    param_bytes: float  # weights as the forward pass reads them
    grad_bytes: float  # gradient buffer (Megatron's "main grads")
    master_bytes: float  # optimizer's master copy of the weights (0 when weights are fp32)
    moment_bytes: float  # Adam's two moments together
    params_shards: int = 1  # ranks the weights are split over (FSDP)
    grads_shards: int = 1
    optimizer_shards: int = 1  # distributed optimizer / FSDP
    description: str = ""


@attrs.frozen(kw_only=True)
class MemoryEstimate:
    """Predicted per-GPU memory of one training configuration, in GiB."""

    model: str
    parameters_gib: float
    gradients_gib: float
    optimizer_states_gib: float
    activations_gib: float
    overhead_gib: float
    allocated_gib: float  # predicted peak of torch.cuda.max_memory_allocated()
    total_gib: float  # allocated plus caching slack and runtime: what the device must hold
    capacity_gib: float | None
    fits: bool | None
    margin_gib: float | None  # capacity minus total; negative when it does not fit
    formulas: dict[str, str]  # term -> the formula that gave it, with its numbers
    device: str | None = None  # the capacity table's key, when a device was named
    capacity_source: str | None = None
    capacity_table_version: str = CAPACITY_VERSION
    layout: str = ""  # optimizer layout in words
    notes: tuple[str, ...] = ()
    remedies: tuple[str, ...] = ()  # changes to the config that lower the estimate, for one that does not fit

    def terms(self) -> list[tuple[str, float, str]]:
        """(term, GiB, formula) for every term, in print order."""
        return [(name, getattr(self, f"{name}_gib"), self.formulas[name]) for name in TERMS]

    def to_dict(self) -> dict[str, object]:
        data = attrs.asdict(self)
        data["notes"] = list(self.notes)
        return data


def optimizer_layout(config: BenchmarkConfig, trainer: Trainer = "megatron-core") -> OptimizerLayout:
    """The weight/gradient/optimizer layout a backend's ``trainer`` uses for ``config``.

    ``trainer`` is the backend's ``BackendSpec.trainer``: "pytorch" (fp32 weights under
    autocast, FSDP2 or DDP, as tprimat's own torch backend) or "megatron-core" (Primus,
    Megatron-LM and NeMo all are).
    """
    dp_ranks = config.data_parallel * config.parallel.context
    if trainer == "pytorch":
        world = config.world_size
        if config.parallel.strategy == "fsdp2" and world > 1:
            return OptimizerLayout(
                param_bytes=4,
                grad_bytes=4,
                master_bytes=0,
                moment_bytes=8,
                params_shards=world,
                grads_shards=world,
                optimizer_shards=world,
                description=f"fp32 weights, gradients and Adam moments, all sharded over {world} ranks (FSDP2)",
            )
        return OptimizerLayout(
            param_bytes=4,
            grad_bytes=4,
            master_bytes=0,
            moment_bytes=8,
            description="fp32 weights, gradients and Adam moments on every rank (DDP)",
        )
    shards = dp_ranks if config.parallel.distributed_optimizer else 1
    where = f"sharded over {shards} data-parallel ranks" if shards > 1 else "on every rank"
    if config.precision.dtype == "fp32":
        return OptimizerLayout(
            param_bytes=4,
            grad_bytes=4,
            master_bytes=0,
            moment_bytes=8,
            optimizer_shards=shards,
            description=f"fp32 weights and gradients; Adam moments {where}",
        )
    return OptimizerLayout(
        param_bytes=2,
        grad_bytes=4,
        master_bytes=4,
        moment_bytes=8,
        optimizer_shards=shards,
        description=f"bf16 weights, fp32 gradient buffer; fp32 master weights and Adam moments {where}",
    )


def _fmt(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.2f} GiB"


def estimate_memory(
    config: BenchmarkConfig,
    model: ModelSpec,
    *,
    capacity_gib: float | None = None,
    device: str | None = None,
    trainer: Trainer = "megatron-core",
    layout: OptimizerLayout | None = None,
) -> MemoryEstimate:
    """Predict the per-GPU memory of training ``model`` under ``config``.

    ``device`` (a name such as "MI300X" or "NVIDIA H100 80GB HBM3") looks the
    capacity up in :mod:`tprimat.memory.capacity`; ``capacity_gib`` gives it
    directly and wins.  Without either, ``fits`` and ``margin_gib`` are None.
    ``trainer`` (the backend's ``BackendSpec.trainer``) selects the optimizer layout and
    the parallelism (see :func:`optimizer_layout`);
    ``layout`` replaces it, for a run whose framework stored its states
    differently (e.g. bf16 gradients).
    """
    p = config.parallel
    tp, pp, cp = p.tensor, p.pipeline, p.context
    torch_backend = trainer == "pytorch"
    if torch_backend:
        tp = pp = cp = 1  # a PyTorch DDP/FSDP2 trainer is data parallel only
    layout = layout or optimizer_layout(config, trainer)
    notes: list[str] = []
    vocab = model.vocab_size if torch_backend else model.padded_vocab_size(tp)
    weights = _weights(
        config,
        model,
        layout,
        tp=tp,
        pp=pp,
        vocab=vocab,
        fp8_copies=not torch_backend,
        autocast_copies=torch_backend,
        notes=notes,
    )
    (param_bytes, parameters_formula), (grad_bytes, gradients_formula), (optim_bytes, optimizer_formula) = weights

    # ---- activations (Korthikanti et al. 2022, Table 2, for a Llama layer) ----
    activation_bytes, activations_formula, act_notes = _activations(
        config, model, tp=tp, pp=pp, cp=cp, vocab=vocab, eager=torch_backend
    )
    notes.extend(act_notes)

    allocated = param_bytes + grad_bytes + optim_bytes + activation_bytes + WORKSPACE_GIB * GIB
    slack = CACHING_SLACK * allocated
    overhead_bytes = WORKSPACE_GIB * GIB + slack + RUNTIME_GIB * GIB
    overhead_formula = (
        f"workspaces {WORKSPACE_GIB:g} GiB + caching-allocator slack {CACHING_SLACK:.0%} of allocated "
        f"({_fmt(slack)}) + runtime context and communication buffers {RUNTIME_GIB:g} GiB"
        f" = {_fmt(overhead_bytes)}"
    )
    total = allocated + slack + RUNTIME_GIB * GIB

    capacity_gib, capacity_source, device_key = _capacity(device, capacity_gib)
    total_gib = total / GIB
    margin = None if capacity_gib is None else capacity_gib - total_gib
    return MemoryEstimate(
        model=model.name,
        parameters_gib=param_bytes / GIB,
        gradients_gib=grad_bytes / GIB,
        optimizer_states_gib=optim_bytes / GIB,
        activations_gib=activation_bytes / GIB,
        overhead_gib=overhead_bytes / GIB,
        allocated_gib=allocated / GIB,
        total_gib=total_gib,
        capacity_gib=capacity_gib,
        fits=None if margin is None else margin >= 0,
        margin_gib=margin,
        formulas={
            "parameters": parameters_formula,
            "gradients": gradients_formula,
            "optimizer_states": optimizer_formula,
            "activations": activations_formula,
            "overhead": overhead_formula,
        },
        device=device_key,
        capacity_source=capacity_source,
        layout=layout.description,
        notes=tuple(notes),
        remedies=_remedies(config, torch_backend=torch_backend, sharded=layout.params_shards > 1),
    )


def _remedies(config: BenchmarkConfig, *, torch_backend: bool, sharded: bool) -> tuple[str, ...]:
    """What would lower this configuration's memory, leaving out what it already does."""
    t = config.training
    remedies = []
    if t.recompute != "full":
        remedies.append("training.recompute=full")
    if t.micro_batch_size > 1:
        remedies.append("a smaller micro-batch (training.micro_batch_size)")
    if torch_backend:
        if not sharded and t.global_batch_size > t.micro_batch_size * config.data_parallel:
            remedies.append("one micro-batch a step (autocast's weight copies then never meet the gradients)")
        remedies.append("parallel.strategy=fsdp2 over more GPUs" if not sharded else "more GPUs to shard over")
    else:
        remedies.append("more tensor or pipeline parallelism (parallel.tensor, parallel.pipeline)")
    return tuple(remedies)


def _weights(
    config: BenchmarkConfig,
    model: ModelSpec,
    layout: OptimizerLayout,
    *,
    tp: int,
    pp: int,
    vocab: int,
    fp8_copies: bool,
    autocast_copies: bool,
    notes: list[str],
) -> list[tuple[float, str]]:
    """(bytes, formula) of parameters, gradients and optimizer states on the most loaded GPU.

    Megatron's most loaded shard is the first pipeline stage: its layers plus the
    embedding, and without pipeline parallelism also the final norm and an untied
    output layer, divided by tensor parallelism.  ``autocast_copies``: fp32 weights run
    under ``torch.autocast`` (the torch backend), whose bf16 copies count with the weights.
    """
    layer_params, layer_linear = model.layer_parameters
    h, L = model.hidden_size, model.num_layers
    embedding = vocab * h
    layers_here = math.ceil(L / pp)
    shard = layers_here * layer_params + embedding
    outputs = "embedding"
    if pp == 1:
        shard += h  # final norm
        if not model.tie_embeddings:
            shard += embedding
            outputs = "embedding + output layer"
    shard_params = shard / tp
    count = f"{shard_params:,.0f} parameters"
    params_text = f"({layers_here} layers × {layer_params:,} + {outputs} {vocab:,}×{h}) / TP {tp} = {count}"

    param_bytes = shard_params * layout.param_bytes / layout.params_shards
    parameters_formula = f"{params_text} × {layout.param_bytes:g} B"
    if layout.params_shards > 1:
        parameters_formula += f" / {layout.params_shards} shards"
        # FSDP2 gathers a layer's full weights for compute (bf16 under mixed precision), and
        # prefetches the next one: two unsharded layers are live at a time.
        gathered = 2 * layer_params * (2 if config.precision.dtype == "bf16" else 4)
        param_bytes += gathered
        parameters_formula += f" + 2 gathered layers ({_fmt(gathered)})"
    elif autocast_copies and config.precision.dtype == "bf16" and layout.param_bytes == 4:
        # fp32 weights under autocast (DDP or one process): autocast keeps the bf16 copy of every
        # weight a forward pass casts until the forward ends.  With more than one micro-batch a
        # step, the gradients of the earlier micro-batches are live beside those copies; with one,
        # the copies are freed before any gradient exists, and the larger of the two is counted.
        micro_batches = config.training.global_batch_size // (config.training.micro_batch_size * config.data_parallel)
        cast = layers_here * layer_linear + embedding  # and the output layer's weight, tied or not
        if micro_batches > 1:
            param_bytes += 2 * cast
            parameters_formula += (
                f" + bf16 copies autocast keeps during each forward, live beside the gradients of "
                f"{micro_batches - 1} earlier micro-batch(es): {cast:,} cast weights × 2 B ({_fmt(2 * cast)})"
            )
        else:
            notes.append(
                f"autocast's bf16 weight copies ({_fmt(2 * cast)}) are freed before the gradients exist "
                "(one micro-batch a step), so the gradients are the larger and only they are counted"
            )
    if config.precision.dtype == "fp8" and fp8_copies:
        # Transformer Engine keeps an FP8 copy of every linear weight and of its transpose.
        copies = layers_here * layer_linear / tp * 2
        param_bytes += copies
        parameters_formula += f" + FP8 copies of linear weights and their transposes, 2 B each ({_fmt(copies)})"
    parameters_formula += f" = {_fmt(param_bytes)}"

    grad_bytes = shard_params * layout.grad_bytes / layout.grads_shards
    gradients_formula = f"{count} × {layout.grad_bytes:g} B"
    if layout.grads_shards > 1:
        gradients_formula += f" / {layout.grads_shards} shards"
    gradients_formula += f" = {_fmt(grad_bytes)}"

    optim_bytes = shard_params * (layout.master_bytes + layout.moment_bytes) / layout.optimizer_shards
    parts = f"{layout.master_bytes:g} B master + {layout.moment_bytes:g} B Adam moments"
    optimizer_formula = f"{count} × ({parts})"
    if layout.optimizer_shards > 1:
        optimizer_formula += f" / {layout.optimizer_shards} shards"
    optimizer_formula += f" = {_fmt(optim_bytes)}"
    return [(param_bytes, parameters_formula), (grad_bytes, gradients_formula), (optim_bytes, optimizer_formula)]


def _capacity(device: str | None, capacity_gib: float | None) -> tuple[float | None, str | None, str | None]:
    """(capacity in GiB, its source, the table's device key); a given capacity wins over the table."""
    capacity_source = device_key = None
    if device is not None:
        row = find_capacity(device)
        profile = mig_profile_in_name(device)
        if row is not None and profile is not None and capacity_gib is None:
            raise MemoryEstimateError(
                f"{device!r} is a MIG device ({profile}): the table holds the whole GPU's memory "
                f"({row.capacity_gib:g} GiB, {row.key}); give the MIG device's own with capacity_gib / --capacity-gib"
            )
        if row is None and capacity_gib is None:
            raise MemoryEstimateError(unknown_device_message(device))
        if row is not None:
            device_key = row.key
            if capacity_gib is None:
                capacity_gib, capacity_source = row.capacity_gib, row.source
    if capacity_gib is not None and capacity_source is None:
        capacity_source = "given"
    if capacity_gib is not None and capacity_gib <= 0:
        raise MemoryEstimateError(f"capacity must be a positive number of GiB, got {capacity_gib}")
    return capacity_gib, capacity_source, device_key


def _layer_terms(model: ModelSpec, *, tp: int, sp: bool, eager: bool) -> tuple[float, str]:
    """Bytes per token of one transformer layer's saved activations, and the formula in words.

    ``eager=False``: Megatron-core with fused kernels (Transformer Engine), as Korthikanti et al.
    list the saved tensors, bf16 (2 B/element).  Outside the tensor-parallel region (split by TP
    only with sequence parallelism): attention norm input 2h, QKV input 2h, MLP norm input 2h,
    FC1 input 2h.  Inside it (split by TP): Q 2·q, K and V 2·kv each, attention output 2·q; SwiGLU
    FC1 output (gate and up) 4F and FC2 input 2F (a GeLU MLP: 2F + 2F).

    ``eager=True``: the torch backend's Hugging Face modules, op by op: each RMSNorm keeps its
    input in fp32 4h and its bf16 output 2h; attention keeps Q 2·q, K and V 2·kv, the SDPA output
    2·q and its contiguous copy for the output projection 2·q; the SwiGLU MLP keeps gate 2F, up
    2F, SiLU output 2F and their product 2F.
    """
    h, F = model.hidden_size, model.ffn_hidden_size
    q, kv = model.num_attention_heads * model.kv_channels, model.num_query_groups * model.kv_channels
    if eager:
        mlp, mlp_text = (8 * F, "8F") if model.swiglu else (4 * F, "4F")
        return 12 * h + 6 * q + 4 * kv + mlp, f"s·b·(12h + 6·q + 4·kv + {mlp_text}) (eager modules)"
    mlp, mlp_text = (6 * F, "6F") if model.swiglu else (4 * F, "4F")
    outside = 8 * h / (tp if sp else 1)
    inside = (4 * q + 4 * kv + mlp) / tp
    return outside + inside, f"s·b·({'8h/TP' if sp else '8h'} + (4·q + 4·kv + {mlp_text})/TP)"


def _activations(
    config: BenchmarkConfig, model: ModelSpec, *, tp: int, pp: int, cp: int, vocab: int, eager: bool = False
) -> tuple[float, str, list[str]]:
    """Peak activation bytes on the first pipeline stage, its formula and notes."""
    t = config.training
    s, b = t.seq_length / cp, t.micro_batch_size
    h, F, L = model.hidden_size, model.ffn_hidden_size, model.num_layers
    q_dim = model.num_attention_heads * model.kv_channels
    kv_dim = model.num_query_groups * model.kv_channels
    sp = config.parallel.sequence_parallel and tp > 1
    notes: list[str] = []

    per_token, layer_text = _layer_terms(model, tp=tp, sp=sp, eager=eager)
    formula_layer = f"{layer_text} with s={s:g}, b={b}, h={h}, q={q_dim}, kv={kv_dim}, F={F}, TP={tp}"
    per_layer = s * b * per_token
    scores = 0.0
    if config.kernels.attention_backend == "unfused":
        # The s×s attention probabilities per head (no dropout: Korthikanti's 5·a·s²·b without the
        # masks); eager PyTorch softmax keeps them in fp32 too.
        a = model.num_attention_heads
        factor = 6 if eager else 2
        scores = factor * a * s * s * b / tp
        formula_layer += f" + attention scores {factor}·a·s²·b/TP (unfused attention, a={a})"
        if t.recompute == "selective" and not eager:
            scores = 0.0
            formula_layer += " recomputed (selective)"
    per_layer += scores

    # The first pipeline stage holds the activations of `pp` micro-batches in flight for its
    # L/pp layers: L layers' worth (Megatron's count), fewer when there are fewer micro-batches.
    micro_batches = t.global_batch_size // (t.micro_batch_size * config.data_parallel)
    in_flight = min(pp, micro_batches) if pp > 1 else 1
    layers_here = math.ceil(L / pp)
    stored_layers = layers_here * in_flight
    if t.recompute == "full":
        kept = s * b * 2 * h / (tp if sp else 1)
        body = stored_layers * kept + per_layer
        formula = (
            f"full recompute: {stored_layers} layer inputs × s·b·2h{'/TP' if sp else ''} ({_fmt(kept)} each)"
            f" + one layer recomputed [{formula_layer}] ({_fmt(per_layer)})"
        )
    else:
        body = stored_layers * per_layer
        formula = f"{stored_layers} layers × [{formula_layer}] ({_fmt(per_layer)} each)"
        if t.recompute == "selective" and config.kernels.attention_backend != "unfused":
            notes.append("selective recompute saves nothing here: flash/fused attention keeps no s×s scores")
        if t.recompute == "selective" and eager:
            notes.append("the torch backend has no selective recompute: it stores every activation")

    # Token ids and labels (int64) of the micro-batches in flight.
    body += 16 * s * b * in_flight
    if pp == 1:
        if eager:
            # Final RMSNorm (fp32 input 4h, bf16 output 2h); bf16 logits 2V, their fp32 copy 4V and
            # the log-softmax the cross entropy keeps 4V.
            out = s * b * (6 * h + 10 * vocab)
            formula += f" + output layer s·b·(6h + 10V) with V={vocab} ({_fmt(out)})"
        else:
            # Final norm input 2h (split with SP) and output-layer input 2h; bf16 logits 2V/TP
            # cast to fp32 for the cross entropy 4V/TP.
            out = s * b * (2 * h / (tp if sp else 1) + 2 * h + 6 * vocab / tp)
            formula += f" + output layer s·b·(4h + 6V/TP) with V={vocab} ({_fmt(out)})"
        body += out
    else:
        notes.append("the output layer and loss live on the last pipeline stage, which holds one micro-batch")
    if cp > 1:
        notes.append(f"context parallelism {cp}: every rank holds s/{cp} tokens of each sequence")
    return body, formula + f" = {_fmt(body)}", notes
