"""The run manifest: hardware, software and environment captured where the run happens.

``tprimat run`` writes ``manifest.json`` into the run directory at launch.
``tprimat parse`` reads it (given, or found next to the log) to fill a
result's hardware and software; without one they stay null, because the
machine parsing a log is not the machine that ran it.

Provenance recorded beside the versions: the container image and its digest
(``TPRIMAT_CONTAINER_IMAGE``, ``TPRIMAT_CONTAINER_DIGEST``; tprimat's
Dockerfiles set the image name and the vendor base image,
``TPRIMAT_BASE_IMAGE``), the git commit of every framework checkout the plan
uses and of the submodules it names (Primus keeps Megatron-LM as one), the
framework packages' versions, and tprimat's own commit (its checkout's, or
``TPRIMAT_GIT_COMMIT`` in an image built from one).  Commits are read from
the ``.git`` directory itself, so no ``git`` program is needed.
"""

from __future__ import annotations

import configparser
import json
import os
import platform as _stdlib_platform
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import cattrs

from tprimat import __version__
from tprimat.atomic import atomic_write_text
from tprimat.errors import TprimatError
from tprimat.hardware.environment import performance_environment
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.schema import Hardware, Software

MANIFEST_NAME = "manifest.json"


#: Framework packages whose versions a run records when they are installed (torch has its own field).
FRAMEWORK_PACKAGES = (
    "transformers",
    "megatron-core",
    "megatron-bridge",
    "nemo-toolkit",
    "nemo-run",
    "transformer-engine",
    "apex",
    "flash-attn",
    "triton",
    "pytorch-triton-rocm",
)
#: Where tprimat's Dockerfiles and the user name the image a run happens in.
CONTAINER_ENV = {
    "container_image": "TPRIMAT_CONTAINER_IMAGE",
    "container_digest": "TPRIMAT_CONTAINER_DIGEST",
    "container_base_image": "TPRIMAT_BASE_IMAGE",
}
#: tprimat's commit in an image built from a checkout (no .git inside the image).
TPRIMAT_COMMIT_ENV = "TPRIMAT_GIT_COMMIT"
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class ManifestError(TprimatError):
    """A manifest that cannot be read."""


@attrs.frozen(kw_only=True)
class Manifest:
    tprimat_version: str
    created_at: str
    hardware: Hardware
    software: Software
    platform: str | None = None  # amd | nvidia | cpu
    environment: dict[str, str] = attrs.Factory(dict)  # performance-relevant, secrets redacted
    command: list[str] = attrs.Factory(list)
    launcher: str | None = None  # the program tprimat started, e.g. "torchrun"
    deployment: str | None = None  # "local", "slurm" or "k8s"
    tags: dict[str, str] = attrs.Factory(dict)  # the user's labels (`tprimat run --tag KEY=VALUE`)
    extra: dict[str, Any] = attrs.Factory(dict)  # findings, microbench references, ...


_converter = cattrs.Converter(forbid_extra_keys=True)


def hardware_from_platform(info: PlatformInfo, *, nodes: int = 1) -> Hardware:
    """The result's hardware section from what ``detect_platform`` found here, now."""
    return Hardware(
        device_name=info.device_name,
        device_count_per_node=info.device_count,
        nodes=nodes,
        memory_per_device_gib=info.memory_per_device_gib,
        driver_version=info.driver_version,
        hostname=info.hostname,
        cpu=info.cpu,
        captured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        source=info.source,
        partition=info.partition,
    )


def software_from_platform(info: PlatformInfo, **known: str | None) -> Software:
    """Software versions known without importing frameworks (callers add torch etc.).

    The container fields come from the environment (:data:`CONTAINER_ENV`) before ``known``.
    """
    container = {field: os.environ.get(name) or known.pop(field, None) for field, name in CONTAINER_ENV.items()}
    # Version strings by field name: only Software's str fields are named (a wrong name is a TypeError).
    versions: dict[str, Any] = {**container, **{k: v for k, v in known.items() if v is not None}}
    return Software(
        python=_stdlib_platform.python_version(),
        cuda=info.stack_version if info.stack == "cuda" else None,
        rocm=info.stack_version if info.stack == "rocm" else None,
        tprimat_commit=tprimat_commit(),
        extra=package_versions(FRAMEWORK_PACKAGES),
        **versions,
    )


