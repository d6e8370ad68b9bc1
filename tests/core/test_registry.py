"""The registry: isolated loading, switches, duplicate names, and routing of every hook."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tprimat.contract.plans import DataArguments, LaunchContext, LaunchPlan, PreparedDataset, ProfilePlan
from tprimat.contract.registry import BackendError, Registry
from tprimat.errors import TprimatError
from tprimat.hardware.platform import PlatformInfo
from tprimat.result.schema import IterationRecord
from tprimat.settings.config import load_config
from tprimat.settings.models import get_model

PLUGIN_TEMPLATE = """
import tprimat
from tprimat.contract.backend import BackendSpec
from tprimat.contract.plans import DataArguments, LaunchPlan, ProfilePlan
from tprimat.result.schema import IterationRecord

CALLS = []
NAMES = {names!r}


@tprimat.hookimpl
def register_backends():
    return [BackendSpec(name=n, platform="any", framework="{module}", description="test")
            for n in NAMES]


@tprimat.hookimpl
def launch(backend, context):
    CALLS.append(("launch", backend))
    return LaunchPlan(argv=("{module}", backend))


@tprimat.hookimpl
def prepare_data(backend, dataset, config):
    CALLS.append(("prepare_data", backend))
    return DataArguments(args=("--data-path", str(dataset.path_prefix)))


@tprimat.hookimpl
def profile(backend, context):
    CALLS.append(("profile", backend))
    return ProfilePlan(args=("--profile",), profiled_iterations=(5,))


@tprimat.hookimpl
def parse_metrics(backend, lines, source):
    CALLS.append(("parse_metrics", backend))
    return (IterationRecord(iteration=int(line.split()[1]), step_time_s=1.0)
            for line in lines if line.startswith("step "))
