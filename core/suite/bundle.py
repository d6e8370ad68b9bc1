"""Result bundles: carry a campaign's results off a cluster, and prove they arrived intact.

A bundle is a ``.tar.gz`` of one directory (results, manifests, configs, logs,
optionally traces) with a ``SHA256SUMS`` file in ``sha256sum`` format at its
root.  A bundle may come from anywhere, so ``unbundle`` trusts nothing in it:

1. it reads the whole archive once without writing anything: every member must
   be a regular file or a directory with a relative path inside the bundle's
   directory, within :class:`BundleLimits`, and every file is hashed as it is
   read from the archive;
2. it compares the hashes with ``SHA256SUMS``: every file must be listed, every
   listed path must be a file of the bundle (listed paths are never looked up
   on this machine);
3. only then it extracts into a hidden directory next to the target, hashing
   again as it writes, and renames that directory into place.  On any failure
   nothing is left behind.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import attrs

from tprimat.errors import TprimatError

CHECKSUMS = "SHA256SUMS"
#: Files a bundle always carries; traces only when asked.
INCLUDED_SUFFIXES = (".json", ".toml", ".log", ".txt", ".md", ".csv", ".yaml", ".yml", ".sh", ".py", ".out", ".err")
TRACE_MARKERS = (".pt.trace.json", ".nsys-rep", ".sqlite", ".rocpd", ".db")
GIB = 2**30
#: Longest file or directory name, in UTF-8 bytes (Linux's NAME_MAX).
MAX_NAME_BYTES = 255
#: Reads from the archive are at most this long; a tar header that needs more is refused.
CHUNK_BYTES = 2**20
#: Tar headers allowed per member (ustar header, pax header, padding) on top of the file sizes.
HEADER_ALLOWANCE_BYTES = 8 * 1024
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
#: What reading a damaged archive raises: tar, gzip and zlib errors, a truncated stream.
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError, OverflowError)


class BundleError(TprimatError):
    """A bundle that cannot be made, read or verified."""


@attrs.frozen(kw_only=True)
class BundleLimits:
    """What ``unbundle`` accepts; a bundle beyond any bound is refused before it is expanded.

    The defaults hold a large campaign with traces several times over, and stop a
    hostile bundle long before it fills a disk or exhausts memory.
    """

    #: Members (files and directories) in the archive.
    max_members: int = attrs.field(default=100_000, validator=attrs.validators.ge(1))
    #: Sum of the file sizes once extracted; never more than the free space where they go.
    max_total_bytes: int = attrs.field(default=64 * GIB, validator=attrs.validators.ge(1))
    #: Length of a member's path in UTF-8 bytes, the bundle's directory included.
    max_path_bytes: int = attrs.field(default=1024, validator=attrs.validators.ge(1))
    #: Names in a member's path, the bundle's directory included.
    max_depth: int = attrs.field(default=32, validator=attrs.validators.ge(1))


@attrs.frozen(kw_only=True)
class _Member:
    """One member of a bundle, as read (and hashed) from the archive."""

    path: str  # normalised: "campaign/runs/r1/result.json"
    is_dir: bool
    size: int
    digest: str | None  # files only
    executable: bool


@attrs.frozen(kw_only=True)
class _Scan:
    """What step 1 found: the members in archive order, and the checksum list."""

    members: list[_Member]
    sums: bytes | None  # the content of <root>/SHA256SUMS
    root: str | None


# ---------------------------------------------------------------------------------------------
# Making a bundle


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
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
    _check_bundleable(source, root, files)
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


def _check_bundleable(source: Path, root: PurePosixPath, files: list[Path]) -> None:
    """Refuse to make a bundle that ``unbundle`` (with its default limits) would refuse."""
    limits = BundleLimits()
    if len(files) + 1 > limits.max_members:
        raise BundleError(f"{source}: {len(files):,} files to bundle (unbundle accepts {limits.max_members - 1:,})")
    for relative in files:
        problem = _path_problem(str(root / PurePosixPath(*relative.parts)), limits)
        if problem:
            raise BundleError(f"{source / relative}: cannot be bundled: {problem}")


# ---------------------------------------------------------------------------------------------
# Paths, sizes and messages


def _show(text: str, limit: int = 160) -> str:
    """``text`` fit for a one-line message: escaped when not printable, shortened when long."""
    shown = text if text.isprintable() else ascii(text)
    return shown if len(shown) <= limit else f"{shown[: limit // 2]}…{shown[-limit // 2 :]}"


def _size(count: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _path_problem(name: str, limits: BundleLimits) -> str | None:
    """Why the archive path ``name`` cannot be extracted, or None when it is safe."""
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "path is not valid UTF-8"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return "path holds a control character"
    if name.startswith("/"):
        return "absolute path"
    parts = PurePosixPath(name).parts
    if not parts:
        return "empty path"
    if ".." in parts:
        return "path leaves the bundle (..)"
    if len(parts) > limits.max_depth:
        return f"path is {len(parts):,} names deep (limit {limits.max_depth})"
    if len(encoded) > limits.max_path_bytes:
        return f"path is {len(encoded):,} bytes long (limit {limits.max_path_bytes:,})"
    if any(len(part.encode()) > MAX_NAME_BYTES for part in parts):
        return f"a name in the path is longer than {MAX_NAME_BYTES} bytes"
    return None


def _normal(name: str) -> str:
    return str(PurePosixPath(name))


def _free_bytes(directory: Path) -> int:
    """Free space of the filesystem that holds (or will hold) ``directory``."""
    existing = directory.absolute()
    while not existing.exists():
        existing = existing.parent
    return shutil.disk_usage(existing).free


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"


# ---------------------------------------------------------------------------------------------
# Reading an archive with bounded cost


class _BoundedStream:
    """The decompressed tar stream of a bundle, refusing reads no bundle within the limits needs.

    tarfile reads a pax or GNU long-name header whole, whatever size it declares,
    and skips forward by the sizes headers declare; this refuses a read of more
    than :data:`CHUNK_BYTES` at once, and any position past ``limit_bytes``, so a
    crafted header can neither exhaust memory nor make gzip expand without end.
    """

    def __init__(self, unzipped: gzip.GzipFile, bundle: Path, limit_bytes: int) -> None:
        self._unzipped = unzipped
        self._bundle = bundle
        self._limit_bytes = limit_bytes

    def _check(self, end: int) -> None:
        if end > self._limit_bytes:
            raise BundleError(
                f"{self._bundle}: more than {_size(self._limit_bytes)} of tar data, "
                "beyond what the member and size limits allow"
            )

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > CHUNK_BYTES:
            raise BundleError(f"{self._bundle}: a tar header of {size:,} bytes (limit {CHUNK_BYTES:,})")
        data = self._unzipped.read(size)
        self._check(self._unzipped.tell())
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET:
            raise io.UnsupportedOperation("only absolute seeks")
        self._check(offset)
        return self._unzipped.seek(offset)

    def tell(self) -> int:
        return self._unzipped.tell()


class _Archive:
    """One sequential pass over a bundle's members, each read error turned into a BundleError."""

    def __init__(self, bundle: Path, limits: BundleLimits) -> None:
        self.bundle = bundle
        self._limit_bytes = limits.max_total_bytes + limits.max_members * HEADER_ALLOWANCE_BYTES + CHUNK_BYTES
        self._file: io.BufferedReader | None = None
        self._unzipped: gzip.GzipFile | None = None
        self._stream: _BoundedStream | None = None
        self._tar: tarfile.TarFile | None = None

    def __enter__(self) -> _Archive:
        try:
            self._file = open(self.bundle, "rb")  # closed in __exit__
            self._unzipped = gzip.GzipFile(fileobj=self._file, mode="rb")
            self._stream = _BoundedStream(self._unzipped, self.bundle, self._limit_bytes)
            # typeshed's tarfile asks every fileobj for write() and close(), which reading never calls.
            self._tar = tarfile.open(  # type: ignore[call-overload]
                fileobj=self._stream, mode="r:", encoding="utf-8", errors="surrogateescape"
            )
        except _READ_ERRORS as exc:
            self.__exit__()
            raise BundleError(f"{self.bundle}: not a readable bundle ({_one_line(exc)})") from None
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._unzipped is not None:
            self._unzipped.close()
        if self._file is not None:
            self._file.close()

    def members(self) -> Iterator[tarfile.TarInfo]:
        assert self._tar is not None
        previous = None
        while True:
            try:
                info = self._tar.next()
            except _READ_ERRORS as exc:
                where = f" after {_show(previous)}" if previous else ""
                raise BundleError(f"{self.bundle}: not a readable bundle{where} ({_one_line(exc)})") from None
            if info is None:
                return
            previous = info.name
            yield info

    def read_to_end(self) -> None:
        """Read past the last member to the end of the gzip stream, so that gzip checks its CRC and length."""
        assert self._stream is not None
        try:
            while self._stream.read(CHUNK_BYTES):
                pass
        except _READ_ERRORS as exc:
            raise BundleError(
                f"{self.bundle}: not a readable bundle after its last member ({_one_line(exc)})"
            ) from None

    def chunks(self, info: tarfile.TarInfo) -> Iterator[bytes]:
        assert self._tar is not None
        try:
            handle = self._tar.extractfile(info)
            assert handle is not None
            while chunk := handle.read(CHUNK_BYTES):
                yield chunk
        except _READ_ERRORS as exc:
            raise BundleError(
                f"{self.bundle}: not a readable bundle at {_show(info.name)} ({_one_line(exc)})"
            ) from None


