"""An older commit of tprimat as a ``tprimat`` executable, for benchmarks that compare versions.

``git archive COMMIT`` is unpacked under a folder of its own, its ``core/`` laid out as the
``tprimat`` package and ``plugins/`` as ``tprimat.plugins`` (as ``setup.cfg`` maps them), and a
small script runs that package's command line with this Python (its dependencies, its installed
entry points: the plugins are found by module name, which now resolves to the old copy).  Nothing
is installed; removing the folder removes it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def old_executable(commit: str, folder: Path) -> Path:
    """A ``tprimat`` executable running ``commit`` (unpacked under ``folder``)."""
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", commit, "core", "plugins"], check=True, capture_output=True
    ).stdout
    source = folder / "source"
    shutil.rmtree(folder, ignore_errors=True)
    source.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    package = folder / "path" / "tprimat"
    package.parent.mkdir(parents=True)
    shutil.copytree(source / "core", package)
    shutil.copytree(source / "plugins", package / "plugins")
    script = folder / "tprimat"
    script.write_text(
        "#!/bin/sh\n"
        f"# tprimat at {commit}, run with {sys.executable}\n"
        f"PYTHONPATH={folder / 'path'} exec {sys.executable} -c "
        '"import sys; sys.argv[0] = \'tprimat\'; from tprimat.cli import main; main()" "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script