"""


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def write_plugin(directory: Path, module: str, names: list[str], extra: str = "") -> EntryPoint:
    source = PLUGIN_TEMPLATE.format(names=names, module=module) + textwrap.dedent(extra)
    (directory / f"{module}.py").write_text(source)
    sys.modules.pop(module, None)  # each test gets its own copy of the module
    return EntryPoint(name=module, value=module, group="tprimat")


def registry_with(*entry_points: EntryPoint, **kwargs) -> Registry:
    registry = Registry(**kwargs)
    registry.load_entry_points(entry_points=list(entry_points))
    return registry


def context(tmp_path: Path) -> LaunchContext:
    cfg = load_config(None, ["benchmark.model=llama3.1-tiny"])
    return LaunchContext(
        run_id="r",
        run_dir=tmp_path,
        config=cfg,
        model=get_model("llama3.1-tiny"),
        platform=PlatformInfo(platform="cpu"),
    )


def test_hook_register_backends(plugin_dir):
    registry = registry_with(write_plugin(plugin_dir, "plug_a", ["alpha", "beta"]))
    backends = registry.backends()
    assert list(backends) == ["alpha", "beta"]
    assert backends["alpha"].plugin_name == "plug_a"
    assert str(backends["alpha"].availability()) == "available"


def test_hook_launch(plugin_dir, tmp_path):
    """launch is called on the plugin owning the backend only."""
    registry = registry_with(
        write_plugin(plugin_dir, "plug_a", ["alpha"]), write_plugin(plugin_dir, "plug_b", ["beta"])
    )
    plan = registry.launch("beta", context=context(tmp_path))
    assert plan == LaunchPlan(argv=("plug_b", "beta"))
    import plug_a
    import plug_b

    assert plug_a.CALLS == [] and plug_b.CALLS == [("launch", "beta")]


def test_hook_prepare_data(plugin_dir, tmp_path):
    registry = registry_with(write_plugin(plugin_dir, "plug_data", ["gamma"]))
    dataset = PreparedDataset(
        path_prefix=tmp_path / "bc_text_document",
        tokenizer="tok",
        fingerprint="sha256:0",
        documents=1,
        tokens=2,
        vocab_size=3,
    )
    answer = registry.prepare_data("gamma", dataset=dataset, config=load_config())
    assert answer == DataArguments(args=("--data-path", str(tmp_path / "bc_text_document")))


def test_hook_profile(plugin_dir, tmp_path):
    registry = registry_with(write_plugin(plugin_dir, "plug_prof", ["delta"]))
    plan = registry.profile("delta", context=context(tmp_path))
    assert isinstance(plan, ProfilePlan) and plan.profiled_iterations == (5,)


def test_hook_parse_metrics(plugin_dir):
    """parse_metrics streams: nothing is read before the caller asks for events."""
    registry = registry_with(write_plugin(plugin_dir, "plug_parse", ["eps"]))
    consumed = []

    def lines():
        for line in ("noise", "step 1", "step 2"):
            consumed.append(line)
            yield line

    events = registry.parse_metrics("eps", lines=lines(), source="log")
    assert consumed == []  # nothing read before the caller asks
    assert next(iter(events)) == IterationRecord(iteration=1, step_time_s=1.0)
    assert consumed == ["noise", "step 1"]


def test_hook_detect_platform(plugin_dir):
    """A plugin answers before the built-in probe, which answers last."""
    extra = """
    @tprimat.hookimpl
    def detect_platform():
        from tprimat.hardware.platform import PlatformInfo
        return PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3", device_count=8)
    """
    registry = registry_with(write_plugin(plugin_dir, "plug_detect", ["zeta"], extra))
    assert registry.detect_platform().device_name == "NVIDIA H100 80GB HBM3"
    assert Registry().detect_platform().platform in {"cpu", "nvidia", "amd"}  # the fallback answers


def test_a_backend_claimed_twice_names_both_and_is_unusable(plugin_dir, tmp_path):
    registry = registry_with(
        write_plugin(plugin_dir, "plug_one", ["same"]), write_plugin(plugin_dir, "plug_two", ["same"])
    )
    entry = registry.backends()["same"]
    assert entry.availability().state == "error"
    assert "plug_one" in entry.conflict and "plug_two" in entry.conflict
    with pytest.raises(BackendError, match="claimed by both"):
        registry.launch("same", context=context(tmp_path))


def test_unknown_backend_lists_the_installed_ones(plugin_dir):
    registry = registry_with(write_plugin(plugin_dir, "plug_a", ["alpha"]))
    with pytest.raises(BackendError, match="unknown backend 'nope'; installed backends: alpha"):
        registry.backend("nope")


def test_a_missing_hook_is_a_clear_error(plugin_dir, tmp_path):
    (plugin_dir / "plug_min.py").write_text(
        "import tprimat\nfrom tprimat.contract.backend import BackendSpec\n"
        "@tprimat.hookimpl\ndef register_backends():\n"
        "    return [BackendSpec(name='minimal', platform='any', framework='x', description='x')]\n"
    )
    registry = registry_with(EntryPoint(name="plug_min", value="plug_min", group="tprimat"))
    assert not registry.implements("minimal", "launch")
    with pytest.raises(BackendError, match="does not implement launch"):
        registry.launch("minimal", context=context(tmp_path))


def test_import_failure_and_bad_hooks_are_recorded_not_raised(plugin_dir):
    (plugin_dir / "plug_crash.py").write_text("raise RuntimeError('boom at import')\n")
    (plugin_dir / "plug_badargs.py").write_text(
        "import tprimat\n@tprimat.hookimpl\ndef launch(backend, context, surprise):\n    pass\n"
    )
    (plugin_dir / "plug_badreturn.py").write_text(
        "import tprimat\n@tprimat.hookimpl\ndef register_backends():\n    return ['not a spec']\n"
    )
    good = write_plugin(plugin_dir, "plug_good", ["fine"])
    registry = registry_with(
        EntryPoint(name="plug_crash", value="plug_crash", group="tprimat"),
        EntryPoint(name="plug_badargs", value="plug_badargs", group="tprimat"),
        EntryPoint(name="plug_badreturn", value="plug_badreturn", group="tprimat"),
        good,
    )
    assert list(registry.backends()) == ["fine"]
    errors = {e.name: e.error for e in registry.load_errors}
    assert "RuntimeError: boom at import" in errors["plug_crash"]
    assert "surprise" in errors["plug_badargs"]
    assert "BackendSpec" in errors["plug_badreturn"]


def test_a_misspelt_hook_is_a_load_error_and_the_plugin_is_not_half_registered(plugin_dir):
    (plugin_dir / "plug_typo.py").write_text(
        "import tprimat\nfrom tprimat.contract.backend import BackendSpec\n"
        "@tprimat.hookimpl\ndef register_backends():\n"
        "    return [BackendSpec(name='typo', platform='any', framework='x', description='x')]\n"
        "@tprimat.hookimpl\ndef lauch(backend, context):\n    pass\n"
    )
    good = write_plugin(plugin_dir, "plug_fine2", ["fine2"])
    registry = registry_with(EntryPoint(name="plug_typo", value="plug_typo", group="tprimat"), good)
    errors = {e.name: e.error for e in registry.load_errors}
    assert "unknown hook 'lauch'" in errors["plug_typo"]
    assert list(registry.backends()) == ["fine2"]  # its register_backends did not stay behind
    assert registry.pm.get_plugin("plug_typo") is None
    registry.pm.check_pending()  # what is loaded is consistent


@pytest.mark.parametrize(
    ("declared", "refused"),
    [
        ('"1.0"', None),
        ('"1.99"', "upgrade tprimat"),
        ('"2.0"', "needs plugin contract 2.0"),
        ('"0.9"', "written for an older tprimat"),
        ('"one"', "MAJOR.MINOR"),
        ("1.0", "must be a string"),
    ],
)
def test_a_plugin_states_the_contract_it_needs(plugin_dir, declared, refused):
    name = "plug_contract_" + "".join(c if c.isalnum() else "_" for c in declared)
    (plugin_dir / f"{name}.py").write_text(
        f"import tprimat\nfrom tprimat.contract.backend import BackendSpec\ntprimat_contract = {declared}\n"
        "@tprimat.hookimpl\ndef register_backends():\n"
        "    return [BackendSpec(name='versioned', platform='any', framework='x', description='x')]\n"
    )
    registry = registry_with(EntryPoint(name=name, value=name, group="tprimat"))
    errors = {e.name: e.error for e in registry.load_errors}
    if refused is None:
        assert not errors and list(registry.backends()) == ["versioned"]
        assert next(p for p in registry.plugins() if p.name == name).contract == "1.0"
    else:
        assert refused in errors[name] and registry.backends() == {}


def test_strict_mode_re_raises_for_plugin_authors(plugin_dir):
    (plugin_dir / "plug_crash2.py").write_text("raise RuntimeError('boom')\n")
    registry = Registry(strict=True)
    with pytest.raises(TprimatError, match="plug_crash2.*boom"):
        registry.load_entry_points(entry_points=[EntryPoint(name="plug_crash2", value="plug_crash2", group="tprimat")])


def test_disabled_plugins_are_never_imported(plugin_dir):
    (plugin_dir / "plug_never.py").write_text("raise SystemExit('imported a disabled plugin')\n")
    registry = Registry()
    registry.load_entry_points(
        disabled={"plug_never"}, entry_points=[EntryPoint(name="plug_never", value="plug_never", group="tprimat")]
    )
    assert registry.load_errors == [] and registry.backends() == {}


def test_environment_switches(monkeypatch):
    registry = Registry.from_environment({"TPRIMAT_DISABLE_PLUGINS": "megatron, nvd_nemo"})
    names = set(registry.backends())
    assert "torch" in names and not names & {"amd_primus", "amd_megatron", "nvd_megatron", "nvd_nemo"}
    strict = Registry.from_environment(
        {"TPRIMAT_STRICT_PLUGINS": "1", "TPRIMAT_DISABLE_PLUGINS": "broken_import,broken_hooks"}
    )
    assert strict.strict


def test_tracing_prints_hook_calls(plugin_dir, capsys):
    registry = registry_with(write_plugin(plugin_dir, "plug_trace", ["eta"]), trace=True)
    registry.backends()
    registry.detect_platform()
    assert "detect_platform" in capsys.readouterr().err


def test_builtin_backends_register_through_entry_points():
    registry = Registry.from_environment({})
    backends = registry.backends()
    plugins = {
        "amd_primus": "megatron",
        "amd_megatron": "megatron",
        "nvd_megatron": "megatron",
        "nvd_nemo": "nvd_nemo",
        "torch": "torch",
    }
    for name, plugin in plugins.items():
        assert backends[name].distribution == "tprimat"
        assert backends[name].plugin_name == plugin


def test_an_exception_in_a_plugin_hook_names_the_plugin_and_the_hook(tmp_path):
    from tprimat import hookimpl
    from tprimat.contract.backend import BackendSpec
    from tprimat.contract.registry import PluginError
    from tprimat.errors import TprimatError

    class Buggy:
        @hookimpl
        def register_backends(self):
            return [BackendSpec(name="buggy", platform="any", framework="b", description="b")]

        @hookimpl
        def launch(self, backend, context):
            raise KeyError("missing_key")

        @hookimpl
        def profile(self, backend, context):
            raise TprimatError("the profile window does not fit")

    registry = Registry()
    registry.register(Buggy(), name="buggy_plugin", distribution="buggy-dist", version="0.3")
    with pytest.raises(PluginError) as info:
        registry.launch("buggy", context=None)
    assert str(info.value).startswith(
        "plugin buggy_plugin (buggy-dist 0.3) failed in its launch hook for backend buggy: KeyError: 'missing_key'"
    )
    assert info.value.exit_code == 2 and isinstance(info.value.__cause__, KeyError)
    with pytest.raises(PluginError) as info:
        registry.profile("buggy", context=None)
    assert str(info.value) == (
        "the profile window does not fit [backend buggy, plugin buggy_plugin (buggy-dist 0.3), hook profile]"
    )
    assert info.value.exit_code == 2
