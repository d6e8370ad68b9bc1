import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli
from tprimat.suite.bundle import CHECKSUMS, BundleError, make_bundle, select_files, unbundle


@pytest.fixture
def campaign(tmp_path):
    root = tmp_path / "campaign"
    run = root / "runs" / "r1"
    (run / "logs").mkdir(parents=True)
    (run / "traces").mkdir()
    (run / "result.json").write_text('{"schema_version": 1}\n')
    (run / "manifest.json").write_text("{}\n")
    (run / "config.toml").write_text("[benchmark]\n")
    (run / "logs" / "rank-0.log").write_text("iteration 1\n" * 100)
    (run / "traces" / "rank-0.pt.trace.json").write_text("{}")
    (run / ".result.json.abc.tmp").write_text("half")
    return root


def test_round_trip_verifies_every_file(campaign, tmp_path):
    path = make_bundle(campaign, tmp_path / "out" / "b.tar.gz")
    with tarfile.open(path) as tar:
        names = sorted(tar.getnames())
    assert names == [
        "campaign/SHA256SUMS",
        "campaign/runs/r1/config.toml",
        "campaign/runs/r1/logs/rank-0.log",
        "campaign/runs/r1/manifest.json",
        "campaign/runs/r1/result.json",
    ]
    root, files = unbundle(path, tmp_path / "extracted")
    assert files == 4 and (root / "runs" / "r1" / "logs" / "rank-0.log").read_text().count("\n") == 100


def test_a_real_bundle_unbundles_byte_for_byte(campaign, tmp_path):
    (campaign / "runs" / "r2").mkdir()
    (campaign / "runs" / "r2" / "données.json").write_text('{"é": 1}\n')
    (campaign / "runs" / "r1" / "launch.sh").write_text("#!/bin/sh\n")
    (campaign / "runs" / "r1" / "launch.sh").chmod(0o755)
    path = make_bundle(campaign, tmp_path / "b.tar.gz", include_traces=True)
    done = CliRunner().invoke(cli, ["unbundle", str(path), "-o", str(tmp_path / "in")])
    assert done.exit_code == 0 and "verified 7 files under" in done.output, done.output
    assert [p.name for p in (tmp_path / "in").iterdir()] == ["campaign"]  # no staging directory left
    root = tmp_path / "in" / "campaign"
    bundled = sorted(select_files(campaign, include_traces=True))
    assert sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file()) == sorted([*bundled, Path(CHECKSUMS)])
    for relative in bundled:
        assert (root / relative).read_bytes() == (campaign / relative).read_bytes()
    assert (root / "runs" / "r1" / "launch.sh").stat().st_mode & 0o100
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", CHECKSUMS], cwd=root, check=True)


def test_traces_only_when_asked(campaign, tmp_path):
    path = make_bundle(campaign, tmp_path / "b.tar.gz", include_traces=True)
    with tarfile.open(path) as tar:
        assert "campaign/runs/r1/traces/rank-0.pt.trace.json" in tar.getnames()


def _rewrite(path, tmp_path, change):
    members = []
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            members.append((m, tar.extractfile(m).read() if m.isfile() else None))
    out = tmp_path / "tampered.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for m, data in members:
            data = change(m.name, data)
            if data is None:
                continue
            m.size = len(data)
            tar.addfile(m, io.BytesIO(data))
    return out


def test_a_changed_file_fails_verification(campaign, tmp_path):
    path = make_bundle(campaign, tmp_path / "b.tar.gz")
    tampered = _rewrite(path, tmp_path, lambda n, d: b'{"schema_version": 2}\n' if n.endswith("result.json") else d)
    with pytest.raises(BundleError, match="result.json: checksum differs"):
        unbundle(tampered, tmp_path / "x")


def test_a_missing_file_fails_verification(campaign, tmp_path):
    path = make_bundle(campaign, tmp_path / "b.tar.gz")
    tampered = _rewrite(path, tmp_path, lambda n, d: None if n.endswith("manifest.json") else d)
    with pytest.raises(BundleError, match="manifest.json: missing"):
        unbundle(tampered, tmp_path / "x")


def test_truncated_and_unsafe_bundles_are_refused(campaign, tmp_path):
    path = make_bundle(campaign, tmp_path / "b.tar.gz")
    truncated = tmp_path / "t.tar.gz"
    truncated.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(BundleError, match="not a readable bundle"):
        unbundle(truncated, tmp_path / "x")
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(BundleError, match="unsafe path"):
        unbundle(evil, tmp_path / "x")
    assert not (tmp_path / "escape.txt").exists()


def test_cli_bundle_and_unbundle(campaign, tmp_path):
    runner = CliRunner()
    out = tmp_path / "c.tar.gz"
    assert runner.invoke(cli, ["bundle", str(campaign), "-o", str(out)]).exit_code == 0
    done = runner.invoke(cli, ["unbundle", str(out), "-o", str(tmp_path / "u")])
    assert done.exit_code == 0 and "verified 4 files" in done.output
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = runner.invoke(cli, ["bundle", str(empty), "-o", str(out)])
    assert bad.exit_code == 2 and "no results" in bad.output and CHECKSUMS
