"""Which files of an MLPerf result folder are runs, and what the files beside them are.

MLPerf lays a submission out as ``results/<system>/<benchmark>/``: one run per
``result_<n>.txt``, and beside the runs:

- ``scaling.json`` (``{"scaling_factor": x}``): written during review by MLPerf's
  RCP checker when the runs converged in fewer samples than the reference mean
  (x = reference mean / the runs' olympic mean of samples to converge); MLPerf's
  result summarizer multiplies that folder's olympic score by x, so the published
  time to train is the scaled one;
- ``power/result_<n>/node_*.txt`` and ``sw_*.txt`` in power submissions: power
  readings as ``:::MLLOG`` lines, not runs.

Any other file is listed as not read, never an error.  Outside that layout every
``:::MLLOG`` file given is a run (an ``mlperf.log`` tprimat wrote, say).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable
from pathlib import Path

import attrs

from tprimat.mlperf.reader import MARKER, is_mllog

#: MLPerf's names (``mlperf_logging.result_summarizer``).
RESULT_PATTERN = "result_*.txt"
SCALING_FILE = "scaling.json"
POWER_FOLDER = "power"


@attrs.frozen(kw_only=True)
class Scaling:
    """The scaling factor of one result folder."""

    factor: float | None  # None: no factor could be read (see problem)
    source: str | None  # the scaling.json it came from; None: the folder has none (factor 1)
    problem: str | None = None


#: A folder without ``scaling.json``: MLPerf's summarizer takes the score as it is.
NO_SCALING = Scaling(factor=1.0, source=None)


@attrs.frozen(kw_only=True)
class OtherFile:
    """A file found beside the runs that is not read as one."""

    path: str
    kind: str  # "power" or "unknown"
    note: str


@attrs.frozen(kw_only=True)
class ResultFiles:
    """The runs found under the paths given, the scaling of their folders, and the rest."""

    runs: list[Path]
    scaling: dict[str, Scaling]  # by run file (as str(path))
    other: list[OtherFile]


def read_scaling(folder: Path) -> Scaling:
    """The ``scaling.json`` of ``folder``; a file that cannot be used gives no factor and says why."""
    path = folder / SCALING_FILE
    if not path.is_file():
        return NO_SCALING
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Scaling(factor=None, source=str(path), problem=f"{path}: unreadable ({exc})")
    factor = data.get("scaling_factor") if isinstance(data, dict) else None
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor > 0:
        return Scaling(
            factor=None,
            source=str(path),
            problem=f'{path}: expected {{"scaling_factor": <a positive number>}}, found {json.dumps(data)[:80]}',
        )
    return Scaling(factor=float(factor), source=str(path))


def _in_power_folder(path: Path) -> bool:
    return POWER_FOLDER in path.parent.parts[-2:]


def _named_as_result(path: Path) -> bool:
    return fnmatch.fnmatchcase(path.name, RESULT_PATTERN)


def _classify(file: Path, named: bool, laid_out: bool) -> OtherFile | None:
    """None for a run; otherwise what the file is and why it is not read."""
    mllog = is_mllog(file)
    if mllog and _in_power_folder(file):
        return OtherFile(path=str(file), kind="power", note="power readings: not scored")
    if mllog and (named or not laid_out or _named_as_result(file)):
        return None
    if mllog:
        note = (
            f"an {MARKER} file not named {RESULT_PATTERN}: MLPerf's summarizer does not read it "
            "(give the file itself to read it as a run)"
        )
    else:
        note = f"no {MARKER} line near its start: not an MLPerf log"
        if _named_as_result(file):
            note += "; MLPerf's summarizer would count it as a run that failed, tprimat leaves it out"
    return OtherFile(path=str(file), kind="unknown", note=note)


def find_results(paths: Iterable[str | Path]) -> ResultFiles | None:
    """The MLPerf runs under ``paths``, or None when these are not MLPerf results.

    Directories are searched.  A folder holding a ``result_*.txt`` or a
    ``scaling.json`` is read as MLPerf lays it out: its runs are the
    ``result_*.txt`` files, as MLPerf's summarizer takes them.  Elsewhere every
    ``:::MLLOG`` file is a run, and so is every such file named on the command line.
    The paths are MLPerf results when they hold a run and either every other file is
    a known side file or a folder follows MLPerf's layout: a training log that merely
    sits beside an ``mlperf.log`` keeps being a training log.  Each run takes the
    scaling of its own folder, also when it was named on its own.
    """
    found: list[tuple[Path, bool]] = []  # (file, named on its own)
    for path in map(Path, paths):
        if path.is_dir():
            found.extend((p, False) for p in sorted(path.rglob("*")) if p.is_file())
        else:
            found.append((path, True))
    laid_out = {file.parent for file, _ in found if file.name == SCALING_FILE or _named_as_result(file)}
    runs: list[Path] = []
    other: list[OtherFile] = []
    for file, named in found:
        if file.name == SCALING_FILE:
            continue  # read below, for the folder of each run
        side = _classify(file, named, file.parent in laid_out)
        if side is None:
            runs.append(file)
        elif side.kind == "unknown" and not laid_out:
            return None  # not MLPerf results: no need to read the head of every file of a large tree
        else:
            other.append(side)
    if not runs:
        return None
    if any(o.kind == "unknown" for o in other) and not any(run.parent in laid_out for run in runs):
        return None
    folders = {run.parent: read_scaling(run.parent) for run in runs}
    return ResultFiles(runs=runs, scaling={str(run): folders[run.parent] for run in runs}, other=other)
