"""Result bundles: carry a campaign's results off a cluster, and prove they arrived intact.

A bundle is a ``.tar.gz`` of run directories (results, manifests, configs,
logs, optionally traces) with a ``SHA256SUMS`` file in ``sha256sum`` format at
its root.  ``unbundle`` extracts safely (no absolute paths, no ``..``, no
links) and verifies every checksum, so a truncated copy is caught.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from tprimat.errors import TprimatError

CHECKSUMS = "SHA256SUMS"
#: Files a bundle always carries; traces only when asked.
INCLUDED_SUFFIXES = (".json", ".toml", ".log", ".txt", ".md", ".csv", ".yaml", ".yml", ".sh", ".py", ".out", ".err")
TRACE_MARKERS = (".pt.trace.json", ".nsys-rep", ".sqlite", ".rocpd", ".db")


class BundleError(TprimatError):
    """A bundle that cannot be made, read or verified."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_trace(path: Path) -> bool:
    name = path.name
    return any(marker in name for marker in TRACE_MARKERS) or "traces" in path.parts


def select_files(directory: Path, *, include_traces: bool = False) -> Iterator[Path]:
    """The files of ``directory`` a bundle carries, sorted, as paths relative to it."""
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(directory)
        if any(part.startswith(".") for part in relative.parts):
            continue  # temp files of atomic writes, hidden state
        if _is_trace(relative):
            if include_traces:
                yield relative
            continue
        if path.name.endswith(INCLUDED_SUFFIXES) or path.name.endswith(".json.gz"):
            yield relative


def make_bundle(directory: str | Path, output: str | Path, *, include_traces: bool = False) -> Path:
    """Pack ``directory`` into ``output`` (written atomically) with a checksum list."""
    source = Path(directory)
    if not source.is_dir():
        raise BundleError(f"{source} is not a directory")
    files = list(select_files(source, include_traces=include_traces))
    if not files:
        raise BundleError(f"{source} holds no results, manifests, configs or logs to bundle")
    root = PurePosixPath(source.resolve().name)
    sums = "".join(f"{_sha256(source / f)}  {PurePosixPath(*f.parts)}\n" for f in files)
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            with tarfile.open(fileobj=tmp, mode="w:gz") as tar:
                for relative in files:
                    tar.add(source / relative, arcname=str(root / PurePosixPath(*relative.parts)), recursive=False)
                data = sums.encode()
                info = tarfile.TarInfo(str(root / CHECKSUMS))
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
            tmp.flush()
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
    tmp_path.replace(target)
    return target


def _safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members = []
    for member in tar.getmembers():
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise BundleError(f"refusing unsafe path in bundle: {member.name}")
        if not (member.isfile() or member.isdir()):
            raise BundleError(f"refusing link or special file in bundle: {member.name}")
        members.append(member)
    return members


def unbundle(bundle: str | Path, output: str | Path) -> tuple[Path, int]:
    """Extract ``bundle`` under ``output`` and verify every checksum; return (root, files)."""
    target = Path(output)
    try:
        with tarfile.open(bundle, mode="r:gz") as tar:
            members = _safe_members(tar)
            tar.extractall(target, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(f"{bundle}: not a readable bundle ({type(exc).__name__}: {exc})") from None
    sums = [m for m in members if PurePosixPath(m.name).name == CHECKSUMS]
    if len(sums) != 1:
        raise BundleError(f"{bundle}: no {CHECKSUMS} file; cannot verify it")
    root = target / PurePosixPath(sums[0].name).parent
    listed = (root / CHECKSUMS).read_text().splitlines()
    bad: list[str] = []
    for line in listed:
        digest, _, name = line.partition("  ")
        path = root / name
        if not path.is_file():
            bad.append(f"{name}: missing")
        elif _sha256(path) != digest:
            bad.append(f"{name}: checksum differs")
    if bad:
        raise BundleError(f"{bundle}: {len(bad)} file(s) failed verification: " + "; ".join(bad[:10]))
    return root, len(listed)
