"""``unbundle`` on crafted bundles: verified before anything is written, bounded, one-line errors.

Every bundle here is a real ``.tar.gz`` built in ``tmp_path``; none is expanded
beyond a few kilobytes, the compression bomb included.
"""

import gzip
import hashlib
import io
import os
import shutil
import struct
import tarfile
import zlib

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.suite import bundle as bundle_module
from tprimat.suite.bundle import CHECKSUMS, GIB, BundleError, BundleLimits, make_bundle, unbundle

GOOD = {"runs/r1/result.json": b'{"schema_version": 1}\n', "runs/r1/logs/rank-0.log": b"iteration 1\n" * 20}


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    return info, data


def _entry(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def _sums(files, extra="", root="b"):
    text = "".join(f"{_sha(data)}  {name}\n" for name, data in files.items()) + extra
    return _file(f"{root}/{CHECKSUMS}", text.encode())


def _good(root="b"):
    return [_file(f"{root}/{name}", data) for name, data in GOOD.items()]


def _bundle(path, members, fmt=tarfile.PAX_FORMAT):
    with tarfile.open(path, "w:gz", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return path


def _refused(bundle, out, *options):
    """Run ``tprimat unbundle``; it must fail with one line naming the bundle, exit 2, nothing written."""
    result = CliRunner().invoke(cli, ["unbundle", str(bundle), "-o", str(out), *options])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bundle}: "), result.output
    assert not out.exists() or not any(out.iterdir())
    return lines[0]


def test_an_unlisted_member_is_refused_and_nothing_is_extracted(tmp_path):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _file("b/runs/evil/result.json", b"{}"), _sums(GOOD)])
    line = _refused(bundle, tmp_path / "out")
    assert "b/runs/evil/result.json: not listed in SHA256SUMS" in line


def test_a_member_outside_the_bundle_directory_is_refused(tmp_path):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _file("elsewhere/result.json", b"{}"), _sums(GOOD)])
    assert "elsewhere/result.json: outside b/" in _refused(bundle, tmp_path / "out")


def test_an_empty_checksum_list_verifies_nothing_and_is_refused(tmp_path):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _file(f"b/{CHECKSUMS}", b"")])
    assert "lists no files; there is nothing to verify" in _refused(bundle, tmp_path / "out")


def test_a_failed_check_leaves_nothing_behind(tmp_path):
    members = [_file("b/runs/r1/result.json", b'{"schema_version": 2}\n'), *_good()[1:], _sums(GOOD)]
    bundle = _bundle(tmp_path / "b.tar.gz", members)
    out = tmp_path / "out"
    assert "b/runs/r1/result.json: checksum differs" in _refused(bundle, out)
    assert not out.exists()  # not even the target directory was created
    out.mkdir()
    _refused(bundle, out)
    assert list(out.iterdir()) == []  # no staging directory either


@pytest.mark.parametrize("listed", ["{secret}", "../../{name}", "./../{name}", "runs/../../{name}"])
def test_listed_paths_outside_the_bundle_are_refused_without_looking_them_up(tmp_path, listed):
    secret = tmp_path / "host-secret.txt"
    secret.write_bytes(b"not for you\n")
    line = f"{_sha(secret.read_bytes())}  {listed.format(secret=secret, name=secret.name)}\n"
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _sums(GOOD, extra=line)])
    message = _refused(bundle, tmp_path / "out")
    assert f"b/{CHECKSUMS} line 3: " in message and ("absolute path" in message or "leaves the bundle" in message)


def test_whether_a_listed_host_path_exists_is_not_revealed(tmp_path):
    exists, missing = tmp_path / "exists.txt", tmp_path / "missing.txt"
    exists.write_text("x")
    messages = []
    for path in (exists, missing):
        bundle = _bundle(tmp_path / f"{path.stem}.tar.gz", [*_good(), _sums(GOOD, extra=f"{'0' * 64}  {path}\n")])
        messages.append(_refused(bundle, tmp_path / "out").replace(path.stem, "?"))
    assert messages[0] == messages[1]


def test_a_member_2000_directories_deep_is_refused(tmp_path):
    deep = "b/" + "d/" * 2000 + "result.json"
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _file(deep, b"{}"), _sums({**GOOD, deep[2:]: b"{}"})])
    assert "path is 2,002 names deep (limit 32)" in _refused(bundle, tmp_path / "out")