# ---------------------------------------------------------------------------------------------
# Step 1: read and hash every member, write nothing


def _check_member(bundle: Path, info: tarfile.TarInfo, limits: BundleLimits) -> str:
    """The normalised path of ``info``, or a BundleError saying why it cannot be extracted."""
    problem = _path_problem(info.name, limits)
    if problem:
        raise BundleError(f"{bundle}: unsafe path {_show(info.name)}: {problem}")
    if not (info.isdir() or (info.isreg() and not info.issparse())):
        kind = "a link" if info.issym() or info.islnk() else "a sparse file" if info.issparse() else "a special file"
        raise BundleError(f"{bundle}: {_show(info.name)}: {kind}; a bundle holds only files and directories")
    return _normal(info.name)


def _check_size(bundle: Path, name: str, total_bytes: int, limits: BundleLimits, free_bytes: int) -> None:
    if total_bytes > limits.max_total_bytes:
        raise BundleError(
            f"{bundle}: {_show(name)}: files add up to more than {_size(limits.max_total_bytes)} "
            f"(the limit; unbundle --max-gib raises it for a bundle you trust)"
        )
    if total_bytes > free_bytes:
        raise BundleError(
            f"{bundle}: {_show(name)}: files add up to more than the {_size(free_bytes)} free where they would go"
        )


