"""Preparing runs through the core for plugin tests: a machine that is the target platform.

Tests build launch contexts the way ``tprimat run`` does (the core's
:func:`tprimat.running.prepare.prepare`: config layers, methodology, options),
on a registry whose ``detect_platform`` answers with the target GPU
(:func:`tprimat.testing.registry_on`), so a ``tuned`` run gets the target's preset.  Framework checkouts are stand-ins
that pass the launchers' path checks: a Megatron-LM core 0.15 tree, and the
real Primus config tree (fixture) with an empty ``primus-cli``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tprimat.hardware.platform import PlatformInfo
from tprimat.running.prepare import PreparedRun, RunRequest, prepare
from tprimat.testing import H100, MI300X, registry_on

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: The GPU each backend is planned for.
TARGETS = {"amd_primus": MI300X, "amd_megatron": MI300X, "nvd_megatron": H100, "nvd_nemo": H100, "torch": MI300X}


def fake_megatron(root: Path) -> Path:
    """A directory shaped like a Megatron-LM core 0.15 checkout (launch only checks paths)."""
    (root / "megatron" / "core").mkdir(parents=True, exist_ok=True)
    (root / "pretrain_gpt.py").write_text("")
    (root / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 15\nPATCH = 0\n")
    return root


def fake_primus(root: Path) -> Path:
    """The real Primus config tree (fixture) plus an empty launcher file where Primus keeps it."""
    shutil.copytree(FIXTURES / "primus_configs", root)
    (root / "runner").mkdir()
    (root / "runner" / "primus-cli").write_text("")
    return root


def checkout_options(backend: str, root: Path) -> dict[str, str]:
    """Launch options naming stand-in framework checkouts below ``root``."""
    if backend.endswith("_megatron"):
        return {"megatron_path": str(fake_megatron(root / "megatron"))}
    if backend == "amd_primus":
        return {"primus_path": str(fake_primus(root / "primus"))}
    return {}


def prepared(
    backend: str,
    model: str,
    root: Path,
    overrides: tuple[str, ...] | list[str] = (),
    *,
    platform: PlatformInfo | None = None,
    options: dict[str, str] | None = None,
) -> PreparedRun:
    """The run ``tprimat run --backend B --model M --set …`` would start on the target machine."""
    request = RunRequest(
        backend=backend,
        model=model,
        overrides=tuple(overrides),
        output=root / "runs",
        run_id="r1",
        options=checkout_options(backend, root) if options is None else options,
    )
    return prepare(request, registry_on(platform or TARGETS[backend]), environ={})
