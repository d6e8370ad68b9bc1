"""The plans tprimat ships: every framework backend x model x methodology, as the core prepares them.

Each is prepared on a machine that is its target GPU (MI300X for the AMD backends,
H100 for the NVIDIA ones), for the Megatron-core version its image carries
(:data:`MEGATRON_VERSION`), so its digest (:mod:`tprimat.running.digest`) is the
one a user's run in that image gets.  ``tools/acceptance/make_records.py`` runs the
frameworks' own checks on these plans and writes ``tests/fixtures/acceptance/``;
``test_acceptance_records.py`` fails when one has no record.
"""

from __future__ import annotations

from pathlib import Path

from tests.plugins.launching import checkout_options, prepared
from tprimat.running.prepare import PreparedRun

MODELS = ("llama3.1-8b", "qwen2.5-7b")
METHODOLOGIES = ("iso", "tuned")
MEGATRON_BACKENDS = ("amd_primus", "amd_megatron", "nvd_megatron")
#: The Megatron-core version each Megatron-family plan is rendered for: tprimat's default
#: (0.15, checked at core_v0.15.0) for nvd_megatron, and the Megatron-LM of the Primus release
#: docker/amd.Dockerfile names (v26.5: third_party/Megatron-LM at d3528a21, core 0.16.0rc0),
#: which amd_primus runs and amd_megatron uses in that image.
MEGATRON_VERSION = {"amd_primus": "0.16", "amd_megatron": "0.16", "nvd_megatron": "0.15"}


def shipped(backends: tuple[str, ...] = MEGATRON_BACKENDS) -> list[tuple[str, str, str]]:
    """(backend, model, methodology) of every shipped plan of ``backends``."""
    return [(b, m, how) for b in backends for m in MODELS for how in METHODOLOGIES]


def plan_id(backend: str, model: str, methodology: str) -> str:
    return f"{backend}-{model}-{methodology}"


def shipped_run(backend: str, model: str, methodology: str, root: Path, *, checkout: Path | None = None) -> PreparedRun:
    """The prepared run of one shipped plan (``checkout``: a real framework checkout to plan with)."""
    options = checkout_options(backend, root)
    if checkout is not None:
        options = {("primus_path" if backend == "amd_primus" else "megatron_path"): str(checkout)}
    if backend in MEGATRON_VERSION:
        options["megatron_version"] = MEGATRON_VERSION[backend]
    overrides = [f'benchmark.methodology="{methodology}"']
    return prepared(backend, model, root, overrides, options=options)