def _hash(archive: _Archive, info: tarfile.TarInfo, keep: bool) -> tuple[str, bytes | None]:
    digest = hashlib.sha256()
    kept = bytearray() if keep else None
    for chunk in archive.chunks(info):
        digest.update(chunk)
        if kept is not None:
            kept += chunk
    return digest.hexdigest(), None if kept is None else bytes(kept)


def _scan(bundle: Path, limits: BundleLimits, free_bytes: int) -> _Scan:
    members: list[_Member] = []
    seen: set[str] = set()
    sums: bytes | None = None
    root: str | None = None
    total_bytes = 0
    sums_limit = limits.max_members * (limits.max_path_bytes + 68)
    with _Archive(bundle, limits) as archive:
        for info in archive.members():
            if len(members) == limits.max_members:
                raise BundleError(f"{bundle}: more than {limits.max_members:,} members (the limit)")
            path = _check_member(bundle, info, limits)
            if path in seen:
                raise BundleError(f"{bundle}: {_show(path)}: appears twice")
            seen.add(path)
            digest = data = None
            if not info.isdir():
                total_bytes += info.size
                _check_size(bundle, path, total_bytes, limits, free_bytes)
                is_sums = PurePosixPath(path).name == CHECKSUMS and path.count("/") == 1
                if is_sums and (root is not None or info.size > sums_limit):
                    why = "a second checksum list" if root is not None else f"larger than {_size(sums_limit)}"
                    raise BundleError(f"{bundle}: {_show(path)}: {why}")
                digest, data = _hash(archive, info, keep=is_sums)
                if is_sums:
                    sums, root = data, path.partition("/")[0]
            members.append(
                _Member(
                    path=path, is_dir=info.isdir(), size=info.size, digest=digest, executable=bool(info.mode & 0o100)
                )
            )
        archive.read_to_end()
    return _Scan(members=members, sums=sums, root=root)


