"""Megatron core's rule for the attention backend and the ``NVTE_*_ATTN`` environment.

megatron-core's ``LanguageModule._set_attention_backend`` asserts that each
``NVTE_*_ATTN`` variable is unset or equal to what the configured
``--attention-backend`` needs, then sets them.  Every backend that builds its
model with megatron-core (Megatron-LM, Primus, NeMo 2) meets that assertion
only once the model is built, on the GPUs; :func:`refuse_attention_conflicts`
stops such a plan before it starts.
"""

from __future__ import annotations

from tprimat.errors import TprimatError

#: The ``NVTE_*_ATTN`` values megatron-core's ``LanguageModule._set_attention_backend`` asserts
#: (each unset or equal) and then sets, for each ``--attention-backend``.
ATTENTION_ENV: dict[str, dict[str, str]] = {
    "flash": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "0"},
    "fused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "0"},
    "unfused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "1"},
    "auto": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "1"},
}


class AttentionEnvError(TprimatError):
    """A plan's ``NVTE_*_ATTN`` environment that megatron-core refuses for its attention backend."""


def attention_env_conflicts(backend: str, env: dict[str, str]) -> list[str]:
    """The ``NVTE_*_ATTN`` variables of ``env`` that megatron-core's rule refuses for ``backend``.

    The rule is checked against megatron-core itself by ``tests/plugins/megatron/test_corecheck.py``;
    here it stops such a plan before any GPU is spent.
    """
    wanted = ATTENTION_ENV.get(backend, {})
    return [f"{name}={env[name]}" for name, value in wanted.items() if name in env and env[name] != value]


def refuse_attention_conflicts(backend: str, env: dict[str, str]) -> None:
    """Stop a plan whose environment megatron-core's attention-backend rule would refuse at model build."""
    conflicts = attention_env_conflicts(backend, env)
    if conflicts:
        raise AttentionEnvError(
            f"kernels.attention_backend = {backend!r} with {', '.join(conflicts)}: megatron-core "
            "(LanguageModule._set_attention_backend) refuses this at model construction; "
            f'use kernels.attention_backend = "auto" or leave these variables to tprimat'
        )
