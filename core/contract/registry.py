"""The plugin registry: loads plugins safely and routes each hook to the right one.

Plugins come from entry points in the ``tprimat`` group (tprimat's own
backends register there exactly like third-party ones).  Each entry point is
loaded and registered inside its own ``try``: a plugin that fails to import,
or whose hooks do not match the specs, is recorded with its name,
distribution and error and skipped, so one broken plugin never takes the CLI
down.  Environment switches, read before anything is imported:

``TPRIMAT_DISABLE_PLUGINS=a,b``
    skip these entry points (or distributions) without importing them;
``TPRIMAT_STRICT_PLUGINS=1``
    re-raise load errors and failing hooks instead of skipping them (for plugin authors);
``TPRIMAT_TRACE_PLUGINS=1``
    print every hook call and its result to stderr.

Per-backend hooks are called on the plugin that owns the backend only
(pluggy's ``subset_hook_caller``), so install order never matters.

Every answer crosses a boundary here.  A per-backend hook that raises, or
answers with the wrong type, is one :class:`PluginError` naming the plugin,
its distribution, the hook and the backend.  The hooks consulted for every
command whichever backend it uses (``detect_platform`` and the recognisers a
``BackendSpec`` declares: ``sniff``, ``explain``, ``find_logs``) are skipped
instead when they fail: the failure is recorded (:attr:`Registry.hook_errors`,
listed by ``tprimat plugins``) and reported once on stderr, so one plugin's bug
never breaks the built-in backends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from tprimat.contract import hookspecs
from tprimat.contract.backend import Availability, BackendSpec, LogMatch, check_availability
from tprimat.contract.exporter import ExporterSpec
from tprimat.contract.version import CONTRACT_ATTRIBUTE, unmet_requirement
from tprimat.errors import TprimatError
from tprimat.hardware.platform import BuiltinPlatformPlugin, PlatformInfo

if TYPE_CHECKING:
    from tprimat.contract.plans import DataArguments, LaunchContext, LaunchPlan, PreparedDataset, ProfilePlan
    from tprimat.contract.records import ParseEvent
    from tprimat.settings.config import BenchmarkConfig

ENTRY_POINT_GROUP = "tprimat"


class BackendError(TprimatError):
    """A backend that is unknown, claimed twice, or has no implementation of a hook."""


class ExporterError(TprimatError):
    """An exporter that is unknown or claimed twice."""


class PluginError(TprimatError):
    """A plugin's hook raised or answered with the wrong type: one line naming the plugin,
    its distribution, the hook and the backend (exit code 2).

    Expected failures a plugin raises as :class:`TprimatError` keep their message
    and exit code, with the names added behind it; anything else is a bug in the
    plugin, chained so that ``--debug`` shows its traceback.
    """


@attrs.frozen(kw_only=True)
class PluginLoadError:
    """A plugin that could not be loaded, and why."""

    name: str
    distribution: str | None
    error: str


@attrs.frozen(kw_only=True)
class PluginHookError:
    """A hook of a loaded plugin that raised or answered with the wrong type, and was skipped."""

    name: str
    distribution: str | None
    hook: str  # a hook name, or a BackendSpec recogniser: "sniff", "explain", "find_logs"
    backend: str | None
    error: str


@attrs.frozen(kw_only=True)
class LoadedPlugin:
    """A plugin that loaded: where it came from and which hooks it implements."""

    name: str
    distribution: str | None
    version: str | None
    hooks: tuple[str, ...]
    #: The plugin contract the plugin declares it needs (``tprimat_contract``), if it declares one.
    contract: str | None = None


@attrs.frozen(kw_only=True)
class RegisteredBackend:
    """A backend, the plugin that provides it, and the distribution that installed it."""

    spec: BackendSpec
    plugin_name: str
    distribution: str | None
    version: str | None
    conflict: str | None = None  # set when another distribution claims the same name

    def availability(self) -> Availability:
        if self.conflict:
            return Availability(state="error", detail=self.conflict)
        return check_availability(self.spec)


@attrs.frozen(kw_only=True)
class RegisteredExporter:
    """An experiment-tracker exporter, the plugin that provides it, and the distribution that installed it."""

    spec: ExporterSpec
    plugin_name: str
    distribution: str | None
    conflict: str | None = None  # set when another distribution claims the same name

    def availability(self) -> Availability:
        """``available``, or what this machine lacks to write to the tracker (its library), as for a backend."""
        if self.conflict:
            return Availability(state="error", detail=self.conflict)
        return check_availability(self.spec)


def _split_env_list(value: str | None) -> frozenset[str]:
    return frozenset(item.strip() for item in (value or "").split(",") if item.strip())


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _write_stderr(message: str) -> None:
    sys.stderr.write(message)


class Registry:
    """A plugin manager with tprimat's hook specs, plus a typed facade over the hooks."""

    def __init__(self, *, strict: bool = False, trace: bool = False) -> None:
        self.pm = pluggy.PluginManager("tprimat")
        self.pm.add_hookspecs(hookspecs)
        self.pm.register(BuiltinPlatformPlugin(), name="tprimat.hardware.platform")
        self.strict = strict
        self.load_errors: list[PluginLoadError] = []
        self.hook_errors: list[PluginHookError] = []
        #: Where a skipped hook is reported, once per plugin, hook and backend.
        self.warn: Callable[[str], None] = _write_stderr
        self._origins: dict[str, tuple[str | None, str | None]] = {}
        self._backends: dict[str, RegisteredBackend] | None = None
        self._exporters: dict[str, RegisteredExporter] | None = None
        if trace:
            self.pm.trace.root.setwriter(_write_stderr)
            self.pm.enable_tracing()

    # -- building -----------------------------------------------------------------------

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Registry:
        """Load every installed plugin, honouring the TPRIMAT_* switches."""
        env = os.environ if environ is None else environ
        registry = cls(
            strict=_flag(env.get("TPRIMAT_STRICT_PLUGINS")),
            trace=_flag(env.get("TPRIMAT_TRACE_PLUGINS")),
        )
        registry.load_entry_points(disabled=_split_env_list(env.get("TPRIMAT_DISABLE_PLUGINS")))
        return registry

    def load_entry_points(
        self,
        *,
        disabled: Iterable[str] = (),
        entry_points: Sequence[metadata.EntryPoint] | None = None,
    ) -> None:
        """Load plugins from entry points, each isolated from the others."""
        skip = set(disabled)
        if entry_points is None:
            entry_points = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        for entry_point in entry_points:
            dist = entry_point.dist
            dist_name = dist.metadata["Name"] if dist is not None else None
            if entry_point.name in skip or (dist_name and dist_name in skip):
                continue
            try:
                plugin = entry_point.load()
            except Exception as exc:
                self._record_error(entry_point.name, dist_name, f"import failed: {_describe(exc)}")
                continue
            self.register(
                plugin,
                name=entry_point.name,
                distribution=dist_name,
                version=dist.version if dist is not None else None,
            )

    def register(self, plugin: Any, *, name: str, distribution: str | None = None, version: str | None = None) -> bool:
        """Register one plugin object; a bad one is recorded, not raised (unless strict).

        A plugin is refused when it needs another plugin contract than this tprimat's
        (:func:`~tprimat.contract.version.unmet_requirement`), when a hook's signature does not
        match its spec, or when it implements a hook no spec declares (a misspelt name would
        otherwise register silently and never be called: ``check_pending``, as pytest and tox do).
        """
        unmet = unmet_requirement(getattr(plugin, CONTRACT_ATTRIBUTE, None))
        if unmet is not None:
            self._record_error(name, distribution, unmet)
            return False
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
        except Exception as exc:
            if self.pm.get_plugin(name) is plugin:
                self.pm.unregister(plugin, name=name)
            self._record_error(name, distribution, f"invalid hooks: {_describe(exc)}")
            return False
        self._origins[name] = (distribution, version)
        self._backends = None
        self._exporters = None
        return True

    def _record_error(self, name: str, distribution: str | None, error: str) -> None:
        if self.strict:
            raise TprimatError(f"plugin {name} ({distribution or 'unknown distribution'}): {error}")
        self.load_errors.append(PluginLoadError(name=name, distribution=distribution, error=error))

    # -- what is installed ----------------------------------------------------------------

    def plugins(self) -> list[LoadedPlugin]:
        """The loaded plugins (not tprimat's internal fallback), with the hooks each implements."""
        loaded = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda item: item[0]):
            if name not in self._origins:
                continue
            hooks = tuple(sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or ()))
            distribution, version = self._origins[name]
            contract = getattr(plugin, CONTRACT_ATTRIBUTE, None)
            loaded.append(
                LoadedPlugin(
                    name=name,
                    distribution=distribution,
                    version=version,
                    hooks=hooks,
                    contract=str(contract) if contract is not None else None,
                )
            )
        return loaded

    def backends(self) -> dict[str, RegisteredBackend]:
        """Every declared backend by name; names claimed twice carry a conflict."""
        if self._backends is None:
            self._backends = self._collect_backends()
        return self._backends

    def _declarations(self, hook: str, kind: type) -> Iterator[tuple[str, Any]]:
        """(plugin name, spec) for each spec a declaration hook (``register_backends``,
        ``register_exporters``) answers; a plugin whose hook fails or answers with something
        other than ``kind`` is recorded as a load error and skipped."""
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            distribution = self._origins.get(impl.plugin_name, (None, None))[0]
            try:
                answer: Any = impl.function()
                specs = list(answer or [])
                if not all(isinstance(spec, kind) for spec in specs):
                    raise TypeError(f"{hook} must return {kind.__name__} objects")
            except Exception as exc:
                self._record_error(impl.plugin_name, distribution, f"{hook} failed: {_describe(exc)}")
                continue
            for spec in specs:
                yield impl.plugin_name, spec

    def _claim(self, found: dict[str, Any], what: str, name: str, entry: Any) -> None:
        """Enter ``entry`` under ``name``; a name another plugin claimed already keeps the first
        claim, marked with the conflict (the same plugin declaring it again replaces it)."""
        previous = found.get(name)
        if previous is not None and previous.plugin_name != entry.plugin_name:
            first = self._origins.get(previous.plugin_name, (None, None))[0] or previous.plugin_name
            second = self._origins.get(entry.plugin_name, (None, None))[0] or entry.plugin_name
            conflict = f"{what} {name!r} is claimed by both {first} and {second}; uninstall one"
            entry = attrs.evolve(previous, conflict=conflict)
        found[name] = entry

    def _collect_backends(self) -> dict[str, RegisteredBackend]:
        found: dict[str, RegisteredBackend] = {}
        for plugin_name, spec in self._declarations("register_backends", BackendSpec):
            distribution, version = self._origins.get(plugin_name, (None, None))
            entry = RegisteredBackend(
                spec=self._guarded_recognisers(spec, plugin_name),
                plugin_name=plugin_name,
                distribution=distribution,
                version=version,
            )
            self._claim(found, "backend", spec.name, entry)
        return dict(sorted(found.items()))

    def backend(self, name: str) -> RegisteredBackend:
        """The backend called ``name``, usable or not; unknown or conflicting names are errors."""
        backends = self.backends()
        entry = backends.get(name)
        if entry is None:
            known = ", ".join(backends) or "none"
            raise BackendError(f"unknown backend {name!r}; installed backends: {known}")
        if entry.conflict:
            raise BackendError(entry.conflict)
        return entry

    def exporters(self) -> dict[str, RegisteredExporter]:
        """Every declared experiment-tracker exporter by name; names claimed twice carry a conflict."""
        if self._exporters is None:
            self._exporters = self._collect_exporters()
        return self._exporters

    def _collect_exporters(self) -> dict[str, RegisteredExporter]:
        found: dict[str, RegisteredExporter] = {}
        for plugin_name, spec in self._declarations("register_exporters", ExporterSpec):
            distribution = self._origins.get(plugin_name, (None, None))[0]
            entry = RegisteredExporter(spec=spec, plugin_name=plugin_name, distribution=distribution)
            self._claim(found, "exporter", spec.name, entry)
        return dict(sorted(found.items()))

    def exporter(self, name: str) -> ExporterSpec:
        """The exporter called ``name``; unknown or conflicting names are errors."""
        exporters = self.exporters()
        entry = exporters.get(name)
        if entry is None:
            known = ", ".join(exporters) or "none"
            raise ExporterError(f"unknown tracker {name!r}; installed exporters: {known}")
        if entry.conflict:
            raise ExporterError(entry.conflict)
        return entry.spec

    # -- typed facade over the hooks -------------------------------------------------------

    def detect_platform(self) -> PlatformInfo:
        """This machine, as the first plugin that knows answers (the built-in fallback last).

        A loaded plugin's probe that raises or answers with something other than a
        :class:`PlatformInfo` is skipped (:meth:`_skip`): the next one answers.
        """
        for impl in reversed(self.pm.hook.detect_platform.get_hookimpls()):
            info = self._ask_platform(impl)
            if info is not None:
                return info
        raise TprimatError("no plugin described this machine (the built-in probe was disabled)")

    def _ask_platform(self, impl: pluggy.HookImpl) -> PlatformInfo | None:
        """One plugin's ``detect_platform`` answer; a loaded plugin's failure is skipped (None)."""
        ask = self._plugin_caller(impl.plugin, "detect_platform")
        if impl.plugin_name not in self._origins:  # tprimat's own fallback
            builtin: PlatformInfo | None = ask()
            return builtin
        try:
            info = ask()
        except Exception as exc:
            self._skip(impl.plugin_name, "detect_platform", None, _describe(exc), exc)
            return None
        if info is not None and not isinstance(info, PlatformInfo):
            self._skip(impl.plugin_name, "detect_platform", None, _wrong_type(info, "a PlatformInfo"))
            return None
        return info

    def _plugin_caller(self, plugin: object, hook: str) -> pluggy.HookCaller:
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook, remove_plugins=others)

    def _describe_plugin(self, name: str) -> str:
        distribution, version = self._origins.get(name, (None, None))
        dist = f"{distribution} {version}".strip() if distribution else "no distribution"
        return f"plugin {name} ({dist})"

    def _skip(self, name: str, hook: str, backend: str | None, error: str, cause: BaseException | None = None) -> None:
        """Record a failed detection or recognition hook and report it once; strict: raise."""
        what = f"BackendSpec.{hook} of backend {backend}" if backend else f"{hook} hook"
        message = f"{self._describe_plugin(name)}: its {what} was skipped: {error}"
        if self.strict:
            raise PluginError(message) from cause
        if any((e.name, e.hook, e.backend) == (name, hook, backend) for e in self.hook_errors):
            return
        distribution = self._origins.get(name, (None, None))[0]
        self.hook_errors.append(
            PluginHookError(name=name, distribution=distribution, hook=hook, backend=backend, error=error)
        )
        self.warn(f"tprimat: warning: {message}\n")

    def _guarded_recognisers(self, spec: BackendSpec, plugin_name: str) -> BackendSpec:
        """``spec`` with its recognisers (asked of every backend) skipped when they fail."""
        changes: dict[str, Any] = {}
        for field, check, expected in _RECOGNISERS:
            function = getattr(spec, field)
            if function is not None:
                changes[field] = self._guard(function, plugin_name, spec.name, field, check, expected)
        return attrs.evolve(spec, **changes) if changes else spec

    def _guard(
        self,
        function: Callable[..., Any],
        plugin_name: str,
        backend: str,
        field: str,
        check: Callable[[Any], bool],
        expected: str,
    ) -> Callable[..., Any]:
        def guarded(*args: Any) -> Any:
            try:
                answer = function(*args)
            except Exception as exc:
                self._skip(plugin_name, field, backend, _describe(exc), exc)
                return None
            if answer is not None and not check(answer):
                self._skip(plugin_name, field, backend, _wrong_type(answer, expected))
                return None
            return answer

        return guarded

    def check_hooks(self) -> list[PluginHookError]:
        """Ask every loaded plugin's detection and recognition hooks once, as a command would.

        For ``tprimat plugins``: a failing hook is recorded in :attr:`hook_errors` (a
        recogniser is shown a line of no known format; ``find_logs`` is left alone, it
        reads directories).
        """
        warn, self.warn = self.warn, lambda message: None
        try:
            for impl in self.pm.hook.detect_platform.get_hookimpls():
                if impl.plugin_name in self._origins:
                    self._ask_platform(impl)
            probe = ["tprimat plugin check: a line of no log format"]
            for entry in self.backends().values():
                if entry.spec.sniff is not None:
                    entry.spec.sniff(probe, "check.log")
                if entry.spec.explain is not None:
                    entry.spec.explain(probe, probe)
        finally:
            self.warn = warn
        return list(self.hook_errors)

    def _owner_caller(self, backend: str, hook: str) -> pluggy.HookCaller:
        return self._plugin_caller(self.pm.get_plugin(self.backend(backend).plugin_name), hook)

    def _origin(self, backend: str) -> str:
        return self._describe_plugin(self.backend(backend).plugin_name)

    def _call_owner(self, backend: str, hook: str, **kwargs: Any) -> Any:
        try:
            result = self._owner_caller(backend, hook)(backend=backend, **kwargs)
        except BackendError:
            raise
        except TprimatError as exc:
            error = PluginError(f"{exc} [backend {backend}, {self._origin(backend)}, hook {hook}]")
            error.exit_code = exc.exit_code
            raise error from exc
        except Exception as exc:
            raise PluginError(
                f"{self._origin(backend)} failed in its {hook} hook for backend {backend}: "
                f"{_describe(exc)} (report it to the plugin's authors; --debug shows the traceback)"
            ) from exc
        if result is None:
            raise BackendError(f"backend {backend!r} does not implement {hook}")
        expected = _answer_type(hook)
        if expected is not None and not isinstance(result, expected):
            raise PluginError(
                f"{self._origin(backend)}: its {hook} hook for backend {backend} answered with "
                f"{_wrong_type(result, 'a ' + expected.__name__)} (report it to the plugin's authors)"
            )
        return result

    def prepare_data(self, backend: str, *, dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
        """The backend's data arguments for a prepared dataset (``prepare_data`` hook)."""
        return self._call_owner(backend, "prepare_data", dataset=dataset, config=config)

    def profile(self, backend: str, *, context: LaunchContext) -> ProfilePlan:
        """The backend's profiling plan (``profile`` hook)."""
        return self._call_owner(backend, "profile", context=context)

    def launch(self, backend: str, *, context: LaunchContext) -> LaunchPlan:
        """The backend's launch plan (``launch`` hook)."""
        return self._call_owner(backend, "launch", context=context)

    def parse_metrics(self, backend: str, *, lines: Iterable[str], source: str) -> Iterator[ParseEvent]:
        """The backend's parse events for ``lines`` (``parse_metrics`` hook), lazily.

        The hook returns a generator; errors raised while it is consumed are
        wrapped like the hook's own, naming the plugin.
        """
        events = self._call_owner(backend, "parse_metrics", lines=lines, source=source)
        if not isinstance(events, Iterable):
            raise PluginError(
                f"{self._origin(backend)}: its parse_metrics hook for backend {backend} answered with "
                f"{_wrong_type(events, 'an iterator of parse records')} (report it to the plugin's authors)"
            )
        return self._named_errors(backend, events)

    def _named_errors(self, backend: str, events: Iterable[ParseEvent]) -> Iterator[ParseEvent]:
        from tprimat.contract.records import ParseEvent

        try:
            for event in events:
                if not isinstance(event, ParseEvent):
                    raise PluginError(
                        f"{self._origin(backend)}: its parse_metrics hook for backend {backend} yielded "
                        f"{_wrong_type(event, _RECORDS)} (report it to the plugin's authors)"
                    )
                yield event
        except TprimatError:
            raise
        except Exception as exc:
            raise PluginError(
                f"{self._origin(backend)} failed in its parse_metrics hook for backend {backend}: {_describe(exc)}"
            ) from exc

    def implements(self, backend: str, hook: str) -> bool:
        """Whether the plugin owning ``backend`` implements ``hook``."""
        return bool(self._owner_caller(backend, hook).get_hookimpls())


#: What ``parse_metrics`` may yield, for messages.
_RECORDS = (
    "a parse record (IterationRecord, IterationBlock, LogFact, EvalRecord, ParseIssue, RankPeak or REPEATED_LINE)"
)

#: The recognisers a BackendSpec declares that are asked of every backend: field, the
#: check of an answer that is not None, and what it should have been.
_RECOGNISERS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("sniff", lambda answer: isinstance(answer, LogMatch), "a LogMatch"),
    ("explain", lambda answer: isinstance(answer, str), "a str"),
    (
        "find_logs",
        lambda answer: isinstance(answer, tuple | list) and len(answer) == 2 and isinstance(answer[1], str),
        "a (files, note) tuple",
    ),
)


def _answer_type(hook: str) -> type | None:
    """The type a per-backend hook must answer with (``parse_metrics`` is checked per event)."""
    from tprimat.contract.plans import DataArguments, LaunchPlan, ProfilePlan

    return {"launch": LaunchPlan, "profile": ProfilePlan, "prepare_data": DataArguments}.get(hook)


def _wrong_type(answer: object, expected: str) -> str:
    shown = " ".join(repr(answer).split())
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    name = type(answer).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name} ({shown}) instead of {expected}"


def _describe(exc: BaseException) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
