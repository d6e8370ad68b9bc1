"""``tprimat compare -o DIR`` on a full disk: one line naming the file, exit code 2, no partial report.

The disk is made full for the command alone by a file-size limit (``ulimit -f``:
``RLIMIT_FSIZE``) set in its process; Python ignores SIGXFSZ, so a write past the
limit fails with EFBIG as it would with ENOSPC on a full disk.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tprimat.cli import cli

pytestmark = pytest.mark.slow

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported")
    done = CliRunner().invoke(
        cli, ["import-legacy", *map(str, sorted(LEGACY.glob("*.json"))), "-o", str(out), "--precision", "bf16"]
    )
    assert done.exit_code == 0, done.output
    return out


def compare(results: Path, out: Path, limit_bytes: int | None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "tprimat.cli", "compare", str(results), "-o", str(out), "--allow-mismatch"],
        capture_output=True,
        text=True,
        preexec_fn=limit,  # noqa: PLW1509 - only setrlimit, before exec
        check=False,
    )


@pytest.mark.parametrize("limit_bytes", [0, 16 * 1024], ids=["first-file", "a-later-file"])
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_report(results, tmp_path, limit_bytes):
    out = tmp_path / "report"
    done = compare(results, out, limit_bytes)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"Error: cannot write {out}/")
    assert "File too large" in lines[0]
    assert list(out.iterdir()) == []  # nothing that looks like a report, no staging left behind


def test_a_failed_write_keeps_the_previous_complete_report(results, tmp_path):
    out = tmp_path / "report"
    assert compare(results, out, None).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"report.md", "report.html", "results.csv", "report.json"} <= set(before)
    done = compare(results, out, 16 * 1024)
    assert done.returncode == 2 and "cannot write" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
