"""The objects that per-backend hooks receive and return.

A backend never starts processes itself, and never decides settings: it
receives the final config in :class:`LaunchContext` and ``launch`` returns a
:class:`LaunchPlan` (argv, environment, files to write) that the core runner
executes, tees, parses live and times out, the same way for every backend.
That makes ``--dry-run`` exact and keeps signal handling in one place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from tprimat.hardware.platform import PlatformInfo
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.methodology import Resolved
from tprimat.settings.models import ModelSpec


@attrs.frozen(kw_only=True)
class PreparedDataset:
    """A tokenized dataset made by ``tprimat prepare-data`` (Megatron ``.bin``/``.idx``)."""

    path_prefix: Path  # Megatron data prefix: <prefix>.bin and <prefix>.idx
    tokenizer: str  # tokenizer directory or Hugging Face id used to make it
    fingerprint: str  # sha256 over the data and tokenizer files
    documents: int
    tokens: int
    vocab_size: int


@attrs.frozen(kw_only=True)
class DataArguments:
    """How one backend is told to read a prepared dataset (``prepare_data``'s answer)."""

    args: tuple[str, ...] = ()  # command-line arguments (Megatron-style backends)
    overrides: dict[str, Any] = attrs.Factory(dict)  # config keys (Primus YAML, NeMo recipe)
    env: dict[str, str] = attrs.Factory(dict)


def _iso(instance: LaunchContext) -> Resolved:
    return Resolved(methodology="iso", config=instance.config)


@attrs.frozen(kw_only=True)
class LaunchContext:
    """Everything a backend needs to plan one run, decided by the core before any hook runs.

    ``config`` is the final config: defaults, presets, the config file,
    ``--set`` and the methodology are already applied, and it is exactly what
    the result records.  A backend renders it and never changes it.  What a
    ``tuned`` preset adds beyond config fields (environment, framework
    arguments, framework-specific keys) is in ``methodology``; the backend
    applies those too, and the core records each as a deviation.
    """

    run_id: str
    run_dir: Path
    config: BenchmarkConfig
    model: ModelSpec
    platform: PlatformInfo
    data: DataArguments | None = None  # None: mock data
    node_rank: int = 0
    options: dict[str, Any] = attrs.Factory(dict)  # backend-specific CLI options, e.g. primus_path
    # The backend's own ``profile`` answer when profiling is on (None: not profiling).  The
    # backend's ``launch`` applies its args/overrides/env; the runner reads the rest.
    profile: ProfilePlan | None = None
    # The system profiler the workers will run under ("nsys" | "rocprofv3"), when one is asked
    # for.  With "nsys" and the torch profiler off, a backend that can open a CUDA profiler
    # range over the profile window answers ``profile`` with that range (capture_range=True).
    system_profiler: str | None = None
    methodology: Resolved = attrs.field(default=attrs.Factory(_iso, takes_self=True))
    #: ``tprimat run --memory-snapshot``: the framework records its allocator's history and
    #: writes its own snapshot(s) into ``<run_dir>/memory/`` (see ``LaunchPlan.snapshot_globs``).
    memory_snapshot: bool = False


@attrs.frozen(kw_only=True)
class FrameworkSettings:
    """Every framework-level setting one launch runs with, under the framework's own names.

    ``rendered`` is what the backend sets (its arguments, its experiment overrides,
    its settings file); ``kept`` is what the framework's own experiment file or
    defaults decide and the backend leaves alone, with the real value; ``kept_from``
    says where those values were read.  ``shared`` gives the settings of the shared
    vocabulary (:mod:`tprimat.settings.shared`) under their shared names, so runs of
    different frameworks can be compared setting by setting.
    """

    framework: str  # "Megatron-LM (core 0.15)", "Primus (experiment …)", "NeMo 2 recipe llm.llama31_8b"
    rendered: dict[str, Any] = attrs.Factory(dict)
    kept: dict[str, Any] = attrs.Factory(dict)
    kept_from: str | None = None
    shared: dict[str, Any] = attrs.Factory(dict)
    notes: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class LaunchPlan:
    """The exact process the core runner will start, and what to write first."""

    argv: tuple[str, ...]
    env: dict[str, str] = attrs.Factory(dict)  # added to the inherited environment
    cwd: Path | None = None
    files: dict[str, str] = attrs.Factory(dict)  # run-dir-relative path -> text to write
    description: str = ""
    notes: tuple[str, ...] = ()  # facts a reader of the dry run should know (versions, fallbacks)
    #: Where the framework writes allocator snapshots, relative to the run directory (under
    #: ``memory/``); the runner lists them in the result.  Empty: none asked for, or none possible.
    snapshot_globs: tuple[str, ...] = ()
    #: Every framework setting the launch runs with (None: the backend has no framework of its own).
    framework: FrameworkSettings | None = None


@attrs.frozen(kw_only=True)
class ProfilePlan:
    """What a backend changes to profile a window of iterations, and where traces land."""

    args: tuple[str, ...] = ()  # extra command-line arguments
    overrides: dict[str, Any] = attrs.Factory(dict)  # extra config keys (Primus, NeMo)
    env: dict[str, str] = attrs.Factory(dict)
    trace_globs: tuple[str, ...] = ()  # where traces appear, relative to the run directory
    profiled_iterations: tuple[int, ...] = ()  # left out of the statistics
    # True: the plan opens and closes a CUDA profiler range (cudaProfilerStart/Stop) over the
    # window instead of running the torch profiler; nsys then records only that range.
    capture_range: bool = False
