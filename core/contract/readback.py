"""Reading back what a framework ran with: the plugin contract's side of it.

After a run, and when ``tprimat parse`` reads a log, the core asks the backend's
:class:`SettingsReadback` what the framework itself stated at start-up (its
argument dump, its resolved recipe) and how that compares with what the launch
rendered.  These classes import nothing heavy: backends declare their readback
when they are listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class StatedSettings:
    """What a framework itself printed or wrote about the settings it runs with.

    Megatron-LM and Primus dump every argument at start-up; tprimat's NeMo launch
    script prints NeMo's resolved recipe.  ``values`` are by the framework's own
    names, as the framework wrote them (text for an argument dump).
    """

    values: dict[str, Any]
    source: str  # "file:line" where the statement starts
    form: str  # e.g. "Megatron-LM argument dump"
    notes: tuple[str, ...] = ()
    where: dict[str, str] = attrs.Factory(dict)  # setting -> "file:line" of its own line, where known


@attrs.frozen(kw_only=True)
class Disagreement:
    """A rendered setting the framework states with another value."""

    setting: str
    planned: Any
    stated: Any
    source: str | None = None


@attrs.frozen(kw_only=True)
class SettingsReadback:
    """How a backend reads back what its framework ran with (``BackendSpec.readback``).

    ``read(lines, source)`` looks at the first lines of a log file (at most
    ``STATED_LINES``) and returns what the framework states there, or None;
    ``disagreements(rendered, stated)`` compares every rendered setting the
    framework states, by meaning (``1e-05`` is ``1e-5``, ``True`` is ``true``);
    ``shared(stated)`` gives the shared vocabulary from the stated values alone
    (a log parsed without its plan), as far as they go.
    """

    read: Callable[[Sequence[str], str], StatedSettings | None]
    disagreements: Callable[[Mapping[str, Any], StatedSettings], list[Disagreement]]
    shared: Callable[[StatedSettings], dict[str, Any]] | None = None
