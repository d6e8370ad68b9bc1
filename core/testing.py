"""A testing kit for plugin authors: a machine of your choosing, the run tprimat would launch, your parser on a log.

A backend plugin is tested the way tprimat tests its own backends, without the
GPU or the framework it targets:

* :class:`FakeMachine` and :func:`registry_on` build a registry (every installed
  plugin, yours included) whose ``detect_platform`` answers with the machine you
  name: ``registry_on(H100)`` plans a run as it would be planned on an H100 node,
  with the H100's tuned preset when you ask for ``tuned``;
* :func:`plan_run` prepares a run through the core exactly as ``tprimat run``
  does (config layers, methodology, launch options, your ``launch`` hook) and
  returns the :class:`~tprimat.running.prepare.PreparedRun`: the plan your hook
  returned, the final config the result will record, and :func:`dry_run_text`
  gives what ``tprimat run --dry-run`` prints for it.  Nothing is started or written;
* :func:`parse_events` runs your ``parse_metrics`` hook over a log file as
  ``tprimat parse`` hands it one (a :class:`~tprimat.contract.logfile.LogFile`), and
  :func:`parse_result` runs the whole of ``tprimat parse`` (detection by your
  sniffer, statistics, the result), so a test can check a real log of your
  framework end to end.

``tests/example_plugin`` uses each of these in its own tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tprimat import hookimpl
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.workload import Workload

__all__ = [
    "CPU",
    "H100",
    "MI300X",
    "FakeMachine",
    "Workload",
    "dry_run_text",
    "parse_events",
    "parse_result",
    "plan_run",
    "registry_on",
]

if TYPE_CHECKING:
    from tprimat.contract.records import ParseEvent
    from tprimat.contract.registry import Registry
    from tprimat.result.schema import Result
    from tprimat.running.prepare import PreparedRun

#: Machines to plan for (eight GPUs each, as the vendors' reference nodes).
MI300X = PlatformInfo(platform="amd", device_name="AMD Instinct MI300X", device_count=8, stack="rocm", source="test")
H100 = PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8, stack="cuda", source="test")
CPU = PlatformInfo(platform="cpu", source="test")


class FakeMachine:
    """A plugin whose ``detect_platform`` says this machine is ``info`` (asked before every other plugin)."""

    def __init__(self, info: PlatformInfo) -> None:
        self.info = info

    @hookimpl(tryfirst=True)
    def detect_platform(self) -> PlatformInfo:
        return self.info


def registry_on(info: PlatformInfo, environ: Mapping[str, str] | None = None) -> Registry:
    """The installed plugins (``environ``'s ``TPRIMAT_*`` switches honoured; none by default) on machine ``info``."""
    from tprimat.contract.registry import Registry

    registry = Registry.from_environment(dict(environ or {}))
    registry.register(FakeMachine(info), name="tprimat.testing.machine")
    return registry


def plan_run(
    backend: str,
    *,
    registry: Registry,
    output: Path,
    model: str | None = None,
    overrides: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    iterations: int | None = None,
    run_id: str = "test-run",
    environ: Mapping[str, str] | None = None,
) -> PreparedRun:
    """The run ``tprimat run --backend B [--model M] [--set K=V …] [--<option> …]`` would start.

    ``output`` is the runs directory the plan names (nothing is written there);
    ``environ`` stands for the environment (empty by default, so a developer's
    variables never leak into a test).
    """
    from tprimat.running.prepare import RunRequest, prepare

    request = RunRequest(
        backend=backend,
        model=model,
        overrides=tuple(overrides),
        iterations=iterations,
        output=Path(output),
        run_id=run_id,
        options=dict(options or {}),
    )
    return prepare(request, registry, environ=dict(environ or {}))


def dry_run_text(prepared: PreparedRun) -> str:
    """What ``tprimat run --dry-run`` prints for ``prepared``."""
    from tprimat.running.dryrun import describe_plan

    return describe_plan(prepared)


def parse_events(backend: str, path: str | Path, *, registry: Registry, blocks: bool = False) -> list[ParseEvent]:
    """Every event ``backend``'s ``parse_metrics`` yields for the log file ``path``, through the registry.

    An :class:`~tprimat.contract.records.IterationBlock` comes as the records it stands for, in
    its place, so that the events of a parser that yields blocks compare with records; with
    ``blocks=True`` the events come as yielded.
    """
    from tprimat.contract.logfile import LogFile
    from tprimat.contract.records import IterationBlock

    source = Path(path)
    events = registry.parse_metrics(backend, lines=LogFile(source), source=source.name)
    if blocks:
        return list(events)
    found: list[ParseEvent] = []
    for event in events:
        if isinstance(event, IterationBlock):
            found.extend(event.records())
        else:
            found.append(event)
    return found


def parse_result(
    paths: Sequence[str | Path],
    *,
    registry: Registry,
    backend: str | None = None,
    workload: Workload | None = None,
    workers: int = 1,
) -> Result:
    """What ``tprimat parse PATHS [--backend B] [--seq-length …]`` records (the backend detected when not named).

    ``workload`` says what the log does not (``Workload(seq_length=…, world_size=…)``, the
    command line's ``--seq-length``/``--world-size``); ``workers`` as ``-j``.
    """
    from tprimat.parse.logs import parse_logs

    return parse_logs(list(paths), registry=registry, backend=backend, workload=workload, workers=workers).result