def test_a_checksum_list_in_invalid_utf8_is_refused(tmp_path):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _file(f"b/{CHECKSUMS}", b"\xff\xfe" + b"0" * 64 + b"\n")])
    assert f"b/{CHECKSUMS}: not valid UTF-8 (byte 0)" in _refused(bundle, tmp_path / "out")


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """A real gzip bomb: 2.1 MB that expand to a tar member of 2,100 MiB of zeros.

    Deflate output after a full flush depends only on the input that follows, so
    one compressed MiB of zeros is repeated instead of compressing 2 GiB.
    """
    mib, count = bytes(2**20), 2100
    header = tarfile.TarInfo("b/zeros")
    header.size = count * len(mib)
    raw = header.tobuf(tarfile.PAX_FORMAT)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(raw) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(mib) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert deflate.compress(mib) + deflate.flush(zlib.Z_FULL_FLUSH) == block
    end = bytes(1024)  # the end-of-archive blocks
    tail = deflate.compress(end) + deflate.flush()
    crc = zlib.crc32(raw)
    for _ in range(count):
        crc = zlib.crc32(mib, crc)
    crc = zlib.crc32(end, crc)
    size = len(raw) + count * len(mib) + len(end)
    path = tmp_path_factory.mktemp("bomb") / "bomb.tar.gz"
    trailer = struct.pack("<II", crc, size % 2**32)
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + head + block * count + tail + trailer)
    return path


@pytest.fixture
def decompressed_bytes(monkeypatch):
    """How many bytes gzip hands out while the test runs."""
    count = [0]
    read = gzip.GzipFile.read

    def counting(self, size=-1):
        data = read(self, size)
        count[0] += len(data)
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", counting)
    return count


def test_a_compression_bomb_is_refused_by_the_size_limit_without_expanding_it(tmp_path, bomb, decompressed_bytes):
    assert bomb.stat().st_size < 3 * 2**20  # 2.1 GiB once expanded
    line = _refused(bomb, tmp_path / "out", "--max-gib", "1")
    assert "b/zeros: files add up to more than 1.0 GiB (the limit; unbundle --max-gib raises it" in line
    assert decompressed_bytes[0] < 64 * 1024


def test_a_compression_bomb_is_refused_beyond_the_free_space(tmp_path, bomb, monkeypatch, decompressed_bytes):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=GIB))
    line = _refused(bomb, tmp_path / "out")  # the default limit (64 GiB) would allow it
    assert "b/zeros: files add up to more than the 1.0 GiB free where they would go" in line
    assert decompressed_bytes[0] < 64 * 1024


def test_a_huge_pax_header_is_refused_before_it_is_read(tmp_path, decompressed_bytes):
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, GIB
    (tmp_path / "pax.tar.gz").write_bytes(gzip.compress(header.tobuf(tarfile.USTAR_FORMAT) + bytes(2**16)))
    assert "a tar header of 1,073,741,824 bytes (limit 1,048,576)" in _refused(tmp_path / "pax.tar.gz", tmp_path / "o")
    assert decompressed_bytes[0] < 64 * 1024


def test_the_member_count_is_bounded(tmp_path):
    files = {f"f{i}.json": b"{}" for i in range(5)}
    bundle = _bundle(tmp_path / "b.tar.gz", [*(_file(f"b/{n}", d) for n, d in files.items()), _sums(files)])
    with pytest.raises(BundleError, match=r"more than 4 members \(the limit\)"):
        unbundle(bundle, tmp_path / "out", limits=BundleLimits(max_members=4))
    assert unbundle(bundle, tmp_path / "out", limits=BundleLimits(max_members=6))[1] == 5


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ([_entry("b/link", tarfile.SYMTYPE, "/etc/passwd")], "b/link: a link"),
        ([_entry("b/hard", tarfile.LNKTYPE, "b/runs/r1/result.json")], "b/hard: a link"),
        ([_entry("b/fifo", tarfile.FIFOTYPE)], "b/fifo: a special file"),
        ([_entry("b/dev", tarfile.CHRTYPE)], "b/dev: a special file"),
        ([_file("/etc/evil", b"1")], "unsafe path /etc/evil: absolute path"),
        ([_file("b/../../evil", b"1")], "unsafe path b/../../evil: path leaves the bundle (..)"),
        ([_file("b/" + "n" * 300, b"1")], "a name in the path is longer than 255 bytes"),
        ([_file("b/" + ("n" * 200 + "/") * 6 + "x", b"1")], "path is 1,209 bytes long (limit 1,024)"),
        ([_file("b/x\ny", b"1")], r"unsafe path 'b/x\ny': path holds a control character"),
        ([_file("b/runs//r1/./result.json", b"evil")], "b/runs/r1/result.json: appears twice"),
        ([_file("b/runs/r1/result.json/inner", b"1")], "b/runs/r1/result.json/inner: not listed"),
        ([_sums(GOOD, root="c")], f"{CHECKSUMS}: a second checksum list"),
    ],
)
def test_members_that_are_not_plain_files_inside_the_bundle_are_refused(tmp_path, members, problem):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), *members, _sums(GOOD)], fmt=tarfile.GNU_FORMAT)
    assert problem in _refused(bundle, tmp_path / "out")


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("not a checksum line\n", f"{CHECKSUMS} line 3: not '<sha256>  <path>'"),
        (f"{_sha(b'x')}  runs/r1/result.json\n", "runs/r1/result.json: listed twice"),
        (f"{_sha(b'x')}  runs/r1/missing.json\n", "b/runs/r1/missing.json: missing"),
        (f"{_sha(b'x')}  {CHECKSUMS}\n", f"b/{CHECKSUMS}: lists itself"),
    ],
)
def test_a_checksum_list_that_does_not_match_the_members_is_refused(tmp_path, extra, problem):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _sums(GOOD, extra=extra)])
    assert problem in _refused(bundle, tmp_path / "out")


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda blob: blob[: len(blob) // 2], "not a readable bundle"),  # truncated gzip
        (lambda blob: blob[:-4], "not a readable bundle after its last member"),  # gzip trailer cut short
        (lambda blob: blob[:10] + bytes(len(blob) - 10), "not a readable bundle"),  # corrupt deflate data
        (lambda blob: b"not a gzip file", "not a readable bundle (BadGzipFile"),
        (lambda blob: b"", "not a readable bundle"),
        (lambda blob: gzip.compress(gzip.decompress(blob)[:520]), "not a readable bundle at b/runs/r1/result.json"),
        (lambda blob: gzip.compress(b""), "not a readable bundle (ReadError: empty file)"),
        (lambda blob: gzip.compress(bytes(1024)), f"no <directory>/{CHECKSUMS} file"),
    ],
)
def test_damaged_archives_are_one_line_errors(tmp_path, damage, problem):
    good = _bundle(tmp_path / "good.tar.gz", [*_good(), _sums(GOOD)])
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(damage(good.read_bytes()))
    assert problem in _refused(bad, tmp_path / "out")


