"""The built-in backends' ``profile`` hooks: exact flags/overrides, real flag names, one window for all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tprimat.contract.plans import LaunchContext, ProfilePlan
from tprimat.contract.registry import Registry
from tprimat.hardware.platform import PlatformInfo
from tprimat.settings.config import ConfigError, load_config
from tprimat.settings.models import get_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "profile"
MEGATRON_ARGS = FIXTURES / "megatron_args"


def context(tmp_path: Path, *overrides: str) -> LaunchContext:
    config = load_config(None, ["benchmark.iterations=20", *overrides])
    return LaunchContext(
        run_id="r1",
        run_dir=tmp_path / "runs" / "r1",
        config=config,
        model=get_model(config.benchmark.model),
        platform=PlatformInfo(platform="cpu"),
    )


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.from_environment()


def test_hook_profile_megatron_flags(registry, tmp_path):
    ctx = context(tmp_path, "profile.enabled=true", "profile.ranks=[0, 7]")
    for backend in ("nvd_megatron", "amd_megatron"):
        plan = registry.profile(backend, context=ctx)
        assert isinstance(plan, ProfilePlan)
        # defaults wait=2, warmup=1, active=2: warm up in 3, record 4 and 5, export during 6
        assert plan.args == (
            "--profile",
            "--use-pytorch-profiler",
            "--profile-step-start",
            "4",
            "--profile-step-end",
            "6",
            "--profile-ranks",
            "0",
            "7",
            "--tensorboard-dir",
            str(ctx.run_dir / "tensorboard"),
        )
        assert plan.profiled_iterations == (3, 4, 5, 6)
        assert "torch_profile/rank-*.json.gz" in plan.trace_globs


def _flags_in(path: Path) -> set[str]:
    return {line.strip() for line in path.read_text().splitlines() if line.strip().startswith("--")}


@pytest.mark.parametrize("version", ["core_v0.12.0.txt", "core_v0.15.0.txt", "core_v0.19.0.txt", "main_2026-08-22.txt"])
def test_every_megatron_profile_flag_exists_in_megatron(tmp_path, version):
    from tprimat.plugins.megatron.profiling import nsys_plan, profile_plan

    flags = _flags_in(MEGATRON_ARGS / version)
    ctx = context(tmp_path)
    for plan in (profile_plan(ctx), nsys_plan(ctx)):
        used = {arg for arg in plan.args if arg.startswith("--")}
        assert used <= flags, used - flags


def test_nsys_plan_uses_the_cuda_profiler_range_not_the_torch_profiler(tmp_path):
    from tprimat.plugins.megatron.profiling import nsys_plan

    plan = nsys_plan(context(tmp_path))
    assert "--use-pytorch-profiler" not in plan.args and plan.args[0] == "--profile"
    assert plan.trace_globs == ()


PRIMUS_YAML = FIXTURES / "primus_modules"


def test_hook_profile_primus_overrides(registry, tmp_path):
    plan = registry.profile("amd_primus", context=context(tmp_path, "profile.warmup=2", "profile.active=3"))
    assert plan.args == ()
    assert plan.overrides == {
        "profile": True,
        "use_pytorch_profiler": True,
        "profile_ranks": [0],
        "profile_step_start": 5,
        "profile_step_end": 8,
        "disable_tensorboard": False,
        "torch_profiler_use_gzip": True,
        "torch_profiler_record_shapes": False,
        "torch_profiler_with_stack": False,
    }
    assert plan.profiled_iterations == (4, 5, 6, 7, 8)
    assert plan.trace_globs[0] == "**/tensorboard/*.pt.trace.json.gz"


def test_every_primus_key_exists_in_primus_module_configs(tmp_path):
    from tprimat.plugins.amd_primus.profiling import profile_overrides

    text = "\n".join(p.read_text() for p in PRIMUS_YAML.glob("*.yaml"))
    keys = set(re.findall(r"^([a-z_0-9]+):", text, re.M))
    overrides, _ = profile_overrides(context(tmp_path))
    assert set(overrides) <= keys, set(overrides) - keys


def test_hook_profile_nemo_callback_and_recipe_lines(registry, tmp_path):
    from tprimat.plugins.nvd_nemo.profiling import nsys_plan, recipe_lines

    ctx = context(tmp_path)
    plan = registry.profile("nvd_nemo", context=ctx)
    (callback,) = plan.overrides["callbacks"]
    assert callback == {
        "target": "nemo.lightning.pytorch.callbacks.PytorchProfilerCallback",
        "kwargs": {
            "start_step": 2,
            "end_step": 5,
            "warmup_steps": 1,
            "active_steps": 2,
            "trace_dir": str(ctx.run_dir / "torch_profile"),
        },
    }
    assert plan.profiled_iterations == (3, 4, 5, 6)  # records: global_step + 1
    assert plan.trace_globs == ("torch_profile/device/rank-*.json",)
    lines = recipe_lines(plan)
    assert lines[0] == "from nemo.lightning.pytorch.callbacks import PytorchProfilerCallback"
    assert lines[-1] == (
        "recipe.trainer.callbacks.append(run.Config(PytorchProfilerCallback, start_step=2, end_step=5, "
        f"warmup_steps=1, active_steps=2, trace_dir={str(ctx.run_dir / 'torch_profile')!r}))"
    )
    compile("import nemo_run as run\nrecipe = None\n" + "\n".join(lines), "<recipe>", "exec")  # valid Python
    nsys = nsys_plan(ctx)
    assert nsys.overrides["callbacks"][0]["target"].endswith("NsysCallback")
    assert nsys.overrides["callbacks"][0]["kwargs"]["ranks"] == [0]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["profile.repeat=2"], "one window per run"),
        (["profile.active=0"], "at least 1"),
        (["profile.ranks=[8]"], "outside the world of 8 ranks"),
        (["profile.ranks=[]"], "empty"),
        (["benchmark.iterations=5"], "ends at iteration 6"),
    ],
)
def test_impossible_windows_are_config_errors(tmp_path, overrides, message):
    from tprimat.plugins.amd_primus.profiling import profile_plan

    with pytest.raises(ConfigError, match=message):
        profile_plan(context(tmp_path, *overrides))


def test_nemo_launch_carries_the_callback_and_the_script_applies_it(registry, tmp_path):
    """The settings file holds the plan's callback; the script's add_callbacks appends it (no NeMo needed)."""
    import importlib.util
    import json
    import types

    from tprimat.plugins.nvd_nemo.launcher import SCRIPT, SETTINGS

    ctx = context(tmp_path, "training.global_batch_size=8")
    ctx = LaunchContext(
        run_id=ctx.run_id,
        run_dir=ctx.run_dir,
        config=ctx.config,
        model=ctx.model,
        platform=PlatformInfo(platform="nvidia", device_name="NVIDIA H100 80GB HBM3"),
        profile=registry.profile("nvd_nemo", context=ctx),
    )
    launch = registry.launch("nvd_nemo", context=ctx)
    settings = json.loads(launch.files[SETTINGS])
    assert settings["profile"]["callbacks"] == ctx.profile.overrides["callbacks"]

    spec = importlib.util.spec_from_loader("nemo_pretrain_under_test", loader=None)
    script = importlib.util.module_from_spec(spec)
    exec(compile(launch.files[SCRIPT], SCRIPT, "exec"), script.__dict__)

    class Config:  # nemo_run.Config's shape: the class and its keyword arguments
        def __init__(self, fn, **kwargs):
            self.__fn_or_cls__, self.__arguments__ = fn, kwargs

    recipe = types.SimpleNamespace(trainer=types.SimpleNamespace(callbacks=None))
    callbacks = [
        {"target": "collections.OrderedDict", "kwargs": {**c["kwargs"]}} for c in settings["profile"]["callbacks"]
    ]
    script.add_callbacks(types.SimpleNamespace(Config=Config), recipe, callbacks)
    (added,) = recipe.trainer.callbacks
    assert added.__fn_or_cls__.__name__ == "OrderedDict"
    assert added.__arguments__ == ctx.profile.overrides["callbacks"][0]["kwargs"]
    assert Path(added.__arguments__["trace_dir"]).is_dir()  # NeMo refuses a missing trace_dir
