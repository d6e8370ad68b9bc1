"""An older commit of tprimat as a ``tprimat`` executable, for benchmarks that compare versions.

``git archive COMMIT`` is unpacked under a folder of its own, its ``core/`` laid out as the
``tprimat`` package and ``plugins/`` as ``tprimat.plugins`` (as ``setup.cfg`` maps them), its C
modules built in place where a compiler is found (as ``setup.py`` builds them), and a
small script runs that package's command line with this Python (its dependencies, its installed
entry points: the plugins are found by module name, which now resolves to the old copy).  Nothing
is installed; removing the folder removes it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def old_executable(commit: str, folder: Path) -> Path:
    """A ``tprimat`` executable running ``commit`` (unpacked under ``folder``), its compiled
    modules built as an install builds them where a C compiler is found."""
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
    _build_compiled(package)
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


def _build_compiled(package: Path) -> None:
    """Build each C module of the unpacked ``package`` in place (the commits that have them),
    with the compiler and flags this Python was built with; where there is no compiler, the
    old version reads in Python, as an install without one would."""
    compiler = sysconfig.get_config_var("CC") or "cc"
    flags = [*(sysconfig.get_config_var("CFLAGS") or "-O2").split(), "-fPIC", "-shared"]
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module in package.rglob("_*.c"):
        target = module.with_name(module.stem + suffix)
        command = [*compiler.split(), *flags, f"-I{include}", str(module), "-o", str(target)]
        if subprocess.run(command, capture_output=True).returncode != 0:  # noqa: S603  (this Python's compiler)
            print(f"{module.name} not built: the old version reads in Python", file=sys.stderr)
