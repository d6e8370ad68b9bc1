"""What an exporter plugin declares and receives: one experiment tracker, and each result as trackers see it.

``tprimat export`` and ``--report-to`` hand every result to the exporter the
user named, as a :class:`TrackerRun`: the core has already flattened the
config, gathered the manifest facts and laid out the per-iteration series and
the summary, so every tracker shows the same numbers under the same names and
an exporter only writes them.  An exporter never computes a number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import attrs

from tprimat.contract.backend import Requirements

#: A flattened config value: JSON scalars; lists and tables are already JSON text.
ParamValue = str | int | float | bool | None


def as_text(value: ParamValue) -> str:
    """A flattened value as a tracker that keeps text shows it: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


@attrs.frozen(kw_only=True)
class TrackerRun:
    """One result, laid out for experiment trackers.

    ``params``: the run's config with flattened keys (``config.settings.training.seq_length``);
    ``facts``: what the run says about where and how it ran (``run.*``, ``hardware.*``,
    ``software.*``, ``provenance.*``, ``caveats.*``, the summary's words such as
    ``summary.flops_formula`` and, from ``manifest.json``, ``manifest.*`` and
    ``environment.*``), as text; ``series``: per-iteration values by name, each a list of
    (iteration number, value) pairs, NaN kept; ``summary``: the result's derived figures
    (``summary/step_time_s/median``, ``summary/tokens_per_s_per_gpu/p95``, ``summary/mfu``...,
    ``memory/...``, ``convergence/...``); ``labels``: a few
    short words to filter runs by (backend, model, platform, device, status).
    """

    run_id: str
    name: str
    status: str  # completed | failed | interrupted | partial
    source: str  # the result file it was read from
    params: Mapping[str, ParamValue]
    facts: Mapping[str, str]
    series: Mapping[str, Sequence[tuple[int, float]]]
    summary: Mapping[str, float]
    labels: tuple[str, ...] = ()
    #: POSIX times: when the run started and ended, and when each iteration was logged (where known).
    started_at: float | None = None
    finished_at: float | None = None
    wall_times: Mapping[int, float] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class ExportTarget:
    """Where the user asked the runs to go; each exporter says in its description what it makes of it.

    ``uri``: a tracking URI, a log directory or a run-files directory; ``experiment``: the
    experiment, project or group the runs are filed under.  None: the tracker's own
    environment variable where it has one, else the exporter's local default.
    """

    uri: str | None = None
    experiment: str | None = None


@attrs.frozen(kw_only=True)
class ExporterSpec:
    """One experiment tracker a plugin can write results to.

    ``export(run, target)`` writes one run and returns where it went (one line, e.g.
    ``mlflow run 3f2a... in experiment tprimat at sqlite:///mlruns.db``); it imports its
    tracker's library inside, so declaring an exporter costs no import.  ``requires``
    names the modules it needs (checked before ``export`` is called) and ``hint`` in it
    the install command that brings them.  Raise :class:`tprimat.errors.TprimatError`
    for a failure the user can act on.
    """

    name: str = attrs.field(validator=attrs.validators.matches_re(r"[a-z][a-z0-9_-]*"))
    description: str
    export: Callable[[TrackerRun, ExportTarget], str]
    requires: Requirements = Requirements()
