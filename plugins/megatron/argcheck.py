"""Does what a Megatron-family framework printed agree with what tprimat rendered?

:func:`disagreements` compares every rendered setting (``{destination: value}``, as
:func:`tprimat.plugins.megatron.settings.build_settings` and Primus's overrides give them)
with the text the framework printed for it (:func:`~tprimat.plugins.megatron.argdump.read_arguments`).
Values are compared by meaning, never by text (:func:`values_agree`).  A rendered setting
the log does not print is no disagreement: :func:`unstated` lists those.

Megatron-LM and Primus legitimately change or rename a few settings between what they are
given and what they print.  Each such setting is handled here, in one table
(:data:`TRANSFORMS`), with the evidence; nothing else is skipped or loosened:

=====================  ==========================================================================
setting                what the framework prints, and when it still agrees
=====================  ==========================================================================
norm_epsilon           Megatron-core 0.16 and later store ``--norm-epsilon`` as
                       ``layernorm_epsilon`` (TransformerConfig's field) and build the model from
                       it; 2023 Megatron-LM's ``--layernorm-epsilon`` had the same destination.
                       Compared with ``layernorm_epsilon`` where it is printed, else with
                       ``norm_epsilon``.  Under Primus with core 0.16 both are printed and
                       ``norm_epsilon`` is Primus's model-config key, which only its DeepSeek-V4
                       config copies onto ``layernorm_epsilon``: elsewhere the value that ran is
                       ``layernorm_epsilon``.
num_query_groups       tprimat renders None without grouped-query attention (no flag);
                       Megatron-LM prints its default, 1, and ignores it unless
                       ``group_query_attention``: agrees when that is planned False.
lr_decay_iters         printed as given; a printed None agrees with a plan equal to
                       ``train_iters``: Megatron's scheduler decays over ``train_iters`` when it
                       is unset (after the dump).
sequence_parallel      Megatron-LM's ``validate_args`` and Primus's ``sequence_parallel_tp1``
                       patch turn it off at tensor parallel size 1: a printed False agrees with a
                       planned True when ``tensor_model_parallel_size`` is planned 1.
apply_rope_fusion      Megatron-LM turns it off unless ``position_embedding_type`` is ``rope``:
                       a printed False agrees with a planned True then.
split                  with a ``data_path`` and no split, Megatron-LM uses its legacy default
                       ``969, 30, 1``: agrees with a planned None then.
save                   Primus before its opt-out change pointed ``save`` at
                       ``<experiment>/checkpoints`` even when given none, and writes no final
                       checkpoint with ``disable_last_saving``: a printed path ending in
                       ``/checkpoints`` agrees with a planned None when ``disable_last_saving``
                       is printed True.
vocab_size             printed as given (tprimat already gives NullTokenizer one token less
                       before core 0.18).  The padded size is computed after the dump
                       (``padded_vocab_size`` is printed None, the size comes later in
                       ``> padded vocab ... (new size: N)``); it is not a rendered setting.
attention_backend      Megatron-LM's parser turns the text into an enum and prints
                       ``AttnBackend.flash``; Primus prints ``flash``.  Both agree with
                       ``"flash"`` by the enum rule of :func:`values_agree`.
=====================  ==========================================================================
"""

from __future__ import annotations

import ast
import enum
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from tprimat.plugins.megatron.argdump import StatedArguments

#: ``Class.member`` as Python prints an enum member (``AttnBackend.flash``, ``RerunMode.DISABLED``).
_ENUM_RE = re.compile(r"[A-Z][A-Za-z0-9_]*\.([A-Za-z_][A-Za-z0-9_]*)")
#: Longest printed value parsed as a Python literal (a list of paths is far shorter).
_LITERAL_LIMIT = 100_000


@attrs.frozen(kw_only=True)
class Disagreement:
    """A rendered setting the framework states with another value.

    ``planned`` is the value tprimat rendered, ``stated`` the text the framework printed,
    ``source`` the ``file:line`` it printed it on, ``printed_as`` the name it printed it
    under when that is not the setting's own (``layernorm_epsilon`` for ``norm_epsilon``).
    """

    setting: str
    planned: Any
    stated: str
    source: str
    printed_as: str = ""

    def __str__(self) -> str:
        name = f" (printed as {self.printed_as})" if self.printed_as else ""
        return f"{self.setting}{name}: rendered {self.planned!r}, the framework states {self.stated} at {self.source}"


#: ``accepts(planned, printed, plan, stated)``: does a printed value that differs by meaning still agree?
Accepts = Callable[[Any, str, Mapping[str, Any], Mapping[str, str]], bool]


@attrs.frozen(kw_only=True)
class Transform:
    """How the framework prints one rendered setting when not as given (see the module's table)."""

    printed_as: tuple[str, ...] = ()  # the names to look under, first printed wins (empty: its own)
    accepts: Accepts | None = None
    why: str


def _checkpoints_of_primus(planned: Any, printed: str, plan: Mapping[str, Any], stated: Mapping[str, str]) -> bool:
    return (
        planned is None and printed.rstrip("/").endswith("/checkpoints") and stated.get("disable_last_saving") == "True"
    )


