"""What a NeMo run really ran with: the recipe the launch script resolved, against the plan.

``nemo_pretrain.py`` prints NeMo's resolved recipe on one line of the log before
training (``TPRIMAT_NEMO_RESOLVED {...}``: every field of the model config, the
optimizer, DDP, strategy, trainer, precision plugin, schedule and data module,
and what NeMo replaces at set-up).  :func:`read` finds it; :func:`compare` checks
every setting tprimat wrote into ``nemo_settings.json`` against the value NeMo
ended with (:data:`WHERE` says where each one lands); :func:`shared` gives the
shared vocabulary from what NeMo ran with, including what only the machine
decides (gradient-accumulation fusion, on where APEX's kernel imports).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tprimat.contract.readback import Disagreement, SettingsReadback, StatedSettings

MARKER = "TPRIMAT_NEMO_RESOLVED "
FORM = "NeMo recipe as the launch script resolved it"

#: A settings-file key (dotted into its sections) -> where NeMo's resolved recipe holds it.
WHERE: dict[str, str] = {
    "max_steps": "trainer.max_steps",
    "seq_length": "model.seq_length",
    "micro_batch_size": "data.micro_batch_size",
    "global_batch_size": "data.global_batch_size",
    "init_method_std": "model.init_method_std",
    "padded_vocab_size": "model.vocab_size",
    "parallel.tensor": "strategy.tensor_model_parallel_size",
    "parallel.pipeline": "strategy.pipeline_model_parallel_size",
    "parallel.context": "strategy.context_parallel_size",
    "parallel.sequence_parallel": "strategy.sequence_parallel",
    "parallel.distributed_optimizer": "ddp.use_distributed_optimizer",
    "parallel.overlap_grad_reduce": "ddp.overlap_grad_reduce",
    "parallel.overlap_param_gather": "ddp.overlap_param_gather",
    "optimizer.lr": "optimizer.lr",
    "optimizer.min_lr": "optimizer.min_lr",
    "optimizer.warmup_steps": "lr_scheduler.warmup_steps",
    "optimizer.decay_steps": "lr_scheduler.max_steps",
    "optimizer.weight_decay": "optimizer.weight_decay",
    "optimizer.adam_beta1": "optimizer.adam_beta1",
    "optimizer.adam_beta2": "optimizer.adam_beta2",
    "optimizer.adam_eps": "optimizer.adam_eps",
    "optimizer.clip_grad": "optimizer.clip_grad",
    "kernels.attention_backend": "model.attention_backend",
    "kernels.fused_rope": "model.apply_rope_fusion",
    "kernels.fused_swiglu": "model.bias_activation_fusion",
    "kernels.fused_cross_entropy": "model.cross_entropy_loss_fusion",
    "recompute.granularity": "model.recompute_granularity",
    "recompute.method": "model.recompute_method",
    "recompute.num_layers": "model.recompute_num_layers",
}


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def read(lines: Sequence[str], source: str) -> StatedSettings | None:
    """The resolved recipe the log carries, flattened to dotted names, or None."""
    for number, line in enumerate(lines, 1):
        at = line.find(MARKER)
        if at < 0:
            continue
        try:
            resolved = json.loads(line[at + len(MARKER) :])
        except ValueError:
            continue
        if isinstance(resolved, dict):
            return StatedSettings(values=_flat(resolved), source=f"{source}:{number}", form=FORM)
    return None


def _where(setting: str) -> str | None:
    if setting.startswith("architecture."):
        return "model." + setting.partition(".")[2]
    return WHERE.get(setting)


def compare(rendered: Mapping[str, Any], stated: StatedSettings) -> list[Disagreement]:
    """Every rendered setting NeMo ended with another value (the resolved recipe values are typed JSON)."""
    found = []
    for setting, planned in _flat(dict(rendered)).items():
        where = _where(setting)
        if where is None:
            continue
        ran = stated.values.get(f"set_at_setup.{where}", stated.values.get(where, _MISSING))
        if ran is _MISSING or _same(planned, ran):
            continue
        found.append(Disagreement(setting=setting, planned=planned, stated=ran, source=f"{stated.source} ({where})"))
    return found


_MISSING = object()


def _same(planned: Any, ran: Any) -> bool:
    if isinstance(planned, bool) or isinstance(ran, bool):
        return planned is ran
    if isinstance(planned, int | float) and isinstance(ran, int | float):
        return float(planned) == float(ran)
    return planned == ran


def shared(stated: StatedSettings) -> dict[str, Any]:
    """The shared vocabulary from what NeMo ran with."""
    v = stated.values
    fp8 = v.get("precision.fp8")
    mock = v.get("data.class") == "MockDataModule"
    granularity = v.get("model.recompute_granularity")
    return {
        # MockDataModule's loss mask covers every token; PreTrainingDataModule's dataset says
        "loss.eod_mask": False if mock else v.get("data.dataset.eod_mask_loss"),
        "norm.epsilon": v.get("model.layernorm_epsilon"),
        "init.std": v.get("model.init_method_std"),
        "dropout.hidden": v.get("model.hidden_dropout"),
        "dropout.attention": v.get("model.attention_dropout"),
        "precision.dtype": "fp8" if fp8 else ("bf16" if v.get("optimizer.bf16") else "fp32"),
        "precision.fp8_format": fp8 or None,
        "precision.fp8_recipe": v.get("precision.fp8_recipe") if fp8 else None,
        "precision.fp8_amax_history_len": v.get("precision.fp8_amax_history_len") if fp8 else None,
        "precision.fp8_amax_compute_algo": v.get("precision.fp8_amax_compute_algo") if fp8 else None,
        "attention.kernel": v.get("model.attention_backend"),
        "loss.fused_cross_entropy": v.get("model.cross_entropy_fusion_impl")
        if v.get("model.cross_entropy_loss_fusion")
        else False,
        "grad.accumulation_fusion": v.get("model.gradient_accumulation_fusion"),
        "kernels.fused_rope": v.get("model.apply_rope_fusion"),
        "kernels.fused_swiglu": v.get("model.bias_activation_fusion"),
        "recompute": granularity or "none",
        "optimizer.distributed": v.get("ddp.use_distributed_optimizer"),
        "overlap.grad_reduce": v.get("ddp.overlap_grad_reduce"),
        "overlap.param_gather": v.get("ddp.overlap_param_gather"),
    }


READBACK = SettingsReadback(read=read, disagreements=compare, shared=shared)