# ---------------------------------------------------------------------------------------------
# Step 2: compare the hashes with SHA256SUMS


def _parse_sums(bundle: Path, root: str, data: bytes, limits: BundleLimits) -> dict[str, str]:
    """``SHA256SUMS`` as {archive path: digest}; every listed path checked as a member path would be."""
    where = f"{bundle}: {root}/{CHECKSUMS}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{where}: not valid UTF-8 (byte {exc.start:,})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > limits.max_members:
        raise BundleError(f"{where}: {len(lines):,} lines, more than the {limits.max_members:,} members allowed")
    listed: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        digest, name = line[:64], line[66:]
        if not (_DIGEST.fullmatch(digest) and line[64:66] in ("  ", " *") and name):
            raise BundleError(f"{where} line {number}: not '<sha256>  <path>': {_show(line[:120])}")
        problem = _path_problem(name, limits) or _path_problem(f"{root}/{name}", limits)
        if problem:
            raise BundleError(f"{where} line {number}: {_show(name)}: {problem}")
        path = _normal(f"{root}/{name}")
        if path in listed:
            raise BundleError(f"{where} line {number}: {_show(name)}: listed twice")
        listed[path] = digest.lower()
    if not listed:
        raise BundleError(f"{where}: lists no files; there is nothing to verify")
    return listed


def _problems(scan: _Scan, root: str, listed: dict[str, str]) -> list[str]:
    """What keeps the members of ``scan`` from matching ``listed``, one entry per file."""
    sums_path = f"{root}/{CHECKSUMS}"
    members = {m.path: m for m in scan.members}
    files = {m.path for m in scan.members if not m.is_dir}
    listed_dirs = {str(parent) for path in listed for parent in PurePosixPath(path).parents}
    problems = []
    for member in scan.members:
        if not (member.path == root or member.path.startswith(root + "/")):
            problems.append(f"{_show(member.path)}: outside {root}/, not listed in {CHECKSUMS}")
        elif member.is_dir and member.path not in listed_dirs and member.path not in listed:
            problems.append(f"{_show(member.path)}/: no listed file in it")
        elif not member.is_dir and member.path not in listed and member.path != sums_path:
            problems.append(f"{_show(member.path)}: not listed in {CHECKSUMS}")
        elif any(str(parent) in files for parent in PurePosixPath(member.path).parents):
            problems.append(f"{_show(member.path)}: inside a file of the same bundle")
    for path, digest in listed.items():
        found = members.get(path)
        if path == sums_path:
            problems.append(f"{path}: lists itself")
        elif found is None:
            problems.append(f"{_show(path)}: missing")
        elif found.is_dir:
            problems.append(f"{_show(path)}: a directory, listed as a file")
        elif found.digest != digest:
            problems.append(f"{_show(path)}: checksum differs")
    return problems