def test_an_existing_directory_is_never_overwritten(tmp_path):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _sums(GOOD)])
    (tmp_path / "out" / "b").mkdir(parents=True)
    (tmp_path / "out" / "b" / "mine.txt").write_text("keep")
    result = CliRunner().invoke(cli, ["unbundle", str(bundle), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "already exists; remove it or extract elsewhere" in result.output
    assert [p.name for p in (tmp_path / "out" / "b").iterdir()] == ["mine.txt"]


def test_a_bundle_changed_between_verification_and_extraction_leaves_nothing(tmp_path, monkeypatch):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _sums(GOOD)])
    changed = _file("b/runs/r1/result.json", b'{"schema_version": 2}\n')  # same size, other bytes
    swapped = _bundle(tmp_path / "swap.tar.gz", [changed, *_good()[1:], _sums(GOOD)])
    verify = bundle_module._verify

    def verify_then_swap(*args):
        verified = verify(*args)
        os.replace(swapped, bundle)
        return verified

    monkeypatch.setattr(bundle_module, "_verify", verify_then_swap)
    with pytest.raises(BundleError, match="b/runs/r1/result.json: changed while it was being extracted"):
        unbundle(bundle, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_write_failure_leaves_nothing_and_is_one_line(tmp_path, monkeypatch):
    bundle = _bundle(tmp_path / "b.tar.gz", [*_good(), _sums(GOOD)])
    real_open = os.open

    def full_disk(path, flags, *args, **kwargs):
        if str(path).endswith("rank-0.log"):
            raise OSError(28, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full_disk)
    line = _refused(bundle, tmp_path / "deeper" / "out")
    assert "cannot extract into" in line and "No space left on device" in line
    assert not (tmp_path / "deeper").exists()


def test_directory_members_and_sha256sum_binary_lines_are_accepted(tmp_path):
    listing = "".join(f"{_sha(data).upper()} *./{name}\n" for name, data in GOOD.items())
    dirs = [_entry(name, tarfile.DIRTYPE) for name in ("b", "b/runs", "b/runs/r1", "b/runs/r1/logs")]
    bundle = _bundle(tmp_path / "b.tar.gz", [*dirs, *_good(), _file(f"b/{CHECKSUMS}", listing.encode())])
    root, files = unbundle(bundle, tmp_path / "out")
    assert files == 2 and (root / "runs" / "r1" / "result.json").read_bytes() == GOOD["runs/r1/result.json"]
    empty_dir = _bundle(tmp_path / "e.tar.gz", [*_good(), _entry("b/stray", tarfile.DIRTYPE), _sums(GOOD)])
    assert "b/stray/: no listed file in it" in _refused(empty_dir, tmp_path / "out2")


def test_make_bundle_refuses_what_unbundle_would_refuse(tmp_path):
    deep = tmp_path / "campaign" / "/".join(["d"] * 40)
    deep.mkdir(parents=True)
    (deep / "result.json").write_text("{}")
    with pytest.raises(BundleError, match=r"cannot be bundled: path is 42 names deep \(limit 32\)"):
        make_bundle(tmp_path / "campaign", tmp_path / "b.tar.gz")
    assert not (tmp_path / "b.tar.gz").exists()
