"""The plugin contract's version, and the check of what a plugin says it needs.

The contract is what :mod:`tprimat.contract` exports, the hook specs and the
fields of :class:`~tprimat.contract.backend.BackendSpec` and
:class:`~tprimat.contract.exporter.ExporterSpec`.  Its version is
``MAJOR.MINOR``: a minor step adds (a hook, a field with a default, a name);
a major step removes or changes something a plugin may rely on.  1.1 added
the ``register_exporters`` hook and ``ExporterSpec`` to 1.0; 1.2 the log-file
reader a parser is handed (``LogFile``), the collector's rules, the typed-value
reader, the config and model names and the training-program services; 1.3 the
:class:`~tprimat.contract.records.IterationBlock` a parser may yield for a run of iteration lines;
1.4 the :class:`~tprimat.contract.records.FigureColumns` such a block's figures may be;
1.5 :func:`~tprimat.contract.compiled.compiled_module`, a compiled module honouring the
one switch that turns them off; 1.6 the :class:`~tprimat.contract.records.LineSources` a
block's sources may be.

A plugin states the contract it was written against with a module (or object)
attribute ``tprimat_contract = "1.0"``; it then loads on every tprimat whose
contract has the same major version and at least that minor version, and is
refused with one line saying what to upgrade otherwise.  A plugin that states
nothing is loaded and checked by its hooks alone.  ``tprimat plugins`` shows
the contract this tprimat provides and what each plugin states.
"""

from __future__ import annotations

import re

#: The contract this tprimat provides.
CONTRACT_VERSION = "1.6"
#: The attribute a plugin sets to the contract version it needs.
CONTRACT_ATTRIBUTE = "tprimat_contract"

_VERSION = re.compile(r"^(\d+)\.(\d+)$")


def parse_contract(text: str) -> tuple[int, int]:
    """``"1.2"`` as ``(1, 2)``; anything else is a ValueError naming the form expected."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a contract version of the form MAJOR.MINOR (e.g. {CONTRACT_VERSION!r})")
    return int(match.group(1)), int(match.group(2))


def unmet_requirement(required: object) -> str | None:
    """Why a plugin that states ``required`` cannot load here, or None when it can (or states nothing)."""
    if required is None:
        return None
    if not isinstance(required, str):
        return f"{CONTRACT_ATTRIBUTE} must be a string like {CONTRACT_VERSION!r}, not {type(required).__name__}"
    try:
        major, minor = parse_contract(required)
    except ValueError as exc:
        return f"{CONTRACT_ATTRIBUTE}: {exc}"
    have_major, have_minor = parse_contract(CONTRACT_VERSION)
    if major != have_major:
        direction = "an older" if major < have_major else "a newer"
        return (
            f"needs plugin contract {required}; this tprimat provides {CONTRACT_VERSION} "
            f"(the plugin was written for {direction} tprimat: install a version of one that matches the other)"
        )
    if minor > have_minor:
        return f"needs plugin contract {required}; this tprimat provides {CONTRACT_VERSION} (upgrade tprimat)"
    return None