def capture_manifest(
    info: PlatformInfo,
    *,
    nodes: int = 1,
    checkouts: Iterable[str | Path] = (),
    launcher: str | None = None,
    deployment: str | None = None,
    tags: Mapping[str, str] | None = None,
    **software: str | None,
) -> Manifest:
    """A manifest of this machine, now; ``checkouts``: the framework directories the run uses."""
    found = software_from_platform(info, **software)
    return Manifest(
        tprimat_version=__version__,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hardware=hardware_from_platform(info, nodes=nodes),
        software=attrs.evolve(found, framework_commits=checkout_commits(checkouts)),
        platform=info.platform,
        environment=performance_environment(),
        command=[os.path.basename(sys.argv[0]), *sys.argv[1:]],
        launcher=launcher,
        deployment=deployment,
        tags=dict(tags or {}),
    )


#: ``python -m MODULE`` launchers by the name their own command has.
_MODULE_LAUNCHERS = {"torch.distributed.run": "torchrun"}


def launcher_of(argv: Sequence[str]) -> str | None:
    """The launcher a plan starts: its program's name, or for ``python -m MODULE`` the module's.

    ``python -m torch.distributed.run ...`` is ``torchrun``; ``bash run_pretrain.sh`` is ``bash``.
    """
    if not argv:
        return None
    program = Path(argv[0]).name
    if re.fullmatch(r"python[\d.]*", program) and len(argv) > 2 and argv[1] == "-m":
        return _MODULE_LAUNCHERS.get(argv[2], argv[2])
    return program


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """The installed version of each package in ``names`` (those not installed left out)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def tprimat_commit() -> str | None:
    """The commit of the tprimat checkout this code runs from, else ``$TPRIMAT_GIT_COMMIT``, else None.

    A checkout is the directory above the package (the package is ``core/``);
    an installed wheel has no ``.git`` there.
    """
    return git_commit(Path(__file__).resolve().parents[2]) or os.environ.get(TPRIMAT_COMMIT_ENV) or None


def checkout_commits(directories: Iterable[str | Path]) -> dict[str, str]:
    """Directory -> git commit of each checkout in ``directories`` and of the submodules it names.

    A directory that is not a git checkout is left out (a copied tree has no commit).
    """
    commits: dict[str, str] = {}
    for directory in directories:
        root = Path(directory).expanduser()
        for path in [root, *_submodules(root)]:
            commit = git_commit(path)
            if commit is not None:
                commits[str(path)] = commit
    return commits


def _submodules(root: Path) -> list[Path]:
    """The submodule directories ``root/.gitmodules`` names (empty without one)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string((root / ".gitmodules").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return []
    return [root / parser[s]["path"] for s in parser.sections() if s.startswith("submodule") and "path" in parser[s]]


def git_commit(directory: str | Path) -> str | None:
    """The commit checked out in ``directory`` (its own ``.git``, not a parent's), or None.

    Reads ``HEAD`` and the ref it names (loose, then packed), following a
    ``.git`` file to the real git directory (submodules, worktrees).
    """
    git = _git_dir(Path(directory))
    if git is None:
        return None
    head = _read(git / "HEAD")
    if head is None:
        return None
    if not head.startswith("ref: "):
        return head if _COMMIT.match(head) else None
    ref = head[len("ref: ") :]
    common = git
    pointer = _read(git / "commondir")  # a worktree keeps its refs in the main git directory
    if pointer is not None:
        common = (git / pointer).resolve()
    for place in dict.fromkeys((git, common)):
        loose = _read(place / ref)
        if loose is not None and _COMMIT.match(loose):
            return loose
        for line in (_read(place / "packed-refs") or "").splitlines():
            commit, _, name = line.partition(" ")
            if name == ref and _COMMIT.match(commit):
                return commit
    return None


def _git_dir(directory: Path) -> Path | None:
    dot_git = directory / ".git"
    if dot_git.is_dir():
        return dot_git
    text = _read(dot_git)
    if text is not None and text.startswith("gitdir: "):
        return (directory / text[len("gitdir: ") :]).resolve()
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def write_manifest(manifest: Manifest, directory: str | Path) -> Path:
    data = _converter.unstructure(manifest)
    return atomic_write_text(Path(directory) / MANIFEST_NAME, json.dumps(data, indent=2) + "\n")


def load_manifest(path: str | Path) -> Manifest:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return _converter.structure(data, Manifest)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read manifest: {exc.strerror}") from None
    except (json.JSONDecodeError, cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ManifestError(f"{path}: not a tprimat manifest ({type(exc).__name__})") from None


def find_manifest(log_path: str | Path) -> Path | None:
    """A ``manifest.json`` beside the log or in one of its parent directories (up to 3 up)."""
    start = Path(log_path).resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in [directory, *list(directory.parents)[:3]]:
        path = candidate / MANIFEST_NAME
        if path.is_file():
            return path
    return None