def _verify(bundle: Path, scan: _Scan, limits: BundleLimits) -> tuple[str, int]:
    """The bundle's directory and the number of files verified, or a BundleError listing what is wrong."""
    if scan.root is None or scan.sums is None:
        raise BundleError(f"{bundle}: no <directory>/{CHECKSUMS} file; cannot verify it")
    listed = _parse_sums(bundle, scan.root, scan.sums, limits)
    problems = _problems(scan, scan.root, listed)
    if problems:
        more = f"; and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise BundleError(f"{bundle}: {len(problems)} file(s) failed verification: " + "; ".join(problems[:10]) + more)
    return scan.root, len(listed)


# ---------------------------------------------------------------------------------------------
# Step 3: extract what was verified (a second read of the archive)


def _write_file(archive: _Archive, info: tarfile.TarInfo, member: _Member, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    digest = hashlib.sha256()
    with os.fdopen(os.open(destination, flags, 0o755 if member.executable else 0o644), "wb") as handle:
        for chunk in archive.chunks(info):
            digest.update(chunk)
            handle.write(chunk)
    if digest.hexdigest() != member.digest:
        raise BundleError(f"{archive.bundle}: {_show(member.path)}: changed while it was being extracted")
    if isinstance(info.mtime, int | float) and 0 <= info.mtime < 2**32:
        os.utime(destination, (info.mtime, info.mtime))


def _write_members(bundle: Path, scan: _Scan, staging: Path, limits: BundleLimits) -> None:
    expected = iter(scan.members)
    with _Archive(bundle, limits) as archive:
        for info in archive.members():
            member = next(expected, None)
            if (
                member is None
                or (_normal(info.name), info.isdir()) != (member.path, member.is_dir)
                or (not member.is_dir and info.size != member.size)
            ):
                raise BundleError(f"{bundle}: {_show(info.name)}: changed while it was being extracted")
            destination = staging.joinpath(*PurePosixPath(member.path).parts[1:])
            if member.is_dir:
                destination.mkdir(parents=True, exist_ok=True)
            else:
                _write_file(archive, info, member, destination)
    extra = next(expected, None)
    if extra is not None:
        raise BundleError(f"{bundle}: {_show(extra.path)}: changed while it was being extracted")


def _missing_parents(directory: Path) -> list[Path]:
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _extract(bundle: Path, scan: _Scan, root: str, target: Path, limits: BundleLimits) -> Path:
    """Extract into a hidden directory in ``target``, then rename it to ``target/root``."""
    final = target / root
    created = _missing_parents(target)
    staging: Path | None = None
    try:
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target, prefix=f".{root[:64]}.unbundle-"))
        _write_members(bundle, scan, staging, limits)
        if os.path.lexists(final):
            raise BundleError(f"{bundle}: {final} appeared while it was being extracted; nothing was changed")
        staging.chmod(0o755)
        staging.rename(final)
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for directory in created:
            try:
                directory.rmdir()
            except OSError:
                break
        if isinstance(exc, OSError):
            raise BundleError(f"{bundle}: cannot extract into {target} ({_one_line(exc)}); nothing was left") from None
        raise
    return final


def unbundle(bundle: str | Path, output: str | Path, *, limits: BundleLimits | None = None) -> tuple[Path, int]:
    """Verify ``bundle`` whole, then extract it under ``output``; return (its directory, files verified).

    Nothing is written unless every member is a listed file (or a directory) whose
    checksum matches, within ``limits``; ``output/<directory>`` must not exist yet.
    """
    bundle, target, limits = Path(bundle), Path(output), limits or BundleLimits()
    if target.exists() and not target.is_dir():
        raise BundleError(f"{target} is not a directory; cannot extract {bundle} into it")
    try:
        free_bytes = _free_bytes(target)
    except OSError as exc:
        raise BundleError(f"{target}: cannot tell the free space there ({_one_line(exc)})") from None
    scan = _scan(bundle, limits, free_bytes)
    root, files = _verify(bundle, scan, limits)
    if os.path.lexists(target / root):
        raise BundleError(f"{bundle}: {target / root} already exists; remove it or extract elsewhere (-o)")
    return _extract(bundle, scan, root, target, limits), files