TRANSFORMS: dict[str, Transform] = {
    "norm_epsilon": Transform(
        printed_as=("layernorm_epsilon", "norm_epsilon"),
        why="Megatron-core 0.16+ stores --norm-epsilon as layernorm_epsilon and builds the model from it",
    ),
    "num_query_groups": Transform(
        accepts=lambda planned, printed, plan, stated: planned is None and plan.get("group_query_attention") is False,
        why="unset without grouped-query attention: Megatron prints its default (1) and ignores it",
    ),
    "lr_decay_iters": Transform(
        accepts=lambda planned, printed, plan, stated: (
            printed == "None" and planned is not None and planned == plan.get("train_iters")
        ),
        why="printed as given; unset, Megatron's scheduler decays over train_iters",
    ),
    "sequence_parallel": Transform(
        accepts=lambda planned, printed, plan, stated: (
            planned is True and printed == "False" and plan.get("tensor_model_parallel_size") == 1
        ),
        why="Megatron-LM and Primus turn sequence parallelism off at tensor parallel size 1",
    ),
    "apply_rope_fusion": Transform(
        accepts=lambda planned, printed, plan, stated: (
            planned is True and printed == "False" and plan.get("position_embedding_type") not in (None, "rope")
        ),
        why="Megatron-LM turns RoPE fusion off unless position_embedding_type is rope",
    ),
    "split": Transform(
        accepts=lambda planned, printed, plan, stated: (
            planned is None and printed == "969, 30, 1" and plan.get("data_path") is not None
        ),
        why="with a data_path and no split Megatron-LM uses its legacy default '969, 30, 1'",
    ),
    "save": Transform(
        accepts=_checkpoints_of_primus,
        why="older Primus points save at <experiment>/checkpoints; disable_last_saving keeps it unwritten",
    ),
    "vocab_size": Transform(
        why="printed as given; Megatron pads it after the dump (padded_vocab_size), not a rendered setting",
    ),
    "attention_backend": Transform(
        why="Megatron-LM prints AttnBackend.<name>, Primus <name>: compared by member name",
    ),
}


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _literal(text: str) -> Any:
    """The Python literal ``text`` spells (a printed list, tuple or dict), or ``text`` itself."""
    if len(text) > _LITERAL_LIMIT:
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _same(planned: Any, printed: Any) -> bool:
    """Does one element of a printed list or dict (a Python object) agree with the plan's?"""
    if isinstance(printed, str):
        return values_agree(planned, printed)
    return values_agree(planned, repr(printed))


def values_agree(planned: Any, text: str) -> bool:
    """Does ``text``, as the framework printed a value, mean ``planned``?

    By the planned value's type: None is ``None``; a bool is ``True`` or ``False``; a
    number equals the printed number exactly (``1e-05``, ``1e-5`` and ``0.00001`` are one
    value, ``1`` and ``1.0`` too; no tolerance); a string is the printed text, or the
    member name of a printed enum (``AttnBackend.flash`` for ``"flash"``); a list or tuple
    is a printed Python list or tuple whose elements agree one by one (a dict likewise);
    a path is its text.
    """
    if planned is None:
        return text == "None"
    if isinstance(planned, bool):
        return text == str(planned)
    if isinstance(planned, enum.Enum):
        return text in (str(planned), planned.name) or values_agree(planned.value, text)
    if isinstance(planned, int | float):
        number = _number(text)
        if number is None:
            return False
        if isinstance(planned, float) and math.isnan(planned):
            return isinstance(number, float) and math.isnan(number)
        return number == planned
    if isinstance(planned, str):
        if text == planned:
            return True
        member = _ENUM_RE.fullmatch(text)
        return member is not None and member.group(1) == planned
    if isinstance(planned, os.PathLike):
        return text == os.fspath(planned)
    if isinstance(planned, Mapping):
        printed = _literal(text)
        return (
            isinstance(printed, dict)
            and set(map(str, printed)) == set(map(str, planned))
            and all(_same(planned[key], printed.get(key, printed.get(str(key)))) for key in planned)
        )
    if isinstance(planned, Sequence):
        printed = _literal(text)
        return (
            isinstance(printed, list | tuple)
            and len(printed) == len(planned)
            and all(_same(p, q) for p, q in zip(planned, printed, strict=True))
        )
    return text == str(planned)


def _printed(setting: str, stated: Mapping[str, str]) -> str | None:
    """The name ``setting`` is printed under in ``stated``, or None."""
    transform = TRANSFORMS.get(setting)
    for name in transform.printed_as if transform and transform.printed_as else (setting,):
        if name in stated:
            return name
    return None


def disagreements(planned: Mapping[str, Any], stated: Mapping[str, str]) -> list[Disagreement]:
    """Every planned setting that ``stated`` prints with another meaning, in the plan's order.

    ``stated`` is :func:`~tprimat.plugins.megatron.argdump.read_arguments`'s answer (each
    disagreement then names its line) or any ``{name: text}``.
    """
    found: list[Disagreement] = []
    for setting, value in planned.items():
        name = _printed(setting, stated)
        if name is None:
            continue
        text = stated[name]
        if values_agree(value, text):
            continue
        transform = TRANSFORMS.get(setting)
        if transform is not None and transform.accepts is not None and transform.accepts(value, text, planned, stated):
            continue
        found.append(
            Disagreement(
                setting=setting,
                planned=value,
                stated=text,
                source=stated.where(name) if isinstance(stated, StatedArguments) else "",
                printed_as=name if name != setting else "",
            )
        )
    return found


def unstated(planned: Mapping[str, Any], stated: Mapping[str, str]) -> list[str]:
    """The planned settings ``stated`` does not print (under any name), in the plan's order."""
    return [setting for setting in planned if _printed(setting, stated) is None]
